"""The arms of a packet page: launch command, gates, every server and its per-prompt rows, ladders."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from markupsafe import escape

from builder.format import Num, num, num_html, opt_num
from builder.views.common import Fact
from builder.views.describe import canary_explanation, config_clause, gate_phrase
from builder.views.energy import energy_facts, one_absence, window_figure
from builder.views.load_sweep import LadderCommand, WithheldText, ladder_command, withheld_cell
from builder.views.results import STATE_LABELS, state_reason
from catalog.model.metrics import decode_rate
from catalog.model.packet import (
    DIVERGENCE_CAUSES,
    Arm,
    GateResult,
    Packet,
    PromptRow,
    ServerFacts,
    ServerRun,
    State,
)
from catalog.recipes.shown import ShownCommand, multiline

TOKEN_PREVIEW = 24


class RowCells(NamedTuple):
    """One per-prompt row, every cell made page-ready once here: escaped HTML (text escaped, a
    number as its markup). A packet page has hundreds of cells; the template writes each row's
    cells into its row pattern as they are, with no lookup or escape per cell."""

    prompt_id: str
    class_id: str
    prompt_tokens: str
    completion_tokens: str
    ttft_ms: str
    decode_tok_s: str  # — when the completion is too short for a rate
    finish_reason: str
    cached_tokens: str  # "not recorded" when the server reported none
    token_preview: str


@dataclass(frozen=True)
class ServerView:
    label: str
    status: str
    error: str | None
    decode_tok_s: Num | None
    ttft_ms: Num | None
    facts: list[Fact]
    canaries: list[Fact]
    rows: list[RowCells]
    withheld: bool = False  # its arm is withheld: its figures are struck, never shown as published


@dataclass(frozen=True)
class GateView:
    gate: str
    passed: bool
    phrase: str
    divergence_summary: str
    note: str | None
    server: str | None = None
    profile: str | None = None  # where and why the outputs part, when they do


@dataclass(frozen=True)
class ArmView:
    id: str
    label: str
    state: str
    state_label: str
    reason: str | None
    value: Num | None
    struck: Num | None
    config: str
    command: str | None
    docker: str | None  # the docker form, or the exact launch command beside the portable one
    differences: list[str]  # a composed command: how it differs from what the source measured
    env: str | None
    servers: list[ServerView]
    command_label: str  # what `command` is: as the servers ran it, or composed from the recipe
    gates: list[GateView]
    facts: list[Fact]
    note: str | None
    canary_note: str | None


@dataclass(frozen=True)
class LadderView:
    arm: str
    arm_label: str
    kind: str
    columns: list[str]
    rows: list[list[str | Num | WithheldText | None]]
    withheld: bool = False  # its arm is withheld: every cell is struck (builder/views/load_sweep.py)
    command: LadderCommand | None = None  # the ladder's own server command, or why none is shown
    energy_absent: str = ""  # why no row has energy, when one reason holds for all: said once, no column


NO_VALUE = "—"
NOT_RECORDED = "not recorded"
# the first token ids of a row, by how many it shows: %-formatting writes ints as str() does, faster
_PREVIEW = [" ".join(["%d"] * count) for count in range(TOKEN_PREVIEW + 1)]


def _row(row: PromptRow) -> RowCells:
    preview = _preview(row.token_ids[:TOKEN_PREVIEW].tobytes())
    if row.completion_tokens > TOKEN_PREVIEW:
        preview += " …"
    ttft_ms = row.ttft_ms
    rate = decode_rate(row.token_times_us)
    return RowCells(
        _text(row.prompt_id),
        _text(row.class_id),
        num_html(row.prompt_tokens, 0),
        num_html(row.completion_tokens, 0),
        NO_VALUE if ttft_ms is None else num_html(ttft_ms),
        NO_VALUE if rate is None else num_html(rate),
        _text(row.finish_reason) if row.finish_reason else NO_VALUE,
        NOT_RECORDED if row.cached_tokens is None else num_html(row.cached_tokens, 0),
        preview,  # integers and spaces
    )


@lru_cache(maxsize=256)
def _preview(ids: bytes) -> str:
    """The first token ids of a row (uint32, as its array holds them), spaced. The servers of a
    packet whose gates passed wrote the same tokens: three rows in four of a benchmark packet page
    are found here (0.3 us a row, 2.7 us formatted, ~0.08 ms a page)."""
    shown = memoryview(ids).cast("I")
    return _PREVIEW[len(shown)] % tuple(shown)


@lru_cache(maxsize=1024)
def _text(text: str) -> str:
    """A row's text escaped: prompt and class ids and finish reasons recur on every packet page."""
    return str(escape(text))


def _server(server: ServerRun, packet: Packet, withheld: bool = False) -> ServerView:
    facts = [Fact("cache zero", {True: "yes", False: "NO", None: "not recorded"}[server.cache_zero])]
    if server.server_version:
        facts.append(Fact("vLLM version", server.server_version, "as the server answered GET /version"))
    if server.startup_s is not None:
        facts.append(Fact("startup", num(server.startup_s, unit="s")))
    if server.spec_metrics:
        sm = server.spec_metrics
        facts += [
            Fact("drafts", num(sm.drafts, 0)),
            Fact("draft tokens", num(sm.draft_tokens, 0)),
            Fact("accepted tokens", num(sm.accepted_tokens, 0)),
        ]
        if sm.acceptance_rate is not None:
            facts.append(Fact("acceptance rate", num(sm.acceptance_rate)))
        if sm.mean_acceptance_length is not None:
            facts.append(Fact("mean acceptance length", num(sm.mean_acceptance_length)))
    if server.resolved is not None:
        facts += resolved_facts(server.resolved)
    if server.log:
        facts.append(Fact("log", server.log))
    if server.rows and packet.provenance.kind == "measured":
        facts += energy_facts(server.energy, packet)
    return ServerView(
        label=server.label,
        status=server.status,
        error=server.error,
        decode_tok_s=opt_num(server.decode_tok_s, unit="tok/s"),
        ttft_ms=opt_num(server.ttft_ms, unit="ms"),
        facts=facts,
        canaries=[Fact(c.id, "passed" if c.passed else "FAILED", c.detail) for c in server.canaries],
        rows=[_row(r) for r in server.rows],
        withheld=withheld,
    )


def resolved_facts(resolved: ServerFacts) -> list[Fact]:
    """What vLLM resolved for a server, as the server reported it: what changes numbers or bits."""
    source = "as the server reported it (GET /server_info)" if resolved.source == "server_info" else "from its log"
    on_off = {True: "on", False: "off", None: None}
    shown = [
        ("async scheduling", on_off[resolved.async_scheduling]),
        ("eager (no compile, no graphs)", {True: "yes", False: "no", None: None}[resolved.enforce_eager]),
        ("compilation mode", resolved.compilation_mode),
        ("graph capture", resolved.cudagraph_mode),
        ("batch-invariant kernels", on_off[resolved.batch_invariant]),
        ("stream interval", None if resolved.stream_interval is None else f"{resolved.stream_interval} token(s)"),
    ]
    facts = [Fact(name, value, source) for name, value in shown if value is not None]
    facts += [Fact("switch as vLLM read it", f"{name}={value}", source) for name, value in sorted(resolved.env.items())]
    if resolved.unknown_env:
        facts.append(Fact("ignored by vLLM", ", ".join(resolved.unknown_env), "unknown to this vLLM"))
    return facts


def _prompt_names(arm: Arm, gate: GateResult, count: int) -> list[str]:
    """The prompts of a gate, in its order: the rows of the server it compared."""
    server = next((s for s in arm.servers if s.label == gate.server), arm.servers[0] if arm.servers else None)
    return [r.prompt_id for r in server.rows] if server and len(server.rows) == count else []


def divergence_summary(arm: Arm, gate: GateResult) -> str:
    """Which prompts diverged and at which token: `prompt-id @ index`, with the token on each side
    (`this ≠ other`) where the gate recorded them, named through the rows of the server the gate
    compared (their order is the gate's order)."""
    found = gate.first_divergence
    if not found:
        return ""
    names = _prompt_names(arm, gate, len(found))
    tokens = gate.divergences if len(gate.divergences) == len(found) else [None] * len(found)
    diverged = []
    for i, index in enumerate(found):
        if index is None:
            continue
        pair = tokens[i]
        sides = f" ({_token(pair.token)} ≠ {_token(pair.other)})" if pair is not None else ""
        diverged.append(f"{names[i] if names else f'#{i}'} @ {index}{sides}")
    if not diverged:
        return f"identical on all {len(found)}"
    return "; ".join(diverged) + f" ({len(found) - len(diverged)} identical)"


def _token(token: int | None) -> str:
    return "end" if token is None else str(token)


def divergence_profile(arm: Arm, gate: GateResult) -> str | None:
    """How a failed gate's outputs part, in a sentence: how many prompts, where the first
    differing tokens fall, what the comparison isolates (repeat, speculative, batch shape), and the
    determinism mode the servers ran with."""
    indices = sorted(d for d in gate.first_divergence if d is not None)
    if gate.passed or not indices:
        return None
    middle = indices[len(indices) // 2]
    spread = f"at token {indices[0]}" if len(indices) == 1 else f"first at token {indices[0]}, median {middle}"
    text = f"{len(indices)} of {gate.total} prompts part, {spread}."
    if gate.cause:
        text += f" Cause isolated: {gate.cause}: {DIVERGENCE_CAUSES[gate.cause]}."
    modes = {s.resolved.batch_invariant for s in arm.servers if s.resolved is not None}
    if modes == {False}:
        text += " Batch-invariant kernels were off on every server (as vLLM read VLLM_BATCH_INVARIANT)."
    elif modes == {True}:
        text += " Batch-invariant kernels were on on every server."
    return text


def arm_view(arm: Arm, packet: Packet, closest: Callable[[], ShownCommand | None] | None = None) -> ArmView:
    """`closest`: makes the command the site shows for an arm that recorded none (an imported
    result, catalog/recipes/shown.py): the closest command this catalog composes, shown with every
    fact in which it differs from what the source measured. Asked only for such an arm: the command
    of an arm that recorded its own is written from the packet, below."""
    shows_speed = arm.state.has_speed
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(arm.config.env.items()))
    command, docker, differences = None, None, []
    label = "Not published by the source, and no recipe variant to compose one from."
    if arm.config.launch_argv:
        command = multiline(arm.config.launch_argv)
        label = "As the servers ran it (the port and container name are those of server A)."
        if arm.config.argv:
            docker, command = command, multiline(arm.config.argv, arm.config.env)
            label = "As the servers ran it: the portable vllm serve form, then the exact launch command (its port "
            label += "and container name are those of server A)."
    elif arm.config.argv:
        command = multiline(arm.config.argv, arm.config.env)
        label = "As the servers ran it."
    elif closest is not None and (shown := closest()) is not None:
        command, docker = shown.local, shown.docker
        env = env or " ".join(f"{k}={shlex.quote(v)}" for k, v in shown.env)
        origin = f"the overlay configuration {shown.configuration}" if shown.configuration else "the recipe's defaults"
        label = (
            "Not published by the source: the closest command this catalog composes, from "
            f"{origin}, for this variant, card, TP and depth."
        )
        differences = [f"{d.field}: {d.words('this command', 'the source')}" for d in shown.differences]
        if not differences:
            label += " It states every fact the source recorded for this arm as the source measured it."
    if arm.config.passed_env:
        label += f" Passed through from the host environment (values not recorded): {', '.join(arm.config.passed_env)}."
    facts = []
    if arm.config.entrypoint:
        facts.append(Fact("started with", arm.config.entrypoint))
    if arm.oracle_decode_tok_s:
        facts.append(Fact("oracle values", " / ".join(num(v).text for v in arm.oracle_decode_tok_s), "tok/s"))
    withheld = "" if shows_speed else " (withheld: not published)"
    if arm.published_figure is not None:
        facts.append(Fact(f"figure printed by the source{withheld}", num(arm.published_figure, unit="tok/s")))
    if arm.published_ttft_ms:
        ttfts = " / ".join(num(v).text for v in arm.published_ttft_ms)
        facts.append(Fact(f"TTFT printed by the source{withheld}", ttfts, "ms"))
    return ArmView(
        id=arm.id,
        label=arm.label,
        state=arm.state.value,
        state_label=STATE_LABELS[arm.state.value],
        reason=state_reason(packet, arm),
        value=opt_num(arm.decode_tok_s, unit="tok/s") if shows_speed else None,
        struck=None if shows_speed else opt_num(arm.decode_tok_s or arm.published_figure),
        config=config_clause(arm),
        command=command,
        docker=docker,
        differences=differences,
        env=env or None,
        servers=[_server(s, packet, withheld=not shows_speed) for s in arm.servers],
        command_label=label,
        gates=[
            GateView(
                g.gate,
                g.passed,
                gate_phrase(g, arm, packet),
                divergence_summary(arm, g),
                g.note,
                g.server,
                divergence_profile(arm, g),
            )
            for g in arm.gates
        ],
        facts=facts,
        note=arm.note,
        canary_note=canary_explanation(arm) or None,
    )


def ladder_views(packet: Packet) -> list[LadderView]:
    """The concurrency and context ladders; a withheld arm's are for the record only, every figure
    of them struck beside the word "withheld", as its load sweep's (builder/views/load_sweep.py)."""
    views = []
    for ladder in packet.ladders:
        if ladder.kind == "load":
            continue  # its own table: builder/views/load_sweep.py
        if ladder.kind == "concurrency":
            energy = [window_figure(p.energy, packet) for p in ladder.concurrency]
            note = one_absence(energy)  # said once, not on every row
            cols = ["users", "completion tokens", "wall s", "aggregate tok/s", "identical to oracle"]
            cols += [] if note else ["energy"]
            told = any(p.divergence for p in ladder.concurrency)
            rows: list[list[str | Num | None]] = [
                [
                    num(p.users, 0),
                    num(p.completion_tokens, 0),
                    num(p.wall_s),
                    num(p.aggregate_tok_s),
                    _yes_no(p.identical_to_oracle),
                    *([] if note else [figure.text]),
                    *([p.divergence] if told else []),
                ]
                for p, figure in zip(ladder.concurrency, energy, strict=True)
            ]
            if told:
                cols.append("why it differs")
        else:
            note = ""
            cols = ["prompt tokens", "content class", "decode tok/s", "TTFT ms", "identical to oracle"]
            rows = [
                [
                    num(p.depth_tokens, 0),
                    p.content_class,
                    opt_num(p.decode_tok_s),
                    opt_num(p.ttft_ms),
                    _yes_no(p.identical_to_oracle),
                ]
                for p in ladder.context
            ]
        arm = packet.arm(ladder.arm)
        withheld = arm.state == State.WITHHELD
        shown: list[list[str | Num | WithheldText | None]] = [
            [withheld_cell(v) if withheld else v for v in row] for row in rows
        ]
        views.append(
            LadderView(ladder.arm, arm.label, ladder.kind, cols, shown, withheld, ladder_command(packet, ladder), note)
        )
    return views


def _yes_no(value: bool | None) -> str:
    return {True: "yes", False: "NO", None: "not checked"}[value]
