"""Canonical JSON: the byte form every suite, canary set and packet hash is computed over."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.packets.canonical import _python_form, canonical_json, canonical_sha256, pretty_json, sha256_hex
from tests.profiles import examples

# Unicode (BMP and astral), escapes, nesting with unsorted keys, floats that print differently in
# other languages (0.1, 1e-7, 1.0), an int past 64 bits and an empty list and object.
SAMPLE = {
    "z": [3, 2.5, {"b": None, "a": True}],
    "ü": "naïve — 日本語 🚀",
    "f": 0.1,
    "tiny": 1e-7,
    "one": 1.0,
    "big": 2**64 + 1,
    "neg": -17,
    "esc": 'line\nquote" tab\t',
    "nested": {"y": {"x": []}, "A": {}},
}

SAMPLE_BYTES = (
    b'{"big":18446744073709551617,"esc":"line\\nquote\\" tab\\t","f":0.1,"neg":-17,'
    b'"nested":{"A":{},"y":{"x":[]}},"one":1.0,"tiny":1e-07,"z":[3,2.5,{"a":true,"b":null}],'
    + '"ü":"naïve — 日本語 🚀"}'.encode()
)

# Golden vector. It pins the canonical form itself (key order, separators, UTF-8 without \u
# escapes, Python's float spelling "1e-07" and "1.0", big ints verbatim). Every published packet's
# id and sha256, and every suite hash recorded in a packet, were computed with this form: if this
# test fails, every sealed packet in packets/ stops verifying. Do not "fix" the vector; fix the code.
SAMPLE_SHA256 = "e721572cb41e543e4c986a08beaba2435bdaa4d0b5d7e50c2e92be5b26e94d80"


def test_canonical_bytes_are_exact() -> None:
    assert canonical_json(SAMPLE) == SAMPLE_BYTES


def test_golden_sha256_vector() -> None:
    assert canonical_sha256(SAMPLE) == SAMPLE_SHA256
    assert sha256_hex(SAMPLE_BYTES) == SAMPLE_SHA256


def test_sha256_hex_known_vectors() -> None:
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_hex(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.1, b"0.1"),
        (1e-7, b"1e-07"),
        (1.0, b"1.0"),
        (1, b"1"),
        (-0.0, b"-0.0"),
        (1e21, b"1e+21"),
        (123456789.125, b"123456789.125"),
        (2**70, b"1180591620717411303424"),
        ("é", '"é"'.encode()),
        ("\u0000", b'"\\u0000"'),
        ([], b"[]"),
        ({}, b"{}"),
    ],
)
def test_scalar_forms(value: object, expected: bytes) -> None:
    assert canonical_json(value) == expected


def test_floats_round_trip_exactly() -> None:
    for value in (0.1, 1e-7, 46.06681991197249, 1 / 3, 5e-324, 1.7976931348623157e308):
        assert float(canonical_json(value)) == value


def test_int_and_float_hash_differently() -> None:
    # Pydantic float fields dump 5 as 5.0, so packets are hashed from the model dump, not the file.
    assert canonical_sha256({"x": 5}) != canonical_sha256({"x": 5.0})


def test_key_order_does_not_matter() -> None:
    reordered = dict(reversed(list(SAMPLE.items())))
    reordered["nested"] = {"A": {}, "y": {"x": []}}
    reordered["z"] = [3, 2.5, {"a": True, "b": None}]
    assert list(reordered) != list(SAMPLE)
    assert canonical_json(reordered) == SAMPLE_BYTES


def test_list_order_does_matter() -> None:
    assert canonical_sha256([1, 2]) != canonical_sha256([2, 1])


def test_whitespace_of_the_source_does_not_matter() -> None:
    compact = json.dumps(SAMPLE, separators=(",", ":"))
    spread = json.dumps(SAMPLE, indent=4, ensure_ascii=True)
    assert compact != spread
    assert canonical_json(json.loads(compact)) == canonical_json(json.loads(spread)) == SAMPLE_BYTES


def test_pretty_form_rehashes_to_the_same_value() -> None:
    text = pretty_json(SAMPLE)
    assert text.endswith("}\n")
    assert "日本語" in text  # written as UTF-8, not \u escapes
    assert text.startswith('{\n  "big": 18446744073709551617,\n')
    assert canonical_sha256(json.loads(text)) == SAMPLE_SHA256


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        canonical_json({"x": [1, {"y": bad}]})
    with pytest.raises(ValueError):
        pretty_json(bad)


def test_non_json_values_are_rejected() -> None:
    with pytest.raises(TypeError):
        canonical_json({"x": {1, 2}})
    with pytest.raises(TypeError):
        canonical_json({("a",): 1})


# ---- orjson writes what Python's encoder writes (catalog/packets/canonical.py) ----

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
@settings(max_examples=examples(500), deadline=None)
def test_the_fast_form_is_pythons_form(value: object) -> None:
    try:
        expected = _python_form(value)
    except (ValueError, UnicodeEncodeError):  # a lone surrogate: neither writes it
        with pytest.raises((ValueError, UnicodeEncodeError)):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


def test_every_float_spelling_is_pythons() -> None:
    # each power of ten Python switches notation at, either side of it, and both signs
    values = [s * m * 10.0**e for e in range(-8, 20) for m in (1.0, 1.5, 9.999999999999998) for s in (1, -1)]
    values += [math.nextafter(v, 0.0) for v in values] + [math.nextafter(v, math.inf) for v in values]
    values += [0.0, -0.0, 5e-324, 1.7976931348623157e308]
    assert canonical_json(values) == _python_form(values)
    for value in values:  # one at a time: whether each is written by orjson is decided value by value
        assert canonical_json([value]) == _python_form([value]), value
    assert canonical_json({"x": 1e-05}) == b'{"x":1e-05}'


def test_every_character_is_written_as_python_writes_it() -> None:
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    assert canonical_json({text[:70000]: text}) == _python_form({text[:70000]: text})


def test_keys_sort_by_code_point_beyond_the_bmp() -> None:
    value = {"\U0001f680": 1, "\uffff": 2, "a": 3, "é": 4}
    assert canonical_json(value) == _python_form(value)


def test_a_subclassed_container_is_written_by_pythons_encoder() -> None:
    class Ordered(dict[str, object]):
        pass

    assert canonical_json(Ordered(b=1e-7, a=1)) == b'{"a":1,"b":1e-07}'
