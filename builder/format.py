"""The one number formatter: every number the site shows (pages, charts, API) passes through here.

Rounding lives in catalog/numbers.py (the runner rounds there too): 98.125 shows 98.13, and the
page, its chart tables and its JSON API always agree digit for digit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache

from markupsafe import escape

from catalog.numbers import fmt as fmt  # re-exported: the site and its tests format through here
from catalog.numbers import rounded

# Tokens -> English words. A common rule of thumb for BPE tokenizers on English prose is about
# 0.75 words per token (about 4 characters per token); the methodology page states it.
WORDS_PER_TOKEN = Decimal("0.75")


@dataclass(frozen=True)
class Num:
    """A formatted number. In a template it renders as `<data class="num" value=..>`, so every
    number on a page is machine-findable; in the API it serialises as a JSON number."""

    text: str
    unit: str = ""

    @property
    def value(self) -> float | int:
        number = Decimal(self.text)
        return int(number) if number == number.to_integral_value() and "." not in self.text else float(number)

    @property
    def display(self) -> str:
        """For reading: thousands grouped (262,144; 10,594.25); `text` stays the plain value."""
        return grouped(self.text)

    def __str__(self) -> str:
        return self.display

    def __html__(self) -> str:
        return _number_html(self.text, self.unit)


def _number_html(text: str, unit: str) -> str:
    # f-strings over markupsafe.escape: the same bytes as Markup.format, which goes through
    # string.Formatter and was a third of a large build's time (bench/, docs/performance.md).
    # A no-break space keeps the unit with its number, also when the page is read as text.
    # Grouping adds only commas, so the escaped text groups as the text does.
    text = _escaped(text)
    unit_html = f'\u00a0<span class="unit">{_escaped(unit)}</span>' if unit else ""
    return f'<data class="num" value="{text}">{grouped(text)}</data>{unit_html}'


_SPECIAL = frozenset("&<>'\"")


def _escaped(text: str) -> str:
    """markupsafe.escape's text, without making a Markup object for a number with nothing to escape
    (a page of per-prompt rows renders tens of thousands)."""
    return str(escape(text)) if not _SPECIAL.isdisjoint(text) else text


def grouped(text: str) -> str:
    """`262144` -> `262,144`, `-10594.25` -> `-10,594.25`; four digits and fewer stay as they are."""
    point = text.find(".")
    if (point if point >= 0 else len(text)) <= 4:  # the usual number: at most four characters before any dot
        return text
    sign, digits = ("-", text[1:]) if text.startswith("-") else ("", text)
    whole, dot, fraction = digits.partition(".")
    if len(whole) <= 4 or not whole.isdigit():
        return text
    return f"{sign}{int(whole):,}{dot}{fraction}"


def num(value: float | int | Decimal, places: int = 2, unit: str = "") -> Num:
    return Num(_text(value, places), unit)


def num_html(value: float | int | Decimal, places: int = 2, unit: str = "") -> str:
    """`num(value, places, unit)` as a page writes it, escaped HTML, for a view that formats a
    table's cells once (per-prompt rows: hundreds a page), so the template writes each as it is."""
    if places == 0 and type(value) is int and not unit:
        return _count_html(value)
    return _number_html(_text(value, places), unit)


@lru_cache(maxsize=4096)
def _count_html(count: int) -> str:
    """A count's HTML: counts recur on every packet page (a suite's prompt lengths, max_tokens)."""
    return _number_html(str(count), "")


def _text(value: float | int | Decimal, places: int) -> str:
    if places == 0 and type(value) is int:  # a count: already its own rounding (most cells of a page)
        return str(value)
    return str(rounded(value, places))


def significant(value: float, digits: int = 2, unit: str = "") -> Num:
    """`value` to `digits` significant figures (half up), as an estimate's precision allows:
    33.02 -> 33, 68.5 -> 69, 147.8 -> 150, 0.8536 -> 0.85."""
    number = Decimal(repr(value))
    if number == 0:
        return Num("0", unit)
    step = Decimal(1).scaleb(number.adjusted() - digits + 1)
    rounded_value = (
        number.quantize(step, rounding=ROUND_HALF_UP)
        if step < 1
        else (number / step).quantize(Decimal(1), rounding=ROUND_HALF_UP) * step
    )
    return Num(format(rounded_value, "f"), unit)


def as_given(value: float | int, unit: str = "") -> Num:
    """A figure a source gives (data/hardware.yaml), with the decimals it was given and no more:
    197 TOPS, not 197.00; 98.5 TFLOPS, not 98.50."""
    if float(value).is_integer():
        return num(int(value), 0, unit)
    text = repr(float(value))  # the shortest spelling that reads back as the figure
    return num(value, len(text.partition(".")[2]) if "e" not in text else 6, unit)


def byte_size(count: float) -> Num:
    """A size in bytes in the unit that shows it: 2.38 MB, not 0.00 GB (decimal units, as vLLM logs them)."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if count >= scale:
            return num(count / scale, 2, unit)
    return num(count, 0, "bytes")


def opt_num(value: float | int | None, places: int = 2, unit: str = "") -> Num | None:
    return None if value is None else num(value, places, unit)


def words_per_second(tok_s: float) -> Num:
    return num(rounded(tok_s, 2) * WORDS_PER_TOKEN, 0, "words/s")


def listed(words: Sequence[str]) -> str:
    """Words as a sentence lists them: `a`, `a and b`, `a, b and c`."""
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 2 else words)


def tokens_label(count: int) -> str:
    """2048 -> 2K, 32768 -> 32K; anything else as written."""
    if count >= 1024 and count % 1024 == 0:
        return f"{count // 1024}K"
    return str(count)
