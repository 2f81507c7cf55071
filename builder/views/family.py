"""The model family page `models/<slug>/`: one view model, also the source of its JSON API."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product

from builder import routes
from builder.charts import Chart, distinct
from builder.format import Num, listed, num, opt_num, tokens_label, words_per_second
from builder.views.answer import Piece, RunThis, run_this, verdict
from builder.views.common import Fact, Said, SiteContext, Warnings
from builder.views.describe import card_arm, coverage_chips, methodology_sentence
from builder.views.energy import EnergyFigure, arm_energy
from builder.views.load_sweep import LoadSweepSection, load_sweep_section
from builder.views.measured import concurrency_charts, context_charts, depth_charts, quant_charts, tp_charts
from builder.views.packet import heading
from builder.views.projection import PROJECTION_GAP, Estimator, ProjectionView, cell_estimator, projection_view
from builder.views.repeats import FamilyRepeats, RepeatsSection, repeats_section
from builder.views.results import (
    STATE_LABELS,
    ArmResult,
    arm_results,
    best_state,
    gate_words,
    headline_result,
    ladder_sources,
    representatives,
)
from builder.views.scorecard import EstimateView, Matrix, estimate_views, matrices
from catalog.checks.grade import GRADE_MEANING
from catalog.checks.selection import Headline, lead_of
from catalog.model.packet import Packet
from catalog.packets.signing import HOST_KEY_NOTE
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe

CARD_LIMIT = 6  # more packets than this: full cards only for those the page's results cite


# The index filters a family's results are matched on, and how a choice of them is keyed in
# `pick_for`; the index page hands both to site.js (data-result-filters, data-pick-separator).
RESULT_FILTERS = ("hw", "quant", "spec")
PICK_SEPARATOR = "|"


def pick_key(chosen: Mapping[str, str]) -> str:
    """The `pick_for` key of a choice of result filters (name -> value, "" for any)."""
    return PICK_SEPARATOR.join(chosen.get(name, "") for name in RESULT_FILTERS)


def pick_choice(key: str) -> dict[str, str]:
    """The choice a `pick_for` key stands for (pick_key's inverse)."""
    return dict(zip(RESULT_FILTERS, key.split(PICK_SEPARATOR), strict=True))


@dataclass(frozen=True)
class Hero:
    value: Num
    words: Num
    low: Num
    high: Num
    ttft_ms: Num | None
    packet_id: str
    href: str
    arm_label: str
    quant_label: str
    runtime_label: str
    hardware_name: str
    cards: int
    grade: str
    grade_meaning: str
    unsigned: bool
    state: str
    state_label: str
    energy: EnergyFigure | None = None
    signature_note: str | None = None


@dataclass(frozen=True)
class Signal:
    title: str
    value: str | Num
    detail: str


@dataclass(frozen=True)
class PacketCard:
    id: str
    href: str
    title: str
    state: str
    state_label: str
    value: Num | None
    value_arm: str
    sentence: str
    grade: str
    grade_meaning: str
    unsigned: bool
    chips: list[str]
    source: str | None
    featured: bool  # cited by the page's results (the rest are repeats)
    signature_note: str | None = None


@dataclass(frozen=True)
class ResultPick:
    """A published result the index can show for a filter: its card, quantization, method and figure."""

    hardware_id: str
    hardware_name: str
    quant: str  # label_key of the quantization label, as the index's quantization filter
    quant_label: str
    spec: str  # the speculative method, or "none"
    cards: int
    value: Num
    words: Num
    label: str
    href: str
    state: str
    state_label: str
    energy: EnergyFigure | None = None


@dataclass(frozen=True)
class FamilyView:
    slug: str
    title: str
    provider: str
    description: str
    performance_headline: str | None
    hero: Hero | None
    # the answer a reader comes with (builder/views/answer.py): per card what to run and how, and the verdict
    run_this: list[RunThis]
    verdict: list[Piece]
    synthetic: bool  # a locally made model (the CPU demo): never ranked with real models
    signals: list[Signal]
    packets: list[PacketCard]
    matrices: list[Matrix]
    charts: list[Chart]
    concurrency: list[Chart]
    load: LoadSweepSection | None
    concurrency_gap: str | None
    projection: ProjectionView | None
    projection_gap: str | None
    fine_print: list[Fact]
    coverage: str  # the fine print's one line: what was measured, on how many cards, which ladders
    estimates: list[EstimateView]
    best_state: str
    grade: str | None
    hardware_ids: list[str]
    recipe_hardware_ids: list[str]
    quantizations: list[str]
    spec_methods: list[str]
    newest: str
    recipe_href: str
    api_href: str
    # per index filter ("hw|quant|spec", "" for any), the index of the best matching pick
    picks: list[ResultPick]
    pick_for: dict[str, int]
    # repeats, intervals and history (builder/views/repeats.py)
    history: RepeatsSection | None = None
    headline_repeats: str | None = None  # the headline's run: its repeats and interval, or "measured once"


def _picks(results: list[ArmResult]) -> tuple[list[ResultPick], dict[str, int]]:
    """For every combination of the index's result filters (card, quantization, method, each
    possibly "any"), the result the headline rule would choose among the matching qualified ones:
    the fewest cards, then measured over imported, the better grade, the faster. One pass: each
    result is a candidate for the eight filters it matches; of equals, the first is kept."""
    best: dict[tuple[str, str, str], ArmResult] = {}
    for r in results:
        if not r.qualified:
            continue
        for key in product(("", r.hardware_id), ("", r.quant_key), ("", r.method or "none")):
            held = best.get(key)
            if held is None or (-r.tp, r.lead_order) > (-held.tp, held.lead_order):
                best[key] = r
    picks: list[ResultPick] = []
    index: dict[int, int] = {}
    pick_for: dict[str, int] = {}
    for (hw, quant, spec), chosen in sorted(best.items()):  # "" (any) sorts first, as the index lists it
        if id(chosen) not in index:
            index[id(chosen)] = len(picks)
            picks.append(_pick(chosen))
        pick_for[pick_key({"hw": hw, "quant": quant, "spec": spec})] = index[id(chosen)]
    return picks, pick_for


def _pick(result: ArmResult) -> ResultPick:
    return ResultPick(
        hardware_id=result.hardware_id,
        hardware_name=result.hardware_name,
        quant=result.quant_key,
        quant_label=result.quant_label,
        spec=result.method or "none",
        cards=result.tp,
        value=num(result.centre or 0.0, unit="tok/s"),
        words=words_per_second(result.centre or 0.0),
        label=result.arm.label,
        href=result.href,
        state=result.state,
        state_label=STATE_LABELS[result.state],
        energy=result.energy,
    )


def signature_note(packet: Packet) -> str | None:
    """What a page says beside the grade of a packet signed by this host's own, unlisted key."""
    return HOST_KEY_NOTE if packet.seal.host_key else None


def _hero(lead: Headline | None, hardware: dict[str, Hardware]) -> Hero | None:
    if lead is None:
        return None
    packet, arm = lead.packet, lead.arm
    hw = hardware.get(packet.identity.host.hardware)
    values = arm.server_values
    return Hero(
        value=num(lead.decode_tok_s, unit="tok/s"),
        words=words_per_second(lead.decode_tok_s),
        low=num(min(values)),
        high=num(max(values)),
        ttft_ms=opt_num(arm.ttft_ms, unit="ms"),
        packet_id=packet.id,
        href=routes.packet_page(packet.id, arm.id),
        arm_label=arm.label,
        quant_label=packet.identity.model.quantization_label,
        runtime_label=packet.identity.runtime.label,
        hardware_name=hw.name if hw else packet.identity.host.hardware,
        cards=arm.config.tensor_parallel_size,
        grade=lead.grade,
        grade_meaning=GRADE_MEANING[lead.grade],
        unsigned=not packet.signed,
        state=arm.state.value,
        state_label=STATE_LABELS[arm.state.value],
        energy=arm_energy(packet, arm) if packet.provenance.kind == "measured" else None,
        signature_note=signature_note(packet),
    )


def _fit_signal(recipe: Recipe | None, lead: Headline | None, hardware: dict[str, Hardware]) -> Signal:
    """Weights vs card memory: the recipe variant's vram_minimum_gb against the card's memory.
    Without a variant figure, the card count the headline ran on, with the headline's state."""
    default = "default" if recipe and "default" in recipe.variants else None
    variant_name = lead.packet.identity.model.variant if lead else default
    hw_id = lead.packet.identity.host.hardware if lead else _recipe_hardware(recipe)
    card = hardware.get(hw_id) if hw_id else None
    cards_used = lead.arm.config.tensor_parallel_size if lead else None
    # the headline's own state word: an imported headline was not measured here
    word = lead.arm.state.label.lower() if lead else ""
    ran = f" The {word} headline ran on {cards_used} card{'s' if cards_used != 1 else ''}." if lead else ""
    if recipe is not None and card is not None and variant_name in recipe.variants:
        need = recipe.variants[variant_name].vram_minimum_gb
        memory = card.memory_gb.value
        cards = max(1, math.ceil(need / memory))
        return Signal(
            "Card fit",
            f"fits on {cards} × {card.name}",
            f"Basis: recipe variant {variant_name} needs at least {num(need, 0).text} GB (vram_minimum_gb); "
            f"one {card.name} has {num(memory, 0).text} GB." + ran,
        )
    if lead is not None and card is not None:
        repo = lead.packet.identity.model.repo
        return Signal(
            "Card fit",
            f"runs on {cards_used} × {card.name} ({word})",
            f"Basis: the headline run. The recipe lists no variant for {repo}, so there is no memory figure "
            "to compare with the card.",
        )
    return Signal("Card fit", "unknown", "No recipe variant with a memory figure and no card to compare it with.")


def _recipe_hardware(recipe: Recipe | None) -> str | None:
    if recipe is None:
        return None
    if recipe.meta.default_hardware:
        return recipe.meta.default_hardware
    verified = [k for k, v in recipe.meta.hardware.items() if v == "verified"]
    candidates = verified or list(recipe.meta.hardware)
    return candidates[0] if candidates else None


def _quality_signal(lead: Headline | None, results: list[ArmResult]) -> Signal:
    withheld = sum(r.state == "withheld" for r in results)
    held = f" {withheld} {'result' if withheld == 1 else 'results'} withheld by a gate not passed." if withheld else ""
    if lead is None:
        return Signal("Quality evidence", "none published", "No result passed its gates." + held)
    gates = "; ".join(gate_words(g, lead.packet) for g in lead.arm.gates) or "no identity gate recorded"
    return Signal("Quality evidence", f"evidence {lead.grade} of A–D", f"Headline arm: {gates}." + held)


def _count_signal(results: list[ArmResult]) -> Signal:
    """Every result of the family as one sum: the total, then each state's share of it."""
    counts = {s: sum(r.state == s for r in results) for s in STATE_LABELS}
    parts = [f"{n} {s}" for s, n in counts.items() if n]
    total = len(results)
    published = counts["measured"] + counts["imported"]
    words = f"{total} result{'s' if total != 1 else ''}"
    detail = f"{words}: {', '.join(parts)}; {published} published" if parts else "none yet"
    return Signal("Results", words, detail)


def _ranges(values: list[int]) -> str:
    """0, 3, 4, 5, 6 -> "0, 3-6"."""
    runs: list[list[int]] = []
    for value in sorted(set(values)):
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _card_counts(tps: list[int]) -> str:
    words = {1: "one", 2: "two", 3: "three", 4: "four"}
    names = [words.get(t, str(t)) for t in sorted(set(tps))]
    return f"{listed(names)} card{'s' if sorted(set(tps)) != [1] else ''}"


def coverage_line(results: list[ArmResult]) -> str:
    """What the family's results cover, in one line (the seed's fine print): per quantization the
    card counts and speculative depths, then the ladders and the context range measured."""
    if not results:
        return "Nothing measured or imported yet."
    parts = []
    for quant in sorted({r.quant_label for r in results}):
        mine = [r for r in results if r.quant_label == quant]
        kinds = sorted({r.packet.provenance.kind for r in mine})
        parts.append(
            f"{quant} ({' and '.join(kinds)}) on {_card_counts([r.tp for r in mine])}, "
            f"speculative depths {_ranges([r.depth for r in mine])}"
        )
    ladders = {(r.packet.id, ladder.arm): ladder for r in results for ladder in r.packet.ladders}.values()
    users = sorted({p.users for ladder in ladders for p in ladder.concurrency})
    depths = sorted({p.depth_tokens for ladder in ladders for p in ladder.context})
    load = sorted({lv.users for ladder in ladders if ladder.load for lv in ladder.load.levels if lv.users})
    rates = sorted({lv.rate_rps for ladder in ladders if ladder.load for lv in ladder.load.levels if lv.rate_rps})
    extra = []
    if users:
        extra.append(f"concurrency ladders c{users[0]}-c{users[-1]}")
    if depths:
        extra.append(f"context {tokens_label(depths[0])}-{tokens_label(depths[-1])} tokens")
    if load:
        extra.append(f"load sweeps at {_ranges(load)} users" + (f" and {len(rates)} arrival rates" if rates else ""))
    ladder_words = "; ".join(extra) if extra else "no concurrency, context or load ladder"
    return "; ".join(parts) + f". {ladder_words[0].upper()}{ladder_words[1:]}."


def _card(packet: Packet, own: list[ArmResult], ctx: SiteContext, featured: bool) -> PacketCard:
    """`own`: the packet's results, graded once (the card's arm is the packet's own headline)."""
    arm = card_arm(packet, lead_of([Headline(packet, r.arm, r.grade) for r in own if r.qualified]))
    grade = own[0].grade
    source = packet.provenance.source
    return PacketCard(
        id=packet.id,
        href=routes.packet_page(packet.id),
        title=heading(packet, ctx),
        state=packet.state.value,
        state_label=STATE_LABELS[packet.state.value],
        value=opt_num(arm.decode_tok_s, unit="tok/s") if arm.state.published else None,
        value_arm=arm.label,
        sentence=methodology_sentence(packet, arm, ctx.catalog.suites, ctx.catalog.canary_sets),
        grade=grade,
        grade_meaning=GRADE_MEANING[grade],
        unsigned=not packet.signed,
        chips=coverage_chips(packet),
        source=f"{source.name}" + (f" ({source.reference})" if source.reference else "") if source else None,
        featured=featured,
        signature_note=signature_note(packet),
    )


def _cards(
    packets: list[Packet], results: list[ArmResult], shown: list[ArmResult], ctx: SiteContext
) -> list[PacketCard]:
    """Every packet is listed; a full card for each when there are few, otherwise only for the
    packets whose results the page shows (the rest are repeats, one compact row each)."""
    cited = {id(r.packet) for r in shown}
    few = len(packets) <= CARD_LIMIT
    own: dict[int, list[ArmResult]] = {}
    for r in results:
        own.setdefault(id(r.packet), []).append(r)
    return [_card(p, own[id(p)], ctx, few or id(p) in cited) for p in packets]


def _fine_print(recipe: Recipe | None, packets: list[Packet]) -> list[Fact]:
    facts: list[Fact] = []
    if recipe:
        facts += [
            Fact("architecture (recipe)", recipe.model.architecture),
            Fact("parameters", recipe.model.parameter_count),
            Fact("context length", num(recipe.model.context_length, 0, "tokens")),
        ]
    configs = [p.identity.model.config for p in packets if p.identity.model.config]
    for label, attr in [
        ("model class", "architecture"),
        ("layers", "num_layers"),
        ("hidden size", "hidden_size"),
        ("attention heads", "num_attention_heads"),
        ("KV heads", "num_kv_heads"),
        ("head dim", "head_dim"),
        ("full-attention layers", "full_attention_layers"),
        ("linear-attention layers", "linear_attention_layers"),
        ("vocabulary", "vocab_size"),
    ]:
        values = sorted({str(getattr(c, attr)) for c in configs if getattr(c, attr) is not None})
        if values:
            facts.append(
                Fact(label, num(int(values[0]), 0) if values[0].isdigit() and len(values) == 1 else " / ".join(values))
            )
    return facts


def _estimators(
    packets: list[Packet], recipe: Recipe | None, results: list[ArmResult], ctx: SiteContext, said: Warnings
) -> dict[str, Estimator]:
    found = {}
    for hw_id in sorted({r.hardware_id for r in results}):
        on_hw = [p for p in packets if p.identity.host.hardware == hw_id]
        estimator = cell_estimator(on_hw, recipe, ctx.catalog.hardware.get(hw_id), said.warn)
        if estimator is not None:
            found[hw_id] = estimator
    return found


def family_view(slug: str, recipe: Recipe | None, ctx: SiteContext) -> Said[FamilyView]:
    """The family page's view, with the warnings its projections and estimates gave."""
    said = Warnings()
    catalog = ctx.catalog
    packets = catalog.packets_of(slug)
    reproductions = catalog.reproductions(packets)
    results = arm_results(packets, catalog.hardware, reproductions)
    repeats = FamilyRepeats(results)
    # a result refused as a repeat (timings shared with another packet, or a campaign repeat another
    # claims too) stays listed with its packet, never leads, never is the verdict's figure
    copies = {(r.packet.id, r.arm.id) for r in repeats.refused()}
    counted = [r for r in results if (r.packet.id, r.arm.id) not in copies]
    shown = representatives(counted)
    lead_result = headline_result(counted)
    lead = Headline(lead_result.packet, lead_result.arm, lead_result.grade) if lead_result else None
    ladders = ladder_sources(results)
    charts = distinct([*depth_charts(shown), *tp_charts(shown), *quant_charts(shown), *context_charts(ladders)])
    concurrency = concurrency_charts(ladders)
    load = load_sweep_section(ladders, catalog.hardware, recipe)
    projection = projection_view(lead_result, shown, recipe, said.warn)
    picks, pick_for = _picks(results)
    for refused in repeats.refused():
        said.warn(f"packets/{refused.packet.id}.json: not counted as a repeat: {refused.reason}")
    lead_run = repeats.run_of(lead_result) if lead_result else None
    scorecards = matrices(results, recipe, _estimators(packets, recipe, results, ctx, said), repeats)
    dates = [str(recipe.meta.date_updated)] if recipe else []
    dates += [p.created.date().isoformat() for p in packets if p.created]
    view = FamilyView(
        slug=slug,
        title=recipe.meta.title if recipe else slug,
        provider=recipe.meta.provider if recipe else "",
        description=recipe.meta.description if recipe else "",
        performance_headline=recipe.meta.performance_headline if recipe else None,
        hero=_hero(lead, catalog.hardware),
        run_this=run_this(counted, recipe, ctx),
        verdict=verdict(counted, scorecards),  # a refused repeat's figure is never the verdict's
        synthetic=bool(recipe and recipe.model.synthetic) or any(p.identity.model.synthetic for p in packets),
        signals=[_fit_signal(recipe, lead, catalog.hardware), _quality_signal(lead, results), _count_signal(results)],
        packets=_cards(packets, results, shown, ctx),
        matrices=scorecards,
        charts=charts,
        concurrency=concurrency,
        load=load,
        concurrency_gap=None
        if concurrency or load
        else "No packet of this family carries a concurrency ladder or a load sweep yet: not measured.",
        projection=projection,
        projection_gap=None if projection else PROJECTION_GAP,
        fine_print=_fine_print(recipe, packets),
        coverage=coverage_line(results),
        estimates=estimate_views(scorecards),
        best_state=best_state(r.state for r in results),
        grade=min((r.grade for r in results), default=None),
        hardware_ids=sorted({r.hardware_id for r in results}),
        recipe_hardware_ids=sorted(
            h for h, status in (recipe.meta.hardware.items() if recipe else []) if status == "verified"
        ),
        quantizations=sorted({r.quant_label for r in results}),
        spec_methods=sorted({r.method or "none" for r in results}),
        newest=max(dates) if dates else "",
        recipe_href=routes.recipe_page(slug),
        api_href=routes.family_api(slug),
        picks=picks,
        pick_for=pick_for,
        history=repeats_section(repeats),
        headline_repeats=lead_run.combined.words() if lead_run else None,
    )
    return Said(view, tuple(said))
