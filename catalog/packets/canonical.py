"""Canonical JSON: the one byte form that hashes identify.

The form is Python's `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
allow_nan=False)` in UTF-8: that is the rule, and `_python_form` writes it. Its encoder is slow on
long strings (a packet's 96 base64 arrays: 1.4 ms of the 1.5 ms it took a packet), so the same
bytes are made by orjson wherever the two agree, which they do for every value but one kind of
float: Python spells a float below 1e-4 with an exponent (`1e-05`, `1e-07`), orjson 3.13
differently (`0.00001`, `1e-7`). From 1e16 both write an exponent (`1e+16`). Where Python spells a
float with an exponent, or a value is one orjson writes differently or not at all (an integer past
64 bits, a non-string key, NaN, a lone surrogate), Python's encoder writes it.
tests/catalog/test_canonical.py holds the two to each other over every kind of value.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson

_ORJSON = orjson.OPT_SORT_KEYS
# Python's repr spells a finite float without an exponent exactly when it is 0 or its magnitude lies
# in [1e-4, 1e16): the shortest repr reads back as the same float, so it lies on the same side of
# each bound as the float does (tests/catalog/test_canonical.py holds this at and around both bounds).
_PLAIN_FROM, _PLAIN_BELOW = 1e-4, 1e16


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8, shortest round-trip floats, no NaN."""
    if _orjson_spells_alike(value):
        try:
            return orjson.dumps(value, option=_ORJSON)
        except (TypeError, orjson.JSONEncodeError):
            pass  # an integer past 64 bits, a lone surrogate, a type orjson does not write
    return _python_form(value)


def _python_form(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _orjson_spells_alike(value: Any) -> bool:
    """True when every value inside `value` is one orjson spells as Python's encoder does: no
    float written with an exponent or not finite, no container of a type of its own. (A packet
    holds about 900 values: this loop is written for speed.)"""
    pending: list[Any] = [[value]]
    while pending:
        item: Any = pending.pop()
        for inner in item.values() if type(item) is dict else item:
            kind = type(inner)
            if kind is str or kind is int or kind is bool or inner is None:
                continue
            if kind is dict or kind is list or kind is tuple:
                pending.append(inner)
            elif kind is float:
                if not (_PLAIN_FROM <= abs(inner) < _PLAIN_BELOW or inner == 0.0):
                    return False  # an exponent in Python's spelling, or not finite (NaN compares false)
            elif not isinstance(inner, str | int):  # an enum is written by its value
                return False
    return True


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_sha256(value: Any) -> str:
    return sha256_hex(canonical_json(value))


def pretty_json(value: Any) -> str:
    """The form files are written in: stable, readable, and it re-hashes to the same value."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
