"""The index, "choose a model": every family, filterable and sortable from a static file.

The list is rendered in its default order (fastest first) so it reads without JavaScript; the
page script filters and re-sorts it and keeps the choice in the URL hash.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder import routes
from builder.format import Num
from builder.views.family import FamilyView, ResultPick
from builder.views.results import STATE_LABELS, STATE_RANK, label_key
from catalog.hardware import Hardware


@dataclass(frozen=True)
class Option:
    value: str
    label: str


@dataclass(frozen=True)
class Filter:
    name: str
    label: str
    options: list[Option]


@dataclass(frozen=True)
class FamilyCard:
    slug: str
    href: str
    title: str
    provider: str
    description: str
    headline: Num | None
    words: Num | None
    headline_detail: str
    fit: str
    grade: str
    state: str
    state_label: str
    hardware: list[str]
    hardware_names: list[str]
    recipe_hardware_names: list[str]
    quantizations: list[str]
    spec_methods: list[str]
    newest: str
    api_href: str
    picks: list[ResultPick]
    pick_for: dict[str, int]


@dataclass(frozen=True)
class ResultRow:
    """One row of the no-JS table: a family's best result on one card and quantization."""

    family: str
    href: str
    pick: ResultPick


@dataclass(frozen=True)
class IndexView:
    families: list[FamilyCard]
    filters: list[Filter]
    sorts: list[Option]
    by_result: list[ResultRow]


def family_card(view: FamilyView, hardware: dict[str, Hardware]) -> FamilyCard:
    hero = view.hero
    fit = next((s for s in view.signals if s.title == "Card fit"), None)
    return FamilyCard(
        slug=view.slug,
        href=routes.family_page(view.slug),
        title=view.title,
        provider=view.provider,
        description=view.description,
        headline=hero.value if hero else None,
        words=hero.words if hero else None,
        headline_detail=f"{hero.arm_label} · {hero.quant_label} · {hero.hardware_name}"
        if hero
        else "no qualified result yet",
        fit=str(fit.value) if fit else "unknown",
        grade=view.grade or "none",
        state=view.best_state,
        state_label=STATE_LABELS[view.best_state],
        hardware=sorted(set(view.hardware_ids) | set(view.recipe_hardware_ids)),
        hardware_names=[hardware[h].name if h in hardware else h for h in view.hardware_ids],
        recipe_hardware_names=[hardware[h].name if h in hardware else h for h in view.recipe_hardware_ids],
        quantizations=[label_key(q) for q in view.quantizations],
        spec_methods=view.spec_methods,
        newest=view.newest,
        api_href=view.api_href,
        picks=view.picks,
        pick_for=view.pick_for,
    )


def _sort_key(card: FamilyCard) -> tuple[float, str]:
    return (-(card.headline.value if card.headline else -1.0), card.title.lower())


def index_view(families: list[FamilyView], hardware: dict[str, Hardware]) -> IndexView:
    cards = sorted((family_card(f, hardware) for f in families), key=_sort_key)
    quant_labels = {label_key(q): q for f in families for q in f.quantizations}
    hw_ids = sorted({h for c in cards for h in c.hardware})
    filters = [
        Filter(
            "hw",
            "Hardware (measured or recipe-verified)",
            [Option(h, hardware[h].name if h in hardware else h) for h in hw_ids],
        ),
        Filter("quant", "Quantization", [Option(k, v) for k, v in sorted(quant_labels.items())]),
        Filter(
            "spec",
            "Speculative method",
            [
                Option(m, m if m != "none" else "no speculation")
                for m in sorted({m for c in cards for m in c.spec_methods})
            ],
        ),
        Filter("grade", "Evidence grade", [Option(g, g) for g in sorted({c.grade for c in cards})]),
        Filter(
            "state", "Best state", [Option(s, STATE_LABELS[s]) for s in STATE_RANK if any(c.state == s for c in cards)]
        ),
    ]
    sorts = [Option("speed", "fastest first"), Option("name", "name"), Option("newest", "newest first")]
    by_result = []
    for card in cards:
        keys = sorted(k for k in card.pick_for if k.count("|") == 2 and k.endswith("|") and not k.startswith("|"))
        for key in keys:
            _, quant, _ = key.split("|")
            if quant:
                by_result.append(ResultRow(card.title, card.href, card.picks[card.pick_for[key]]))
    by_result.sort(key=lambda row: (row.pick.hardware_name, row.pick.quant_label, -row.pick.value.value, row.family))
    return IndexView(cards, filters, sorts, by_result)
