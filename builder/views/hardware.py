"""Hardware pages: a card's specs with the source of every figure, and every result taken on it."""

from __future__ import annotations

from dataclasses import dataclass

from builder import routes
from builder.format import Num, num, opt_num
from builder.views.common import Fact, Link, SiteContext
from builder.views.results import STATE_LABELS, arm_results
from catalog.hardware import Hardware


@dataclass(frozen=True)
class ResultRow:
    family: Link
    packet: Link
    arm: str
    quantization: str
    cards: Num
    state: str
    state_label: str
    value: Num | None
    reason: str | None


@dataclass(frozen=True)
class HardwareView:
    id: str
    name: str
    vendor: str
    platform: str
    generation: str
    memory: Num
    bandwidth: Num
    specs: list[Fact]
    notes: str | None
    results: list[ResultRow]
    recipes: list[Fact]
    recipe_links: list[Link]


def _specs(hw: Hardware) -> list[Fact]:
    facts = [
        Fact("memory", num(hw.memory_gb.value, 0, f"GB {hw.memory_type}"), hw.memory_gb.source),
        Fact("memory bandwidth", num(hw.memory_bandwidth_gb_s.value, 0, "GB/s"), hw.memory_bandwidth_gb_s.source),
    ]
    if hw.compute_tflops_bf16:
        facts.append(
            Fact("BF16 compute", num(hw.compute_tflops_bf16.value, 2, "TFLOPS"), hw.compute_tflops_bf16.source)
        )
    if hw.compute_tops_int8:
        facts.append(Fact("INT8 compute", num(hw.compute_tops_int8.value, 2, "TOPS"), hw.compute_tops_int8.source))
    if hw.interconnect:
        ic = hw.interconnect
        facts.append(
            Fact(f"interconnect ({ic.name})", num(ic.bandwidth_gb_s.value, 0, "GB/s"), ic.bandwidth_gb_s.source)
        )
    facts.append(Fact("docker image", hw.docker_image or "none", "the image the command builder uses on this card"))
    return facts


def hardware_view(hw: Hardware, ctx: SiteContext) -> HardwareView:
    catalog = ctx.catalog
    packets = sorted((p for p in catalog.packets.values() if p.identity.host.hardware == hw.id), key=lambda p: p.id)
    results = arm_results(packets, catalog.hardware, None, catalog.reproductions(packets))
    rows = []
    for r in results:
        slug = r.packet.identity.model.slug
        recipe = catalog.recipes.get(slug)
        rows.append(
            ResultRow(
                family=Link(recipe.meta.title if recipe else slug, routes.family_page(slug)),
                packet=Link(r.packet.id, r.href),
                arm=r.arm.label,
                quantization=r.quant_label,
                cards=num(r.tp, 0),
                state=r.state,
                state_label=STATE_LABELS[r.state],
                value=opt_num(r.centre, unit="tok/s") if r.published else None,
                reason=r.reason,
            )
        )
    listed = [
        (slug, recipe.meta.hardware[hw.id])
        for slug, recipe in sorted(catalog.recipes.items())
        if hw.id in recipe.meta.hardware
    ]
    return HardwareView(
        id=hw.id,
        name=hw.name,
        vendor=hw.vendor,
        platform=hw.platform,
        generation=hw.generation,
        memory=num(hw.memory_gb.value, 0, f"GB {hw.memory_type}"),
        bandwidth=num(hw.memory_bandwidth_gb_s.value, 0, "GB/s"),
        specs=_specs(hw),
        notes=hw.notes,
        results=rows,
        recipes=[Fact(catalog.recipes[slug].meta.title, status) for slug, status in listed],
        recipe_links=[Link(catalog.recipes[slug].meta.title, routes.recipe_page(slug)) for slug, _ in listed],
    )
