"""The index, "choose a model": every family, filterable and sortable from a static file.

The list is rendered in its default order (fastest first) so it reads without JavaScript; the
page script filters and re-sorts it and keeps the choice in the URL hash. Without JavaScript the
common filters (one card, one quantization) are pre-rendered pages, linked from the form: the
same list with the matching families shown, each with its best matching result, sorted by it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial

from builder import routes
from builder.format import Num
from builder.views.answer import UsersPick
from builder.views.common import Pager, page_numbers, page_of
from builder.views.energy import EnergyFigure
from builder.views.family import PICK_SEPARATOR, RESULT_FILTERS, FamilyView, ResultPick, pick_choice, pick_key
from builder.views.results import STATE_LABELS, STATE_RANK, label_key
from catalog.recipes.hardware import Hardware


@dataclass(frozen=True)
class Option:
    value: str
    label: str
    href: str = ""  # a pre-rendered filter's page listing the families it matches
    families: int = 0  # how many families that page lists (site.js goes to the narrowest chosen)


@dataclass(frozen=True)
class Filter:
    name: str
    label: str
    options: list[Option]


@dataclass(frozen=True)
class RunSummary:
    """A family's answer on one card (builder/views/answer.py RunThis): the fastest published result
    for one user, with its state (an imported result is never shown as measured) and, where a load
    sweep recorded it, the best at each user count; the command is on the family page, at `command_href`,
    and the many-user figures' own server commands (not that one) at `users_href`."""

    hardware_id: str
    hardware_name: str
    value: Num
    label: str
    href: str
    command_href: str
    users: list[UsersPick]
    state: str
    state_label: str
    users_href: str


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
    energy: EnergyFigure | None
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
    synthetic: bool = False  # listed apart, never ranked with real models
    runs: list[RunSummary] = field(default_factory=list)


@dataclass(frozen=True)
class FamilyData:
    """A family's data-* attributes for site.js, written once and shared by every index page
    (the index and each pre-rendered filter list every family)."""

    hardware: str
    quantizations: str
    spec_methods: str
    speed: str
    name: str
    picks: str  # pick_for as JSON


def family_data(card: FamilyCard) -> FamilyData:
    return FamilyData(
        hardware=" ".join(card.hardware),
        quantizations=" ".join(card.quantizations),
        spec_methods=" ".join(card.spec_methods),
        speed=card.headline.text if card.headline else "",
        name=card.title.lower(),
        picks=json.dumps(card.pick_for, sort_keys=True),
    )


@dataclass(frozen=True)
class ResultRow:
    """One row of the no-JS table: a family's best result on one card and quantization."""

    family: str
    href: str
    pick: ResultPick


@dataclass(frozen=True)
class FilterLink:
    label: str
    href: str
    current: bool


@dataclass(frozen=True)
class FilterLinks:
    """A pre-rendered page per value of one filter: the no-JavaScript way to filter."""

    label: str
    links: list[FilterLink]


@dataclass(frozen=True)
class CardAnswer:
    """For one card: every real family's fastest published result for one user there (fastest first),
    and its best at each user count recorded; the synthetic families apart, never ranked with them.
    On a page of a paged catalog, the fastest ANSWER_ROWS of each, and how many more the card's own
    listing (`href`) holds."""

    hardware_id: str
    hardware_name: str
    rows: list[tuple[FamilyCard, RunSummary]]
    synthetic: list[tuple[FamilyCard, RunSummary]]
    more: int = 0
    href: str = ""


ANSWER_ROWS = 10
"""The rows of a card's answer on a page of a paged catalog: its page holds only some families,
so the answer is the card's fastest over every family, cut here, and links the card's listing."""


def card_answers(cards: list[FamilyCard]) -> list[CardAnswer]:
    found: dict[str, CardAnswer] = {}
    for card in cards:
        for run in card.runs:
            answer = found.setdefault(run.hardware_id, CardAnswer(run.hardware_id, run.hardware_name, [], []))
            (answer.synthetic if card.synthetic else answer.rows).append((card, run))
    for answer in found.values():
        answer.rows.sort(key=lambda row: (-row[1].value.value, row[0].title.lower()))
        answer.synthetic.sort(key=lambda row: row[0].title.lower())
    return sorted(found.values(), key=lambda a: (not a.rows, a.hardware_name))


@dataclass(frozen=True)
class IndexView:
    families: list[FamilyCard]
    filters: list[Filter]
    sorts: list[Option]
    by_result: list[ResultRow]
    filter_links: list[FilterLinks]
    data: dict[str, FamilyData]  # by family slug
    # the pre-rendered filter (name -> value), empty on the index itself
    chosen: dict[str, str] = field(default_factory=dict)
    chosen_words: str = ""
    # per family slug: the pick shown ("default", a pick's index, or "none"); hidden: filtered out
    shown: dict[str, str] = field(default_factory=dict)
    hidden: frozenset[str] = frozenset()
    count: str = ""
    # how site.js keys a choice of filters in a family's picks (builder/views/family.py pick_key)
    result_filters: tuple[str, ...] = RESULT_FILTERS
    pick_separator: str = PICK_SEPARATOR
    answers: list[CardAnswer] = field(default_factory=list)
    pager: Pager | None = None  # a listing of more families than a page holds: this page among them
    # every family of the catalog is on this page, so site.js filters it in place; else a choice of a
    # pre-rendered filter goes to that filter's pages, where every family it matches is listed
    complete: bool = True


# Filters with a pre-rendered page per value, the common ones (by card, by quantization), each with
# a family's values of it: a family matches a value it holds.
PRERENDERED: dict[str, Callable[[FamilyCard], list[str]]] = {
    "hw": lambda c: c.hardware,
    "quant": lambda c: c.quantizations,
}


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
        energy=hero.energy if hero else None,
        fit=str(fit.value) if fit else "unknown",
        grade=view.grade or "none",
        state=view.best_state,
        state_label=STATE_LABELS[view.best_state],
        hardware=sorted(set(view.hardware_ids) | set(view.recipe_hardware_ids)),
        hardware_names=[hardware[h].name if h in hardware else h for h in view.hardware_ids],
        recipe_hardware_names=[  # the recipe's word for a card without a result here, never shown as one
            hardware[h].name if h in hardware else h for h in view.recipe_hardware_ids if h not in view.hardware_ids
        ],
        quantizations=[label_key(q) for q in view.quantizations],
        spec_methods=view.spec_methods,
        newest=view.newest,
        api_href=view.api_href,
        picks=view.picks,
        pick_for=view.pick_for,
        synthetic=view.synthetic,
        runs=[
            RunSummary(
                r.hardware_id,
                r.hardware_name,
                r.value,
                f"{r.quant_label} · {r.label}",
                r.href,
                routes.family_run(view.slug, r.hardware_id),
                r.users,
                r.state,
                r.state_label,
                routes.family_run_users(view.slug, r.hardware_id),
            )
            for r in view.run_this
        ],
    )


def _sort_key(card: FamilyCard) -> tuple[bool, float, str]:
    """Fastest first, every synthetic family after every real one: a demo is never ranked with them."""
    return (card.synthetic, -(card.headline.value if card.headline else -1.0), card.title.lower())


def index_view(cards: list[FamilyCard], hardware: dict[str, Hardware], quantizations: list[str]) -> IndexView:
    """`cards`: each family's (family_card); `quantizations`: every family's, as named."""
    cards = sorted(cards, key=_sort_key)
    quant_labels = {label_key(q): q for q in quantizations}
    hw_ids = sorted({h for c in cards for h in c.hardware})
    filters = [
        Filter(
            "hw",
            "Hardware (with results, or called “verified” by a recipe)",
            [_prerendered("hw", h, hardware[h].name if h in hardware else h, cards) for h in hw_ids],
        ),
        Filter("quant", "Quantization", [_prerendered("quant", k, v, cards) for k, v in sorted(quant_labels.items())]),
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
        for key in sorted(card.pick_for):  # the best result per card and quantization, any method
            choice = pick_choice(key)
            if choice["hw"] and choice["quant"] and not choice["spec"]:
                by_result.append(ResultRow(card.title, card.href, card.picks[card.pick_for[key]]))
    by_result.sort(key=lambda row: (row.pick.hardware_name, row.pick.quant_label, -row.pick.value.value, row.family))
    data = {card.slug: family_data(card) for card in cards}
    view = IndexView(cards, filters, sorts, by_result, _filter_links(filters, {}), data, answers=card_answers(cards))
    return replace(view, shown={c.slug: "default" for c in cards}, count=f"{len(cards)} of {len(cards)} families")


def _prerendered(name: str, value: str, label: str, cards: list[FamilyCard]) -> Option:
    matching = sum(value in PRERENDERED[name](card) for card in cards)
    return Option(value, label, routes.filtered_index(name, value), matching)


def _filter_links(filters: list[Filter], chosen: dict[str, str]) -> list[FilterLinks]:
    return [
        FilterLinks(f.label, [FilterLink(o.label, o.href, chosen.get(f.name) == o.value) for o in f.options])
        for f in filters
        if f.name in PRERENDERED
    ]


def index_pages(index: IndexView) -> dict[str, IndexView]:
    """The index by the path of each of its pages: one, when a page holds every family."""
    return _pages(index, routes.index_page)


def listings(index: IndexView) -> dict[str, IndexView]:
    """Every page that lists families, by its path: the index's pages and each pre-rendered filter's."""
    return index_pages(index) | filtered_index_views(index)


def filtered_index_views(index: IndexView) -> dict[str, IndexView]:
    """The index filtered on each value of each pre-rendered filter, by the page's path: what
    site.js shows for that choice (the same families, picks, order and count), without it. Of more
    families than a page holds, only those the filter matches are listed, a page at a time."""
    views: dict[str, IndexView] = {}
    for f in index.filters:
        if f.name not in PRERENDERED:
            continue
        for option in f.options:
            filtered = _filtered(index, {f.name: option.value}, option.label)
            if len(index.families) > len(page_of(index.families, 1)):
                kept = [c for c in filtered.families if c.slug not in filtered.hidden]
                filtered = replace(filtered, families=kept, hidden=frozenset(), complete=False)
            views |= _pages(filtered, partial(routes.filtered_index, f.name, option.value))
    return views


def _pages(view: IndexView, route: Callable[[int], str]) -> dict[str, IndexView]:
    """The pages of one listing of families, each with its share of the by-result table; a page of
    a paged catalog with each card's answer over every family, cut (ANSWER_ROWS)."""
    pages = {}
    for number in page_numbers(len(view.families)):
        pager = Pager.of(len(view.families), number, route)
        if pager is None and view.complete:
            pages[route(number)] = view
            continue
        families = page_of(view.families, number)
        hrefs = {c.href for c in families}
        shared = [r for r in view.by_result if r.href in hrefs]
        answers = [_leading(a) for a in view.answers]
        pages[route(number)] = replace(
            view, families=families, by_result=shared, answers=answers, pager=pager, complete=False
        )
    return pages


def _leading(answer: CardAnswer) -> CardAnswer:
    """A card's answer on a page of a paged catalog: its fastest rows, and how many more its listing holds."""
    more = max(len(answer.rows) - ANSWER_ROWS, 0) + max(len(answer.synthetic) - ANSWER_ROWS, 0)
    return replace(
        answer,
        rows=answer.rows[:ANSWER_ROWS],
        synthetic=answer.synthetic[:ANSWER_ROWS],
        more=more,
        href=routes.filtered_index("hw", answer.hardware_id),
    )


def best_pick(family: FamilyView | FamilyCard, chosen: Mapping[str, str]) -> ResultPick | None:
    """The family's best published result matching `chosen`: what the index shows for that filter."""
    index = family.pick_for.get(pick_key(chosen))
    return None if index is None else family.picks[index]


def _filtered(index: IndexView, chosen: dict[str, str], words: str) -> IndexView:
    key = pick_key(chosen)
    shown: dict[str, str] = {}
    speed: dict[str, float] = {}
    hidden = set()
    for card in index.families:
        if not all(value in PRERENDERED[name](card) for name, value in chosen.items()):
            hidden.add(card.slug)
        pick = card.pick_for.get(key)
        shown[card.slug] = "none" if pick is None else str(pick)
        speed[card.slug] = -1.0 if pick is None else card.picks[pick].value.value
    visible = [c for c in index.families if c.slug not in hidden]
    matching = sum(shown[c.slug] != "none" for c in visible)
    return replace(
        index,
        families=sorted(index.families, key=lambda c: (c.synthetic, -speed[c.slug], c.title.lower())),
        answers=_answers_for(index.answers, chosen),
        by_result=[r for r in index.by_result if all(getattr(r.pick, n) == v for n, v in _pick_fields(chosen))],
        filter_links=_filter_links(index.filters, chosen),
        chosen=chosen,
        chosen_words=words,
        shown=shown,
        hidden=frozenset(hidden),
        count=f"{len(visible)} of {len(index.families)} families · {matching} with a matching result",
    )


def _answers_for(answers: list[CardAnswer], chosen: dict[str, str]) -> list[CardAnswer]:
    """The card answers a filter page shows: its card's, or every card's. A card's answer is its
    fastest result of any quantization, so under a quantization chosen it answers none (site.js
    hides them alike when a quantization or a method is chosen)."""
    if "quant" in chosen:
        return []
    return [a for a in answers if chosen.get("hw", a.hardware_id) == a.hardware_id]


def _pick_fields(chosen: dict[str, str]) -> list[tuple[str, str]]:
    """A filter's value as the ResultPick field it matches."""
    field_of = {"hw": "hardware_id", "quant": "quant"}
    return [(field_of[name], value) for name, value in chosen.items()]
