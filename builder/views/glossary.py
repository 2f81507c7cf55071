"""The one home of the catalog's vocabulary: every term a page uses, defined in plain words.

The methodology page renders the whole list (`macros.html` `glossary`); every other page wraps a
term where it appears in an `<abbr class="term" title="...">` through the `defined` filter, so a
reader can hover or long-press any term instead of looking it up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache

from markupsafe import Markup, escape

from catalog.grade import GRADE_MEANING


@dataclass(frozen=True)
class Term:
    term: str  # as pages write it
    short: str  # one sentence: the tooltip
    anchor: str  # routes.methodology_section(anchor) on the methodology page
    inline: bool  # wrapped wherever it appears; words a badge or unit already defines are not


def _term(term: str, short: str, inline: bool = True) -> Term:
    return Term(term, short, "term-" + re.sub(r"[^a-z0-9]+", "-", term.lower()).strip("-"), inline)


GLOSSARY: list[Term] = [
    _term("tok/s", "tokens per second: how fast the model writes its answer, one stream", inline=False),
    _term("TTFT", "time to first token: how long until the answer starts, in milliseconds"),
    _term("MTP", "multi-token prediction: the model's own small extra head drafts the next tokens"),
    _term("TP", "tensor parallel: the model is split across this many cards (TP2 = two cards)"),
    _term(
        "speculative decoding",
        "a fast drafter guesses several tokens and the model checks them in one step; exact when lossless",
    ),
    _term(
        "speculative depth",
        "how many tokens the drafter guesses per step (num_speculative_tokens in --speculative-config)",
    ),
    _term("draft head", "the small layer that proposes the speculative tokens; an INT4 draft head is quantized"),
    _term("oracle", "the same model served without speculation: the reference output a fast arm must match"),
    _term("arm", "one configuration inside a packet: card count, speculative depth and draft head"),
    _term("packet", "a signed evidence file holding one campaign's configurations, outputs and checks", inline=False),
    _term("fresh server", "a newly started server with an empty compile cache; every result is two of them"),
    _term("G1", "gate 1, repeat-exactness: two fresh servers without speculation give identical tokens"),
    _term("G2", "gate 2: the two speculative servers give identical tokens"),
    _term("G3", "gate 3, lossless: the speculative output is token for token the oracle's"),
    _term("canaries", "four small checks per server (a repeat, a sum, an exact copy, a JSON object)"),
    _term("BF16", "16-bit brain-float weights: the full-precision checkpoint"),
    _term("FP8-dynamic", "8-bit floating-point weights, activations scaled per token at run time"),
    _term("W4A16", "4-bit integer weights, 16-bit activations (an INT4 checkpoint)"),
    _term("INT4", "4-bit integer weights"),
    _term("ceiling", "the physical limit: memory bandwidth divided by the bytes read per token"),
    _term("utilisation", "measured speed as a share of the ceiling: how much is left to gain"),
    _term("measured", inline=False, short="state: measured here on fresh servers; every gate it carries passed"),
    _term("imported", inline=False, short="state: copied from a named published source, not measured by this runner"),
    _term(
        "withheld", inline=False, short="state: output was not identical to the oracle, so the speed is not published"
    ),
    _term("screened", inline=False, short="state: a speed figure with no identity check (speed only)"),
    _term("estimated", inline=False, short="state: a projection from the ceiling, not a measurement"),
    _term("untested", inline=False, short="state: no packet covers this combination"),
    *[_term(f"Evidence {g}", f"grade {g}: {meaning}", inline=False) for g, meaning in GRADE_MEANING.items()],
]

BY_TERM = {t.term: t for t in GLOSSARY}
INLINE = {t.term: t for t in GLOSSARY if t.inline}


@cache
def _pattern() -> re.Pattern[str]:
    words = sorted(INLINE, key=len, reverse=True)
    return re.compile(r"(?<![\w/-])(" + "|".join(re.escape(w) for w in words) + r")(?=\d|\b|$)(?![-/][\w])")


def defined(text: object) -> Markup:
    """Escape `text` and wrap each glossary term in it in an `<abbr>` with its definition."""
    if hasattr(text, "__html__"):  # already markup (a formatted number, a rendered macro)
        return Markup(text.__html__())  # noqa: S704 - it renders itself safely
    return _defined_text(str(text))


@lru_cache(maxsize=8192)
def _defined_text(source: str) -> Markup:
    """The same labels recur on every page: each is marked up once per process."""
    out: list[str] = []
    last = 0
    for match in _pattern().finditer(source):
        out.append(str(escape(source[last : match.start()])))
        term = INLINE[match.group(1)]
        out.append(f'<abbr class="term" title="{escape(term.short)}">{escape(match.group(1))}</abbr>')
        last = match.end()
    out.append(str(escape(source[last:])))
    return Markup("".join(out))  # noqa: S704 - every piece escaped above


def terms_in(text: str) -> set[str]:
    return {m.group(1) for m in _pattern().finditer(text)}
