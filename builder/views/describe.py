"""Words generated from a packet: the methodology sentence and the coverage chips.

Nothing here is typed by hand per packet: every clause is derived from fields the packet carries,
and a clause is left out when the packet does not carry the fact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from builder.format import fmt, listed, tokens_label
from builder.views.results import against_words, unjudged
from catalog.checks.selection import Headline, headline
from catalog.model.packet import Arm, GateResult, Packet
from catalog.recipes.suite import CanarySet, Suite


def lead_arm(packet: Packet, reproductions: Sequence[Packet] = ()) -> Arm:
    """The arm a packet card talks about: the packet's own headline, else its first published arm."""
    return card_arm(packet, headline([packet], reproductions))


def card_arm(packet: Packet, lead: Headline | None) -> Arm:
    """`lead_arm` for a caller that has the packet's own headline already."""
    if lead is not None:
        return lead.arm
    published = [a for a in packet.arms if a.state.published]
    return (published or packet.arms)[0]


def _pair(values: Sequence[float]) -> str:
    return " / ".join(fmt(v) for v in values)


def _values_clause(packet: Packet, arm: Arm) -> str:
    values = arm.server_values
    rows = any(s.rows for s in arm.servers)
    kind = "class-balanced medians" if rows else "values as published"
    if len(values) >= 2:
        return f"Centre of {len(values)} fresh-server {kind} ({_pair(values)} tok/s)"
    if len(values) == 1:
        return f"One fresh-server value ({_pair(values)} tok/s), no pair"
    if arm.published_figure is not None:
        return f"One published figure ({fmt(arm.published_figure)} tok/s) with no fresh-server pair"
    return "No server values"


def _suite_clause(packet: Packet, suites: Mapping[str, Suite]) -> str:
    workload = packet.workload
    suite = suites.get(workload.suite_id)
    where = (
        f"the {suite.id} suite ({len(suite.prompts)} fixed prompts in {len(suite.classes)} classes, "
        f"sha256 {suite.sha256[:12]})"
        if suite is not None
        else f"the {workload.suite_id} suite"
    )
    return (
        f"over {where} through the {workload.api} API, {workload.max_tokens}-token cap, "
        f"temperature {fmt(workload.temperature, 1)}"
    )


def gate_phrase(gate: GateResult, arm: Arm, packet: Packet) -> str:
    if unjudged(gate, packet):
        return f"{gate.gate} NOT PASSED: its oracle is not repeat-exact, so its token arrays were compared with nothing"
    verdict = "passed" if gate.passed else "FAILED"
    head = (
        f"{gate.gate} {verdict}: {gate.exact}/{gate.total}"
        if gate.exact is not None
        else (f"{gate.gate} {verdict} (count not published):")
    )
    # without a count, a failed gate says what did not hold, never the bare definition of a pass
    some = "" if gate.passed or gate.exact is not None else "not all "
    if gate.gate == "G1":
        what = f"{some}token arrays identical across two fresh servers without speculation"
    elif gate.gate == "G2":
        what = f"{some}token arrays identical across the two speculative servers"
    else:
        oracle = f", {_pair(arm.oracle_decode_tok_s)} tok/s" if arm.oracle_decode_tok_s else ""
        who = f"server {gate.server} " if gate.server else ""
        against = against_words(gate, packet).removeprefix("the oracle (").removesuffix(")")
        what = f"{some}{who}complete token arrays exact versus the oracle ({against}{oracle})"
    return f"{head} {what}"


def _server_checks(arm: Arm) -> list[str]:
    clauses: list[str] = []
    servers = [s for s in arm.servers if s.status == "ok"]
    with_canaries = [s for s in servers if s.canaries]
    if servers and len(with_canaries) == len(servers):
        failed = sum(not c.passed for s in servers for c in s.canaries)
        each = len(with_canaries[0].canaries)
        clauses.append(f"canaries passed on every server ({each} each)" if not failed else canary_explanation(arm))
    flags = [s.cache_zero for s in servers]
    if flags and all(f is True for f in flags):
        clauses.append("cache zero on every server")
    elif any(f is False for f in flags):
        clauses.append("cached tokens seen on a server")
    return clauses


def canary_explanation(arm: Arm) -> str:
    """Failed canaries in words: which, where, and what they do (and do not) change."""
    failed = [(s.label, c.id) for s in arm.servers for c in s.canaries if not c.passed]
    if not failed:
        return ""
    where = ", ".join(f"{cid} on server {label}" for label, cid in failed)
    return (
        f"{len(failed)} canary failure{'s' if len(failed) != 1 else ''} ({where}): a canary is a small fixed check "
        "that the server answers correctly (a repeat, a sum, an exact copy, a JSON object); a failure does not "
        "touch the speed or the token-identity gates, but it is a disclosed limitation that lowers the evidence grade"
    )


def config_clause(arm: Arm) -> str:
    config = arm.config
    cards = "one card" if config.tensor_parallel_size == 1 else f"{config.tensor_parallel_size} cards"
    parts = [f"{cards} (TP{config.tensor_parallel_size})"]
    if config.spec_depth:
        parts.append(f"{config.spec_method} speculative depth {config.spec_depth}")
    else:
        parts.append("no speculative decoding")
    if config.draft_head:
        parts.append(config.draft_head)
    if config.graph_capture:
        parts.append(f"graph capture: {config.graph_capture}")
    if config.kv_cache_dtype:
        parts.append(f"KV cache {config.kv_cache_dtype}")
    return ", ".join(parts)


def methodology_sentence(
    packet: Packet, arm: Arm, suites: Mapping[str, Suite], canary_sets: Mapping[str, CanarySet]
) -> str:
    clauses = [_values_clause(packet, arm), _suite_clause(packet, suites)]
    clauses += [gate_phrase(g, arm, packet) for g in arm.gates]
    clauses += _server_checks(arm)
    sentence = ", ".join(clauses)
    sentence += f"; {config_clause(arm)}; {packet.identity.runtime.label}."
    # where it came from (imported, screened) is said once, beside the sentence, by the page
    return sentence


def _depth_chips(arms: Sequence[Arm]) -> list[str]:
    methods = sorted({a.config.spec_method for a in arms if a.config.spec_method})
    depths = sorted({a.config.spec_depth for a in arms})
    if not methods:
        return ["no speculation"]
    chips = ["no speculation"] if 0 in depths else []
    for m in methods:
        mine = sorted({a.config.spec_depth for a in arms if a.config.spec_method == m})
        chips.append(f"{m.upper()}{'/'.join(str(d) for d in mine)}")
    return chips


def packet_heading(packet: Packet, model: str, card: str) -> str:
    """What the site calls a packet, from its fields alone: `Qwen3.5-9B FP8-dynamic · Intel Arc Pro
    B70 · 1 and 2 cards · no speculation, MTP depths 3 and 4, draft INT4 head`. A packet's own
    `title` is its signer's words: the packet page quotes it as theirs, never as a heading."""
    arms = packet.arms
    counts = sorted({a.config.tensor_parallel_size for a in arms})
    cards = listed([str(c) for c in counts]) + (" card" if counts == [1] else " cards")
    parts = ["no speculation"] if any(a.config.spec_depth == 0 for a in arms) else []
    for method in sorted({a.config.spec_method for a in arms if a.config.spec_depth and a.config.spec_method}):
        depths = sorted({a.config.spec_depth for a in arms if a.config.spec_method == method})
        parts.append(f"{method.upper()} depth{'s' if len(depths) > 1 else ''} {listed([str(d) for d in depths])}")
    parts += sorted({a.config.draft_head for a in arms if a.config.spec_depth and a.config.draft_head})
    quantization = packet.identity.model.quantization_label
    return " · ".join([f"{model} {quantization}", card, cards, ", ".join(parts)])


def _span(low: str, high: str) -> str:
    """`c1-c8`, or `2K` where a ladder has one point."""
    return low if low == high else f"{low}-{high}"


def coverage_chips(packet: Packet) -> list[str]:
    arms = packet.arms
    servers = [s for a in arms for s in a.servers]
    chips: list[str] = []
    if any(a.server_values for a in arms):
        chips.append("decode")
    if any(a.ttft_ms is not None for a in arms):
        chips.append("TTFT")
    chips += [f"TP{tp}" for tp in sorted({a.config.tensor_parallel_size for a in arms})]
    chips += _depth_chips(arms)
    if len({a.config.graph_capture for a in arms}) > 1:
        chips.append("graph on/off")
    if any(g.gate in ("G2", "G3") and g.passed for a in arms for g in a.gates):
        chips.append("identity")
    for ladder in packet.ladders:
        if ladder.kind == "concurrency" and ladder.concurrency:
            users = [p.users for p in ladder.concurrency]
            chips.append("ladders " + _span(f"c{min(users)}", f"c{max(users)}"))
        if ladder.kind == "context" and ladder.context:
            depths = [p.depth_tokens for p in ladder.context]
            chips.append("context " + _span(tokens_label(min(depths)), tokens_label(max(depths))))
    if servers and all(s.cache_zero is True for s in servers):
        chips.append("cache-zero")
    if servers and all(s.canaries and all(c.passed for c in s.canaries) for s in servers):
        chips.append("canaries")
    if any(s.rows for s in servers):
        chips.append("per-prompt rows")
    if any(s.spec_metrics for s in servers):
        chips.append("acceptance counters")
    return list(dict.fromkeys(chips))
