"""The packet page `packets/<id>/`: the whole packet made readable, nothing summarised away."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from builder.format import Num, num, opt_num
from builder.views.common import Fact, Link, SiteContext
from builder.views.describe import config_clause, coverage_chips, gate_phrase, lead_arm, methodology_sentence
from builder.views.results import STATE_LABELS, withheld_reason
from catalog.grade import GRADE_MEANING, PUBLISHED, evidence_grade
from catalog.packet import Arm, Packet, PromptRow, ServerRun

TOKEN_PREVIEW = 24


@dataclass(frozen=True)
class RowView:
    prompt_id: str
    class_id: str
    prompt_tokens: Num
    completion_tokens: Num
    ttft_ms: Num
    decode_tok_s: Num | None
    finish_reason: str
    cached_tokens: Num | None
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
    rows: list[RowView]


@dataclass(frozen=True)
class GateView:
    gate: str
    passed: bool
    phrase: str
    first_divergence: str
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
    env: str | None
    servers: list[ServerView]
    gates: list[GateView]
    facts: list[Fact]
    note: str | None


@dataclass(frozen=True)
class LadderView:
    arm: str
    kind: str
    columns: list[str]
    rows: list[list[str | Num | None]]


@dataclass(frozen=True)
class PacketView:
    id: str
    title: str
    state: str
    state_label: str
    grade: str
    grade_meaning: str
    sha256: str
    sentence: str
    chips: list[str]
    imported: bool
    provenance: list[Fact]
    identity: list[Fact]
    weight_files: list[Fact]
    workload: list[Fact]
    arms: list[ArmView]
    ladders: list[LadderView]
    reproduce: list[str]
    related: list[Link]
    family: Link
    raw_href: str


def _row(row: PromptRow) -> RowView:
    preview = " ".join(str(t) for t in row.token_ids[:TOKEN_PREVIEW])
    return RowView(
        prompt_id=row.prompt_id,
        class_id=row.class_id,
        prompt_tokens=num(row.prompt_tokens, 0),
        completion_tokens=num(row.completion_tokens, 0),
        ttft_ms=num(row.ttft_ms),
        decode_tok_s=opt_num(row.decode_tok_s),
        finish_reason=row.finish_reason or "—",
        cached_tokens=opt_num(row.cached_tokens, 0),
        token_preview=preview + (" …" if len(row.token_ids) > TOKEN_PREVIEW else ""),
    )


def _server(server: ServerRun) -> ServerView:
    facts = [Fact("cache zero", {True: "yes", False: "NO", None: "not recorded"}[server.cache_zero])]
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


def _arm(arm: Arm) -> ArmView:
    published = arm.state in PUBLISHED
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(arm.config.env.items()))
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
        reason=withheld_reason(arm) if not published and arm.state.value == "withheld" else None,
        value=opt_num(arm.decode_tok_s, unit="tok/s") if published else None,
        struck=None if published else opt_num(arm.decode_tok_s or arm.published_figure),
        config=config_clause(arm),
        command=shlex.join(arm.config.argv) if arm.config.argv else None,
        env=env or None,
        servers=[_server(s) for s in arm.servers],
        gates=[
            GateView(
                g.gate,
                g.passed,
                gate_phrase(g, arm),
                ", ".join("—" if d is None else str(d) for d in g.first_divergence),
                g.note,
            )
            for g in arm.gates
        ],
        facts=facts,
        note=arm.note,
    )


def _ladders(packet: Packet) -> list[LadderView]:
    views = []
    for ladder in packet.ladders:
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
        views.append(LadderView(ladder.arm, ladder.kind, cols, rows))
    return views


def _yes_no(value: bool | None) -> str:
    return {True: "yes", False: "NO", None: "not checked"}[value]


def reproduce_commands(packet: Packet) -> list[str]:
    model = packet.identity.model
    commands = [f"make reproduce PACKET={packet.id}"]
    kinds = sorted({ladder.kind for ladder in packet.ladders})
    for tp in sorted({a.config.tensor_parallel_size for a in packet.arms}):
        depths = sorted({a.config.spec_depth for a in packet.arms if a.config.tensor_parallel_size == tp})
        parts = [f"make measure MODEL={model.slug}"]
        if model.variant:
            parts.append(f"VARIANT={model.variant}")
        parts += [f"HW={packet.identity.host.hardware}", f"TP={tp}", "DEPTHS=" + ",".join(str(d) for d in depths)]
        if kinds:
            parts.append("LADDERS=" + ",".join(kinds))
        commands.append(" ".join(parts))
    return commands


def _identity(packet: Packet, ctx: SiteContext) -> list[Fact]:
    model, runtime, host = packet.identity.model, packet.identity.runtime, packet.identity.host
    hardware = ctx.catalog.hardware.get(host.hardware)
    facts = [
        Fact("model repo", model.repo),
        Fact("revision", model.revision or "not recorded"),
        Fact("recipe variant", model.variant or "none: the recipe lists no variant for this checkpoint"),
        Fact("quantization", f"{model.quantization_label} ({model.quantization})"),
        Fact("weights", num(model.weight_bytes / 1e9, unit="GB") if model.weight_bytes else "not recorded"),
        Fact("runtime", runtime.label),
        Fact("runtime version", f"{runtime.name} {runtime.version} on {runtime.platform}"),
        Fact("image", runtime.image or "not recorded"),
        Fact("image digest", runtime.image_digest or "not recorded"),
        Fact("package set sha256", runtime.package_set_sha256 or "not recorded"),
        Fact("torch", runtime.torch_version or "not recorded"),
        Fact("hardware", f"{hardware.name if hardware else host.hardware} × {host.card_count}"),
    ]
    for label, value in [
        ("device", host.device_name),
        ("driver", host.driver),
        ("boot id", host.boot_id),
        ("cpu", host.cpu),
        ("os", host.os),
        ("repo revision", host.repo_revision),
    ]:
        facts.append(Fact(label, value or "not recorded"))
    if model.synthetic:
        facts.append(
            Fact("synthetic model", model.synthetic_note or "yes: a locally made model, not a real checkpoint")
        )
    return facts


def _workload(packet: Packet, ctx: SiteContext) -> list[Fact]:
    w = packet.workload
    suite = ctx.catalog.suites.get(w.suite_id)
    suite_note = (
        f"{suite.title}: {len(suite.prompts)} prompts in {len(suite.classes)} classes"
        if suite
        else "not in data/suites"
    )
    return [
        Fact("suite", w.suite_id, suite_note),
        Fact("suite sha256", w.suite_sha256 or "not recorded"),
        Fact("canary set", w.canary_set_id or "none recorded"),
        Fact("canary set sha256", w.canary_set_sha256 or "not recorded"),
        Fact("API", f"/v1/{w.api}"),
        Fact("max tokens", num(w.max_tokens, 0)),
        Fact("temperature", num(w.temperature, 1)),
        Fact("top_p", num(w.top_p, 1)),
        Fact("seed", str(w.seed) if w.seed is not None else "not recorded"),
    ]


def _provenance(packet: Packet) -> list[Fact]:
    prov = packet.provenance
    facts = [Fact("kind", prov.kind)]
    if prov.source:
        s = prov.source
        facts += [
            Fact("source", s.name),
            Fact("url", s.url or "not recorded"),
            Fact("reference", s.reference or "not recorded"),
            Fact("retrieved", s.retrieved.isoformat() if s.retrieved else "not recorded"),
        ]
        if s.note:
            facts.append(Fact("note", s.note))
    if prov.tool:
        facts.append(Fact("tool", prov.tool))
    facts.append(Fact("created", packet.created.isoformat() if packet.created else "not recorded"))
    return facts


def packet_view(packet: Packet, ctx: SiteContext) -> PacketView:
    all_packets = list(ctx.catalog.packets.values())
    grade = evidence_grade(packet, all_packets)
    arm = lead_arm(packet, all_packets)
    related = (
        [Link(f"reproduces {packet.reproduces}", f"packets/{packet.reproduces}/index.html")]
        if packet.reproduces
        else []
    )
    related += [
        Link(f"reproduced by {p.id}", f"packets/{p.id}/index.html")
        for p in sorted(all_packets, key=lambda p: p.id)
        if p.reproduces == packet.id
    ]
    slug = packet.identity.model.slug
    recipe = ctx.catalog.recipes.get(slug)
    for a in packet.arms:
        if a.state in PUBLISHED and len(a.server_values) < 2:
            ctx.warn(f"{packet.id}: arm {a.id} is published without a fresh-server pair")
    return PacketView(
        id=packet.id,
        title=packet.title,
        state=packet.state.value,
        state_label=STATE_LABELS[packet.state.value],
        grade=grade,
        grade_meaning=GRADE_MEANING[grade],
        sha256=packet.sha256,
        sentence=methodology_sentence(packet, arm, ctx.catalog.suites, ctx.catalog.canary_sets),
        chips=coverage_chips(packet),
        imported=packet.provenance.kind != "measured",
        provenance=_provenance(packet),
        identity=_identity(packet, ctx),
        weight_files=[Fact(f.name, num(f.bytes, 0, "bytes"), f.sha256) for f in packet.identity.model.weight_files],
        workload=_workload(packet, ctx),
        arms=[_arm(a) for a in packet.arms],
        ladders=_ladders(packet),
        reproduce=reproduce_commands(packet),
        related=related,
        family=Link(recipe.meta.title if recipe else slug, f"models/{slug}/index.html"),
        raw_href=f"packets/{packet.id}.json",
    )
