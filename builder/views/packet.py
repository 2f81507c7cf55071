"""The packet page `packets/<id>/`: the whole packet made readable, nothing summarised away."""

from __future__ import annotations

from dataclasses import dataclass

from builder import routes
from builder.format import num
from builder.views.arms import ArmView, LadderView, arm_view, ladder_views
from builder.views.common import Fact, Link, SiteContext
from builder.views.describe import coverage_chips, lead_arm, methodology_sentence
from builder.views.energy import setup_facts
from builder.views.glossary import defined
from builder.views.load_sweep import LoadSweepView, load_sweep_ladders, sweep_view
from builder.views.results import STATE_LABELS
from catalog.checks.grade import GRADE_MEANING, evidence_grade, limitations
from catalog.errors import CatalogError
from catalog.model.packet import Arm, Packet
from catalog.recipes.compose import LaunchCommand, compose_arm
from catalog.recipes.recipe import Recipe


@dataclass(frozen=True)
class PacketView:
    id: str
    title: str
    state: str
    state_label: str
    grade: str
    grade_meaning: str
    limitations: list[str]
    sha256: str
    sentence: str
    chips: list[str]
    imported: bool
    provenance: list[Fact]
    identity: list[Fact]
    weight_files: list[Fact]
    workload: list[Fact]
    energy: list[Fact]
    arms: list[ArmView]
    ladders: list[LadderView]
    load: list[LoadSweepView]
    rerun: Rerun
    related: list[Link]
    family: Link
    raw_href: str
    unsigned: bool
    signature: str
    signature_href: str | None


@dataclass(frozen=True)
class Rerun:
    """What the packet page offers to run again, and why not where it offers nothing."""

    reproduce: str | None  # make reproduce PACKET=<id>
    measure: list[str]  # make measure ..., one per card count: what the packet measured, afresh
    why_not: list[str]


def _composed(packet: Packet, arm: Arm, ctx: SiteContext) -> LaunchCommand | None:
    """For an arm without a recorded command: what its recipe (and overlay) compose for it."""
    if arm.config.argv or arm.config.launch_argv:
        return None
    model = packet.identity.model
    recipe = ctx.catalog.recipes.get(model.slug)
    if recipe is None or model.variant is None or model.variant not in recipe.variants:
        return None
    hardware = ctx.catalog.hardware.get(packet.identity.host.hardware)
    try:
        return compose_arm(
            recipe,
            model.variant,
            hardware,
            arm.config.tensor_parallel_size,
            arm.config.spec_depth,
            draft_head=arm.config.draft_head,
            packet_id=packet.id,
        )
    except CatalogError:
        return None


def measure_commands(packet: Packet, recipe: Recipe | None = None) -> list[str]:
    """`make measure` lines that measure what the packet measured: its model, recipe variant, card,
    card count, depths and ladders (and the docker runtime on XPU, as the runner serves it there).
    Speculative arms that ran an overlay configuration (their draft head's, which lists this packet)
    are measured with CONFIG=, one line per configuration, each with the oracle at depth 0."""
    model = packet.identity.model
    if model.variant is None:
        return []
    kinds = sorted({ladder.kind for ladder in packet.ladders})
    commands = []
    for tp in sorted({a.config.tensor_parallel_size for a in packet.arms}):
        arms = [a for a in packet.arms if a.config.tensor_parallel_size == tp]
        groups: dict[str | None, set[int]] = {}
        for arm in arms:
            if arm.config.spec_depth:
                groups.setdefault(_configuration_of(packet, arm, recipe), set()).add(arm.config.spec_depth)
        if not groups:
            groups[None] = set()
        for config, depths in sorted(groups.items(), key=lambda item: item[0] or ""):
            parts = [
                f"make measure MODEL={model.slug}",
                f"VARIANT={model.variant}",
                f"HW={packet.identity.host.hardware}",
                f"TP={tp}",
                "DEPTHS=" + ",".join(str(d) for d in sorted({0, *depths})),
            ]
            if kinds:
                parts.append("LADDERS=" + ",".join(kinds))
            if config:
                parts.append(f"CONFIG={config}")
            if packet.identity.runtime.platform == "xpu":
                parts.append("RUNTIME=docker")
            commands.append(" ".join(parts))
    return commands


def _configuration_of(packet: Packet, arm: Arm, recipe: Recipe | None) -> str | None:
    """The overlay configuration a speculative arm ran (the one `compose_arm` shows for it), if any."""
    if recipe is None or arm.config.draft_head is None:
        return None
    for name, config in recipe.configurations.items():
        if (
            config.variant == packet.identity.model.variant
            and config.hardware == packet.identity.host.hardware
            and config.tp == arm.config.tensor_parallel_size
            and config.draft_head == arm.config.draft_head
            and config.speculative_config is not None
            and (not config.packets or packet.id in config.packets)
        ):
            return name
    return None


def rerun(packet: Packet, ctx: SiteContext) -> Rerun:
    model = packet.identity.model
    why_not = []
    if model.variant is None:
        why_not.append(
            f"This packet cannot be re-run from here: it names no recipe variant (data/models/{model.slug}.yaml "
            f"lists none for {model.repo}), so there is no recipe command to serve it with. Add a variant for that "
            "checkpoint to the recipe, then measure it."
        )
        return Rerun(None, [], why_not)
    reproduce = f"make reproduce PACKET={packet.id}"
    if packet.workload.suite_id not in ctx.catalog.suites:
        why_not.append(
            f"`make reproduce` replays a packet's own suite; {packet.workload.suite_id} is not in data/suites "
            f"(the {packet.provenance.kind} source's), so only a fresh measurement with this catalog's suite "
            "is offered."
        )
        reproduce = ""
    return Rerun(reproduce or None, measure_commands(packet, ctx.catalog.recipes.get(model.slug)), why_not)


def _identity(packet: Packet, ctx: SiteContext) -> list[Fact]:
    model, runtime, host = packet.identity.model, packet.identity.runtime, packet.identity.host
    hardware = ctx.catalog.hardware.get(host.hardware)
    facts = [
        Fact("model repo", model.repo),
        Fact("revision", model.revision or "not recorded"),
        Fact("recipe variant", model.variant or "none: the recipe lists no variant for this checkpoint"),
        Fact("quantization", defined(f"{model.quantization_label} ({model.quantization})")),
        Fact("weights", num(model.weight_bytes / 1e9, unit="GB") if model.weight_bytes else "not recorded"),
        Fact("runtime", runtime.label),
        Fact("runtime version", f"{runtime.name} {runtime.version} on {runtime.platform}"),
        Fact("image", runtime.image or "not recorded"),
        Fact("image digest", runtime.image_digest or "not recorded"),
        *([Fact("image as run", runtime.image_pinned, "pinned by digest")] if runtime.image_pinned else []),
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


def signature_line(packet: Packet, ctx: SiteContext) -> str:
    signer = packet.seal.signed_by
    if signer is None:
        return "unsigned, local: no signature by a key in data/keys.yaml; not for publication"
    entry = ctx.catalog.keys.by_id()[signer]
    return f"signed by key {signer[:16]}… ({entry.owner}, role {entry.role})"


def packet_view(packet: Packet, ctx: SiteContext) -> PacketView:
    reproductions = ctx.catalog.reproductions([packet])
    grade = evidence_grade(packet, reproductions)
    arm = lead_arm(packet, reproductions)
    related = (
        [Link(f"reproduces {packet.reproduces}", routes.packet_page(packet.reproduces))] if packet.reproduces else []
    )
    related += [Link(f"reproduced by {p.id}", routes.packet_page(p.id)) for p in reproductions]
    slug = packet.identity.model.slug
    recipe = ctx.catalog.recipes.get(slug)
    return PacketView(
        id=packet.id,
        title=packet.title,
        state=packet.state.value,
        state_label=STATE_LABELS[packet.state.value],
        grade=grade,
        grade_meaning=GRADE_MEANING[grade],
        limitations=limitations(packet, reproductions) if packet.provenance.kind == "measured" else [],
        sha256=packet.sha256,
        sentence=methodology_sentence(packet, arm, ctx.catalog.suites, ctx.catalog.canary_sets),
        chips=coverage_chips(packet),
        imported=packet.provenance.kind != "measured",
        provenance=_provenance(packet),
        identity=_identity(packet, ctx),
        weight_files=[Fact(f.name, num(f.bytes, 0, "bytes"), f.sha256) for f in packet.identity.model.weight_files],
        energy=setup_facts(packet),
        workload=_workload(packet, ctx),
        arms=[arm_view(a, packet, _composed(packet, a, ctx)) for a in packet.arms],
        ladders=ladder_views(packet),
        load=[
            sweep_view(packet, ladder, ctx.catalog.hardware.get(packet.identity.host.hardware), recipe)
            for _, ladder in load_sweep_ladders([(packet, ladder) for ladder in packet.ladders])
        ],
        rerun=rerun(packet, ctx),
        related=related,
        family=Link(recipe.meta.title if recipe else slug, routes.family_page(slug)),
        raw_href=routes.packet_json(packet.id),
        unsigned=not packet.signed,
        signature=signature_line(packet, ctx),
        signature_href=routes.packet_signature(packet.id) if packet.signed else None,
    )
