"""The arms of a packet page: launch command, gates, every server and its per-prompt rows, ladders."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from markupsafe import Markup, escape

from builder.format import Num, num, num_markup, opt_num
from builder.views.common import Fact
from builder.views.describe import canary_explanation, config_clause, gate_phrase
from builder.views.results import STATE_LABELS, state_reason
from catalog.model.metrics import decode_rate
from catalog.model.packet import Arm, GateResult, Packet, PromptRow, ServerRun
from catalog.recipes.shown import ShownCommand, multiline

TOKEN_PREVIEW = 24


class RowCells(NamedTuple):
    """One per-prompt row, every cell made page-ready once here: text escaped, a number as its
    markup. A packet page has hundreds of cells; the template unpacks each row and writes its cells
    as they are (they are all Markup), with no lookup or escape per cell."""

    prompt_id: Markup
    class_id: Markup
    prompt_tokens: Markup
    completion_tokens: Markup
    ttft_ms: Markup
    decode_tok_s: Markup  # — when the completion is too short for a rate
    finish_reason: Markup
    cached_tokens: Markup  # "not recorded" when the server reported none
    token_preview: Markup


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


@dataclass(frozen=True)
class GateView:
    gate: str
    passed: bool
    phrase: str
    divergence_summary: str
    note: str | None


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
    rows: list[list[str | Num | None]]


NO_VALUE = Markup("—")
NOT_RECORDED = Markup("not recorded")


def _row(row: PromptRow) -> RowCells:
    preview = " ".join(map(str, row.token_ids[:TOKEN_PREVIEW]))
    if row.completion_tokens > TOKEN_PREVIEW:
        preview += " …"
    ttft_ms = row.ttft_ms
    rate = decode_rate(row.token_times_us)
    return RowCells(
        _text(row.prompt_id),
        _text(row.class_id),
        num_markup(row.prompt_tokens, 0),
        num_markup(row.completion_tokens, 0),
        NO_VALUE if ttft_ms is None else num_markup(ttft_ms),
        NO_VALUE if rate is None else num_markup(rate),
        _text(row.finish_reason) if row.finish_reason else NO_VALUE,
        NOT_RECORDED if row.cached_tokens is None else num_markup(row.cached_tokens, 0),
        Markup(preview),  # noqa: S704 - integers and spaces
    )


@lru_cache(maxsize=1024)
def _text(text: str) -> Markup:
    """A row's text escaped: prompt and class ids and finish reasons recur on every packet page."""
    return escape(text)


def _server(server: ServerRun) -> ServerView:
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
    if server.log:
        facts.append(Fact("log", server.log))
    return ServerView(
        label=server.label,
        status=server.status,
        error=server.error,
        decode_tok_s=opt_num(server.decode_tok_s, unit="tok/s"),
        ttft_ms=opt_num(server.ttft_ms, unit="ms"),
        facts=facts,
        canaries=[Fact(c.id, "passed" if c.passed else "FAILED", c.detail) for c in server.canaries],
        rows=[_row(r) for r in server.rows],
    )


def divergence_summary(arm: Arm, gate: GateResult) -> str:
    """Which prompts diverged and at which token: `prompt-id @ index`, named through the rows of
    the server the gate compared (their order is the gate's order)."""
    found = gate.first_divergence
    if not found:
        return ""
    server = next((s for s in arm.servers if s.label == gate.server), arm.servers[0] if arm.servers else None)
    names = [r.prompt_id for r in server.rows] if server and len(server.rows) == len(found) else []
    diverged = [f"{names[i] if names else f'#{i}'} @ {d}" for i, d in enumerate(found) if d is not None]
    if not diverged:
        return f"identical on all {len(found)}"
    return "; ".join(diverged) + f" ({len(found) - len(diverged)} identical)"


def arm_view(arm: Arm, packet: Packet, shown: ShownCommand | None = None) -> ArmView:
    """`shown`: the command the site shows for this arm (catalog/recipes/shown.py): the recorded one,
    or for an arm that recorded none (an imported result) the closest command this catalog
    composes, shown with every fact in which it differs from what the source measured."""
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
    elif shown is not None:
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
    if arm.oracle_decode_tok_s:
        facts.append(Fact("oracle values", " / ".join(num(v).text for v in arm.oracle_decode_tok_s), "tok/s"))
    if arm.published_figure is not None:
        facts.append(Fact("figure printed by the source", num(arm.published_figure, unit="tok/s")))
    if arm.published_ttft_ms:
        facts.append(Fact("TTFT printed by the source", " / ".join(num(v).text for v in arm.published_ttft_ms), "ms"))
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
        servers=[_server(s) for s in arm.servers],
        command_label=label,
        gates=[
            GateView(
                g.gate,
                g.passed,
                gate_phrase(g, arm, packet),
                divergence_summary(arm, g),
                g.note,
            )
            for g in arm.gates
        ],
        facts=facts,
        note=arm.note,
        canary_note=canary_explanation(arm) or None,
    )


def ladder_views(packet: Packet) -> list[LadderView]:
    views = []
    for ladder in packet.ladders:
        if ladder.kind == "load":
            continue  # its own table: builder/views/load_sweep.py
        if ladder.kind == "concurrency":
            cols = ["users", "completion tokens", "wall s", "aggregate tok/s", "identical to oracle"]
            rows: list[list[str | Num | None]] = [
                [
                    num(p.users, 0),
                    num(p.completion_tokens, 0),
                    num(p.wall_s),
                    num(p.aggregate_tok_s),
                    _yes_no(p.identical_to_oracle),
                ]
                for p in ladder.concurrency
            ]
        else:
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
        views.append(LadderView(ladder.arm, packet.arm(ladder.arm).label, ladder.kind, cols, rows))
    return views


def _yes_no(value: bool | None) -> str:
    return {True: "yes", False: "NO", None: "not checked"}[value]
