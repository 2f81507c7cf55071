"""Rounding of every number a reader sees: the site (builder/format.py) and the runner's
terminal tables (runner/reproduce.py) both round here, so a figure printed after a reproduction
reads digit for digit as the site shows it.

Rounding is decimal ROUND_HALF_UP on the shortest repr of the float, so 98.125 shows 98.13.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, getcontext, localcontext
from functools import lru_cache

_QUANTUM = {places: Decimal(1).scaleb(-places) for places in range(7)}


def rounded(value: float | int | Decimal, places: int = 2) -> Decimal:
    if isinstance(value, Decimal):
        return _quantized(value, places)
    return _rounded_repr(repr(value), places)


@lru_cache(maxsize=1 << 16)  # keyed by the number's text: a page formats each figure several times
def _rounded_repr(text: str, places: int) -> Decimal:
    return _quantized(Decimal(text), places)


def _quantized(exact: Decimal, places: int) -> Decimal:
    quantum = _QUANTUM.get(places) or Decimal(1).scaleb(-places)
    needed = exact.adjusted() + places + 2
    if needed <= getcontext().prec:  # the usual case: no context to set up (a page formats thousands)
        return exact.quantize(quantum, rounding=ROUND_HALF_UP)
    with localcontext() as context:  # room for every digit: 1e300 must not overflow the default 28
        context.prec = needed
        return exact.quantize(quantum, rounding=ROUND_HALF_UP)


def fmt(value: float | int | Decimal, places: int = 2) -> str:
    """Plain text form, for sentences, attributes and terminal tables."""
    return str(rounded(value, places))
