"""The one home of the catalog's vocabulary: every term a page uses, defined in plain words.

The methodology page renders the whole list (`macros.html` `glossary`); every other page wraps a
term where it appears in an `<abbr class="term" title="...">` through the `defined` filter, so a
reader can hover or long-press any term instead of looking it up (the first use on a page carries
the definition; site.js gives it to every later use). A term that is an ordinary word
elsewhere (an optimisation band's name) is wrapped only where a page shows it as that term, by
the `term` filter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache

from markupsafe import Markup, escape

from catalog.checks.grade import GRADE_MEANING
from catalog.projection import OPTIMISATION_BANDS


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
    _term("TPOT", "time per output token: a request's mean gap between tokens after the first, in milliseconds"),
    _term(
        "ITL",
        "inter-token latency: the gap between two consecutive arrivals of tokens, over a load level; tokens that "
        "arrive in one chunk count once (TPOT is per token)",
    ),
    _term("p50", "the median: half the requests (or token gaps) were faster"),
    _term("p90", "90th percentile: nine in ten were at least this fast"),
    _term("p99", "99th percentile: the slow tail, 99 in 100 were at least this fast"),
    _term("goodput", "the share of a level's requests that completed and met every service-level objective"),
    _term("closed loop", "a fixed number of users, each sending its next request when the last one finished"),
    _term("open loop", "requests sent at random (Poisson) arrival times of a fixed rate, whatever has finished"),
    _term(
        "client lag",
        "how late the load generator sent a request against its plan; over the bound the level is unusable",
    ),
    _term("utilisation", "measured speed as a share of the ceiling: how much is left to gain"),
    _term("optimisation band", "the utilisation named in five bands, from untuned to at the limit"),
    # a band's name is an ordinary word elsewhere ("tuned serving stacks"): defined where it names a band
    *[_term(b.name, f"optimisation band: {b.meaning}", inline=False) for b in OPTIMISATION_BANDS],
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
    """Escape `text` and wrap each glossary term in it in an `<abbr>` with its definition: for text
    a view composes, outside a page's first-use accounting (templates use `marked`)."""
    return _markup(text, titled=True)


def marked(text: object) -> Markup:
    """`defined` for a page template: each term in a bare `<abbr class="term">`. Once the page is
    rendered, `title_first_uses` gives the first use of each term its definition (site.js copies it
    onto later uses), so a page that names MTP a hundred times carries the definition once and
    stays under its size budget, and no use has to ask what the page defined so far."""
    return _markup(text, titled=False)


def _markup(text: object, titled: bool) -> Markup:
    if type(text) is str:  # the usual case: a label or a value, wrapped once per process
        return _wrapped(text, titled)
    if isinstance(text, Markup):
        return text
    if hasattr(text, "__html__"):  # already markup (a formatted number, a rendered macro)
        return Markup(text.__html__())  # noqa: S704 - it renders itself safely
    return _wrapped(str(text), titled)


@lru_cache(maxsize=8192)
def _wrapped(source: str, titled: bool) -> Markup:
    """`source` escaped, its glossary terms wrapped. The same labels recur on every page: each is
    wrapped once per process."""
    out: list[str] = []
    last = 0
    for match in _pattern().finditer(source):
        out += [str(escape(source[last : match.start()])), _abbr(match.group(1), titled)]
        last = match.end()
    out.append(str(escape(source[last:])))
    return Markup("".join(out))  # noqa: S704 - every piece escaped


def _abbr(name: str, titled: bool) -> str:
    entry = BY_TERM[name]
    return f"{_TITLED_OPEN[entry.term] if titled else _BARE_OPEN}{escape(entry.term)}</abbr>"


def term(name: str) -> Markup:
    """`name`, a glossary term a page shows on its own (an optimisation band), in its bare `<abbr>`,
    titled at its first use like `marked`."""
    return Markup(_abbr(name, titled=False))  # noqa: S704 - escaped in _abbr


_BARE_OPEN = '<abbr class="term">'
_TITLED_OPEN = {t.term: f'<abbr class="term" title="{escape(t.short)}">' for t in GLOSSARY}
_BY_SPELLING = {str(escape(t.term)): t.term for t in GLOSSARY}  # as an <abbr> spells it


def title_first_uses(html: str) -> str:
    """A rendered page with the first bare `<abbr>` of each term given its definition as `title`."""
    after_each = html.split(_BARE_OPEN)  # a split and a join on C speed; a regex scan took twice as long
    out = [after_each[0]]
    seen: set[str] = set()
    for rest in after_each[1:]:
        end = rest.find("</abbr>")
        spelled = rest[:end]
        if end >= 0 and spelled not in seen and spelled in _BY_SPELLING:
            seen.add(spelled)
            out.append(_TITLED_OPEN[_BY_SPELLING[spelled]])
        else:
            out.append(_BARE_OPEN)
        out.append(rest)
    return "".join(out)


def terms_in(text: str) -> set[str]:
    return {m.group(1) for m in _pattern().finditer(text)}
