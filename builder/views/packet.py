"""The packet page `packets/<id>/`: the whole packet made readable, nothing summarised away."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from builder import routes
from builder.format import byte_size, num
from builder.views.arms import ArmView, LadderView, arm_view, ladder_views
from builder.views.common import Fact, Link, SiteContext
from builder.views.describe import coverage_chips, lead_arm, methodology_sentence, packet_heading
from builder.views.energy import setup_facts
from builder.views.glossary import defined
from builder.views.load_sweep import LoadSweepView, load_sweep_ladders, sweep_view
from builder.views.results import STATE_LABELS
from catalog.checks.grade import GRADE_MEANING, evidence_grade, limitations
from catalog.checks.stack import DIFFERENT_STACK, stack_differences
from catalog.errors import CatalogError
from catalog.model.packet import Arm, Packet
from catalog.packets.signing import HOST_KEY_NOTE
from catalog.recipes.recipe import Recipe
from catalog.recipes.shown import ShownCommand, arm_command, measure_line_differences, measure_lines, unrunnable_image


@dataclass(frozen=True)
class PacketView:
    id: str
    title: str  # generated from the packet's fields (`heading`)
    signed_title: str  # its signer's words, quoted as theirs
    state: str
    state_label: str
    grade: str
    grade_meaning: str
    limitations: list[str]
    sha256: str
    sentence: str
    chips: list[str]
    imported: bool
    has_rows: bool  # its servers kept per-prompt token arrays (an imported result carries none)
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
    signature_note: str | None
    signature: str
    signature_href: str | None


@dataclass(frozen=True)
class MeasureOffer:
    """A `make measure` line, and how what it runs differs from what the packet recorded (an imported
    packet's source ran what no one can pull, or ran it otherwise than the recipe composes)."""

    text: str
    differences: list[str]


@dataclass(frozen=True)
class Rerun:
    """What the packet page offers to run again, and why not where it offers nothing."""

    reproduce: str | None  # make reproduce PACKET=<id>
    measure: list[MeasureOffer]  # make measure ..., one per card count: what the packet measured, afresh
    why_not: list[str]
    different_stack: str | None = None  # ALLOW_DIFFERENT_STACK=1 make reproduce ...: labelled, on request


def _shown(packet: Packet, arm: Arm, ctx: SiteContext) -> ShownCommand | None:
    """The command the page shows for an arm (catalog/recipes/shown.py)."""
    model = packet.identity.model
    recipe = ctx.catalog.recipes.get(model.slug)
    hardware = ctx.catalog.hardware.get(packet.identity.host.hardware)
    try:
        return arm_command(packet, arm, recipe, hardware)
    except CatalogError:
        return None


def measure_commands(packet: Packet, recipe: Recipe | None = None) -> list[str]:
    """`make measure` lines that measure what the packet measured (catalog.recipes.shown.measure_lines)."""
    return [line.text for line in measure_lines(packet, recipe)]


def _measure_offers(packet: Packet, ctx: SiteContext) -> list[MeasureOffer]:
    recipe = ctx.catalog.recipes.get(packet.identity.model.slug)
    hardware = ctx.catalog.hardware.get(packet.identity.host.hardware)
    offers = []
    for line in measure_lines(packet, recipe):
        found = measure_line_differences(recipe, packet, line, hardware) if recipe else []
        words = sorted(
            {
                f"{d.field}: {d.words('it', 'the source' if packet.provenance.kind != 'measured' else 'the arm')}"
                for _, d in found
            }
        )
        offers.append(MeasureOffer(line.text, words))
    return offers


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
    different = None
    image = unrunnable_image(packet)
    if image is not None:
        why_not.append(
            "`make reproduce` runs what a packet recorded, in the image it recorded; this one ran "
            f"{packet.identity.runtime.label}, an image no registry serves by digest ({image}), so it refuses. "
            "Asked to, it measures the closest command on the recipe's image instead, and labels the comparison "
            f"“{DIFFERENT_STACK}” wherever it is shown:"
        )
        different = f"ALLOW_DIFFERENT_STACK=1 make reproduce PACKET={packet.id}"
        reproduce = ""
    if packet.workload.suite_id not in ctx.catalog.suites:
        why_not.append(
            f"`make reproduce` replays a packet's own suite; {packet.workload.suite_id} is not in data/suites "
            f"(the {packet.provenance.kind} source's), so a reproduction measures this catalog's suite instead."
        )
        reproduce = ""
    return Rerun(reproduce or None, _measure_offers(packet, ctx), why_not, different)


def _identity(packet: Packet, ctx: SiteContext) -> list[Fact]:
    model, runtime, host = packet.identity.model, packet.identity.runtime, packet.identity.host
    hardware = ctx.catalog.hardware.get(host.hardware)
    facts = [
        Fact("model repo", model.repo),
        Fact("revision", model.revision or "not recorded"),
        Fact("recipe variant", model.variant or "none: the recipe lists no variant for this checkpoint"),
        Fact("quantization", defined(f"{model.quantization_label} ({model.quantization})")),
        Fact("weights", byte_size(model.weight_bytes) if model.weight_bytes else "not recorded"),
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
    if packet.seal.host_key:
        return (
            f"{HOST_KEY_NOTE} (key {packet.seal.host_key[:16]}…, read from this host's key file): this local build "
            "shows it; make check, make verify and CI refuse it until data/keys.yaml lists the key"
        )
    if signer is None:
        return "unsigned, local: no signature by a key in data/keys.yaml; not for publication"
    entry = ctx.catalog.keys.by_id()[signer]
    return f"signed by key {signer[:16]}… ({entry.owner}, role {entry.role})"


def _stack_label(original: Packet, reproduction: Packet) -> str:
    """` (different stack: ...)` when the reproduction ran another stack (catalog/checks/stack.py)."""
    different = stack_differences(original, reproduction)
    return f" ({DIFFERENT_STACK}: {'; '.join(different)}; its figures compare two stacks)" if different else ""


def heading(packet: Packet, ctx: SiteContext) -> str:
    """The site's name for a packet (`packet_heading`), with its recipe's and card's names."""
    slug, card = packet.identity.model.slug, packet.identity.host.hardware
    recipe, hardware = ctx.catalog.recipes.get(slug), ctx.catalog.hardware.get(card)
    return packet_heading(packet, recipe.meta.title if recipe else slug, hardware.name if hardware else card)


def packet_view(packet: Packet, ctx: SiteContext) -> PacketView:
    reproductions = ctx.catalog.reproductions([packet])
    grade = evidence_grade(packet, reproductions)
    arm = lead_arm(packet, reproductions)
    original = ctx.catalog.packets.get(packet.reproduces) if packet.reproduces else None
    related = []
    if packet.reproduces:
        label = f"reproduces {packet.reproduces}" + (_stack_label(original, packet) if original else "")
        related.append(Link(label, routes.packet_page(packet.reproduces)))
    related += [Link(f"reproduced by {p.id}{_stack_label(packet, p)}", routes.packet_page(p.id)) for p in reproductions]
    slug = packet.identity.model.slug
    recipe = ctx.catalog.recipes.get(slug)
    return PacketView(
        id=packet.id,
        title=heading(packet, ctx),
        signed_title=packet.title,
        state=packet.state.value,
        state_label=STATE_LABELS[packet.state.value],
        grade=grade,
        grade_meaning=GRADE_MEANING[grade],
        limitations=limitations(packet, reproductions) if packet.provenance.kind == "measured" else [],
        sha256=packet.sha256,
        sentence=methodology_sentence(packet, arm, ctx.catalog.suites, ctx.catalog.canary_sets),
        chips=coverage_chips(packet),
        imported=packet.provenance.kind != "measured",
        has_rows=any(server.rows for arm in packet.arms for server in arm.servers),
        provenance=_provenance(packet),
        identity=_identity(packet, ctx),
        weight_files=[Fact(f.name, num(f.bytes, 0, "bytes"), f.sha256) for f in packet.identity.model.weight_files],
        energy=setup_facts(packet),
        workload=_workload(packet, ctx),
        arms=[arm_view(a, packet, partial(_shown, packet, a, ctx)) for a in packet.arms],
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
        signature_note=HOST_KEY_NOTE if packet.seal.host_key else None,
        signature=signature_line(packet, ctx),
        signature_href=routes.packet_signature(packet.id) if packet.signed else None,
    )
