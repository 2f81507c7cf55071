"""The methodology page. The definitions are the docstrings of the code that computes them
(catalog.model.metrics, catalog.checks.grade, catalog.checks.selection, catalog.model.packet), rendered,
never retyped."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from markupsafe import Markup

import catalog.checks.evidence
import catalog.checks.grade
import catalog.checks.history
import catalog.checks.repeats
import catalog.checks.selection
import catalog.model.energy
import catalog.model.metrics
import catalog.model.packet
import catalog.packets.seal
import catalog.packets.signing
from builder.format import WORDS_PER_TOKEN, Num, num
from builder.markdown import render_markdown
from builder.views.common import Fact
from builder.views.glossary import GLOSSARY, Term
from builder.views.results import STATE_LABELS, STATE_MEANINGS
from catalog.model.delivery import TOKENS_PER_READ_BOUND
from catalog.model.load_sweep import ALONE_BOUND


@dataclass(frozen=True)
class DocSection:
    id: str
    title: str
    source: str
    html: Markup


@dataclass(frozen=True)
class MethodologyView:
    sections: list[DocSection]
    formulas: list[Fact]
    gates: list[Fact]
    states: list[Fact]
    grades: list[Fact]
    words_per_token: Num
    naming: list[Fact]
    glossary: list[Term]


def _doc(section_id: str, title: str, obj: object, name: str) -> DocSection:
    text = inspect.cleandoc(inspect.getdoc(obj) or "")
    return DocSection(section_id, title, name, render_markdown(text))


FORMULAS = [
    Fact(
        "decode rate of one completion",
        "(100 − 1) / (t[100] − t[1])",
        "t[i]: client arrival time of token i; token 0 is the first token; tokens counted from token ids; none "
        f"when tokens 1..100 came in reads of over {TOKENS_PER_READ_BOUND} tokens on average (delivered late)",
    ),
    Fact("server decode rate", "median over classes of (median over the class's prompts)", "class-balanced median"),
    Fact("published value (centre)", "(server A + server B) / 2", "two fresh servers; the range A–B is always shown"),
    Fact(
        "centre of n independent repeats",
        "mean ± t(0.975, n − 1) · s / √n",
        "a 95 % t-interval over the repeats' centres (one packet each); one repeat: measured once, no interval",
    ),
    Fact("TTFT", "t[0] − t(send)", "client clock (perf_counter), per prompt; a server's TTFT is the median"),
    Fact(
        "aggregate throughput",
        "Σ completion tokens / batch wall time",
        "concurrency ladder, requests released together",
    ),
    Fact(
        "load level: aggregate tok/s",
        "Σ output tokens / level duration",
        "duration: first planned send to last request finished; closed loop (N users) or open loop (Poisson rate)",
    ),
    Fact(
        "load level: tok/s per user",
        "median over requests of (tokens − 1) / (t[last] − t[0])",
        "what one user sees at that load; TPOT is its inverse in ms; none, and the level marked unusable, when a "
        f"response came in one read or in reads of over {TOKENS_PER_READ_BOUND} tokens on average; the level is "
        f"also marked unusable when it is over {ALONE_BOUND:g} × the arm's single-stream rate (batching never "
        "serves a user faster than one alone)",
    ),
    Fact(
        "p50 / p90 / p99",
        "linear interpolation between the closest ranks",
        "TTFT and end-to-end per request; ITL over the gaps between distinct arrivals (per chunk, as vLLM's "
        "benchmark counts it), TPOT per token",
    ),
    Fact("goodput", "requests completed within every objective / requests planned", "objectives recorded per sweep"),
    Fact(
        "client lag",
        "p99 over the level of (sent − planned)",
        "over the sweep's bound the client set the pace: the level is marked unusable and drawn apart",
    ),
    Fact("acceptance rate", "accepted tokens / draft tokens", "differences of vLLM /metrics counters over the suite"),
    Fact("mean acceptance length", "1 + accepted tokens / drafts", "tokens emitted per target-model step"),
    Fact(
        "words per second",
        f"tok/s × {WORDS_PER_TOKEN}",
        "about 0.75 English words per token: a rule of thumb, not a measurement",
    ),
]

GATES = [
    Fact(
        "G1 repeat-exactness",
        "oracle A vs oracle B",
        "two fresh servers without speculation must return identical token arrays for every prompt",
    ),
    Fact(
        "G2 speculative repeat",
        "speculative A vs speculative B",
        "the two speculative servers must agree token for token",
    ),
    Fact(
        "G3 lossless",
        "each speculative server vs the oracle",
        "every prompt's token array identical to the oracle's; the first divergence index is recorded. "
        "Failing G3 withholds the result: it is never published as measured",
    ),
    Fact("canaries", "chat API, temperature 0", "a repeat, a multiplication, an exact copy and a typed JSON object"),
    Fact(
        "cache zero",
        "usage.prompt_tokens_details.cached_tokens = 0",
        "on every row, with prefix caching off: no result is flattered by a warm cache",
    ),
]

NAMING = [
    Fact("TPOT (vLLM)", "(E2E − TTFT) / (n − 1)", "vLLM's time per output token excludes the first token"),
    Fact(
        "ITL (other tools)",
        "the same quantity",
        "another popular benchmark calls this ITL and includes TTFT in its TPOT",
    ),
    Fact(
        "decode tok/s (here)",
        "tokens 1..100 after the first",
        "not 1 / TPOT: a fixed window from token arrival times, so long tails and TTFT do not blur it",
    ),
]


def methodology_view() -> MethodologyView:
    return MethodologyView(
        sections=[
            _doc(
                "metrics-rule", "Metrics, as the code defines them", catalog.model.metrics, "catalog/model/metrics.py"
            ),
            _doc("packets", "Evidence packets and states", catalog.model.packet, "catalog/model/packet.py"),
            _doc("packet-bytes", "A packet's bytes, digest and id", catalog.packets.seal, "catalog/packets/seal.py"),
            _doc("signatures", "Who measured it: signatures", catalog.packets.signing, "catalog/packets/signing.py"),
            _doc(
                "arm-state",
                "How an arm's state is decided",
                catalog.model.packet.arm_state,
                "catalog.model.packet.arm_state",
            ),
            _doc("evidence", "Re-deriving every number", catalog.checks.evidence, "catalog/checks/evidence.py"),
            _doc("grade-rule", "How the evidence grade is computed", catalog.checks.grade, "catalog/checks/grade.py"),
            _doc("headline", "The headline rule", catalog.checks.selection, "catalog/checks/selection.py"),
            _doc("repeats", "Repeats and confidence intervals", catalog.checks.repeats, "catalog/checks/repeats.py"),
            _doc("history", "History and regressions", catalog.checks.history, "catalog/checks/history.py"),
            _doc(
                "energy",
                "Energy per token: power integrated, checked against a counter",
                catalog.model.energy,
                "catalog/model/energy.py",
            ),
        ],
        formulas=FORMULAS,
        gates=GATES,
        states=[Fact(STATE_LABELS[s], s, STATE_MEANINGS[s]) for s in STATE_LABELS],
        grades=[Fact(g, g, m) for g, m in catalog.checks.grade.GRADE_MEANING.items()],
        words_per_token=num(WORDS_PER_TOKEN),
        naming=NAMING,
        glossary=GLOSSARY,
    )
