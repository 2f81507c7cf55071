"""Compact integer arrays inside packet JSON: base64 of little-endian unsigned 32-bit integers
(token ids and times, power in milliwatts) or signed 64-bit integers (power sample times, which
may precede their window, and cumulative energy counters in microjoules, which exceed 32 bits).

Token ids and token times are most of a packet. As JSON lists they cost ~6 bytes a value and a
Python object each on every read; as base64 they cost 5.3 bytes and decode at C speed into an
`array('I')`. The encoding is canonical: one array has exactly one spelling (standard alphabet,
padded, no whitespace, unused bits zero), so the file's bytes stay a function of its content. An
array is read only from that spelling, and keeps it (`Decoded`): the reader's canonical-bytes check
writes it back as read instead of encoding the array again.
"""

from __future__ import annotations

import base64
import binascii
import sys
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, SupportsIndex

import numpy
from pydantic import PlainSerializer, PlainValidator, SerializationInfo, WithJsonSchema

ITEM = "I"
UINT32_MAX = 2**32 - 1
if array(ITEM).itemsize != 4:  # pragma: no cover - every platform CPython supports today
    raise ImportError("array('I') is not 32 bits wide on this platform")
_SWAP = sys.byteorder != "little"


def to_uint32(values: Iterable[int]) -> array[int]:
    """An array of unsigned 32-bit integers; OverflowError names a value out of range."""
    return array(ITEM, values)


class Decoded(array):  # type: ignore[type-arg]  # array is generic only to type checkers
    """An array decoded from base64 text that was its canonical spelling, and that text (`text`):
    the reader's canonical-bytes check, made on a packet just validated from its bytes, writes the
    text back instead of encoding the array again (`AS_READ`; re-encoding a packet's 96 arrays was
    0.22 ms of the 3.7 ms its verification takes, bench/FINDINGS.md). Anywhere else an array is
    encoded from its values, so one changed after it was read is written as it now is. A copy or a
    pickle of it is a plain array."""

    __slots__ = ("text",)
    text: str

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[type[array[int]], tuple[str, bytes]]:
        return array, (self.typecode, self.tobytes())


AS_READ = {"arrays": "as read"}
"""The serialisation context (`model_dump(context=AS_READ)`) in which an array read from text is
written as that text: only for a model just validated from the bytes being checked."""


def _serializer(encode: Callable[[array[int]], str]) -> Callable[[array[int], SerializationInfo], str]:
    def serialize(values: array[int], info: SerializationInfo) -> str:
        if type(values) is Decoded and info.context is AS_READ:
            return values.text
        return encode(values)

    return serialize


def encode_uint32(values: array[int]) -> str:
    if _SWAP:  # pragma: no cover - big-endian hosts
        values = array(ITEM, values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def _decode(text: str, typecode: str) -> array[int]:
    """Little-endian integers of `typecode` from base64 text in its one canonical spelling, at C
    speed, keeping the text (`Decoded`)."""
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)  # the alphabet only, padding only at the end
    except (binascii.Error, ValueError):
        raise ValueError("is not base64 (standard alphabet, padded)") from None
    if not _canonical(text, raw):
        raise ValueError("is not the canonical base64 spelling of its bytes (padded, unused bits zero)")
    values = Decoded(typecode)
    if len(raw) % values.itemsize:
        raise ValueError(f"decodes to {len(raw)} bytes, not a whole number of {8 * values.itemsize}-bit integers")
    values.frombytes(raw)
    if _SWAP:  # pragma: no cover - big-endian hosts
        values.byteswap()
    values.text = text
    return values


def _canonical(text: str, raw: bytes) -> bool:
    """Whether strictly decoded `text` is what encoding `raw` writes. Its length must be that of
    the encoding; each whole group of four characters is then the one spelling of its three bytes,
    so only a last, partial group can differ (unused bits set): it is encoded again and compared."""
    if len(text) != (len(raw) + 2) // 3 * 4:
        return False
    whole = len(raw) - len(raw) % 3
    return whole == len(raw) or binascii.b2a_base64(raw[whole:], newline=False).decode("ascii") == text[-4:]


def decode_uint32(text: str) -> array[int]:
    """The integers of base64 text, refused unless the text is their canonical spelling."""
    return _decode(text, ITEM)


def _validate(value: Any) -> array[int]:
    """A file holds the base64 text; code passes an array (never a list, which JSON could hold)."""
    if isinstance(value, array) and value.typecode == ITEM:
        return value
    if isinstance(value, str):
        return decode_uint32(value)
    raise ValueError("must be base64 text of little-endian uint32 integers")


if TYPE_CHECKING:
    _Array = array[int]
else:
    _Array = array  # not subscriptable at run time before Python 3.12

UInt32Array = Annotated[
    _Array,
    PlainValidator(_validate),
    PlainSerializer(_serializer(encode_uint32), return_type=str),
    WithJsonSchema({"type": "string", "contentEncoding": "base64", "description": "little-endian uint32 array"}),
]


INT64 = "q"
if array(INT64).itemsize != 8:  # pragma: no cover - every platform CPython supports today
    raise ImportError("array('q') is not 64 bits wide on this platform")


def to_int64(values: Iterable[int]) -> array[int]:
    """An array of signed 64-bit integers; OverflowError names a value out of range."""
    return array(INT64, values)


def encode_int64(values: array[int]) -> str:
    if _SWAP:  # pragma: no cover - big-endian hosts
        values = array(INT64, values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def decode_int64(text: str) -> array[int]:
    """As decode_uint32, for signed 64-bit integers."""
    return _decode(text, INT64)


def _validate_int64(value: Any) -> array[int]:
    if isinstance(value, array) and value.typecode == INT64:
        return value
    if isinstance(value, str):
        return decode_int64(value)
    raise ValueError("must be base64 text of little-endian int64 integers")


Int64Array = Annotated[
    _Array,
    PlainValidator(_validate_int64),
    PlainSerializer(_serializer(encode_int64), return_type=str),
    WithJsonSchema({"type": "string", "contentEncoding": "base64", "description": "little-endian int64 array"}),
]


# --- checks over many arrays at once ------------------------------------------------------------
# A packet holds about a hundred arrays of a few hundred integers: checked one by one in Python
# (a list each, then sorted, or max() over the array) they took 0.7 and 1.0 ms of a demo packet's
# verification; numpy reads all of them as one buffer in a hundredth of that. Only the verdict is
# taken from numpy: where a check fails, the caller finds and words the failing value itself.


def _joined(arrays: Sequence[array[int]]) -> numpy.ndarray[Any, Any]:
    """Every array end to end, as one numpy view of the same integers (the arrays share one typecode)."""
    return numpy.frombuffer(b"".join(arrays), dtype=numpy.dtype(arrays[0].typecode))


def decreasing(arrays: Sequence[array[int]]) -> list[int]:
    """The index of each array in which a value is smaller than the one before it."""
    if not arrays:
        return []
    values = _joined(arrays)
    drops = numpy.flatnonzero(values[1:] < values[:-1]) + 1  # where the smaller value sits
    if not len(drops):
        return []
    starts = numpy.cumsum([0, *(len(a) for a in arrays)])
    owners = numpy.searchsorted(starts, drops, side="right") - 1
    # a drop at an array's first value compares it with the last value of the array before
    return sorted({int(i) for i, at in zip(owners, drops, strict=True) if at != starts[i]})


def largest(arrays: Sequence[array[int]]) -> int | None:
    """The largest value in any of the arrays; None when they hold none."""
    if not any(arrays):
        return None
    return int(_joined(arrays).max())
