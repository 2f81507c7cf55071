"""Many people at once: load sweeps as a frontier chart, latency charts and per-level tables.

Every figure is a property of catalog.model.load_sweep's models (aggregate_tok_s, per_user_tok_s, ttft, e2e,
lag, goodput, identical ...); this module only picks and formats them. A level whose outputs
differ from the oracle, or that is unusable (its client lagged past the sweep's bound or read responses in
bursts, or a user was served faster than one alone: LoadLevel.unusable_because), is drawn apart and
labelled (builder/charts.py `flag`), never averaged into its series' line. A sweep of an imported or
screened packet is speed only: no output was checked and the source's client schedule was not
recorded, so its series says so and its lag reads "not recorded", never a number.
A withheld arm's sweep (its outputs failed a gate) is published for the record only: every figure
of its every level is a `WithheldNum`, which a page shows struck beside the word "withheld", the
marker the family page's charts give a withheld point (templates/macros.html `withheld-value`);
the packet page's concurrency and context ladders of such an arm are marked the same way
(builder/views/arms.py `ladder_views`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

from markupsafe import Markup, escape

from builder import routes
from builder.charts import WITHHELD_COLOUR, Chart, Point, chart
from builder.format import Num, num, opt_num
from builder.views.energy import EnergyFigure, one_absence, window_figure
from catalog.errors import CatalogError
from catalog.model.load_sweep import ALONE_BOUND, LoadLevel, LoadSweep, Slo
from catalog.model.packet import Arm, Ladder, Packet, State
from catalog.projection import LoadProjection, project_load
from catalog.projection.multiuser import LevelEstimate
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe
from catalog.recipes.shown import multiline

DIFFERS = "outputs differ from the oracle"
LOAD_TABLES = "load-tables"  # the family page's per-level tables, which hold every number the load charts draw
UNUSABLE = "level unusable: the client fell behind, or a user was served faster than alone"
LADDER_COMMAND_MISSING = (
    "The command of this ladder's own server is not recorded in this packet (sealed before ladders recorded"
    " theirs); it is not the one-user command shown for the arm."
)
"""What a page says in place of a ladder's server command where its packet recorded none."""
UNUSABLE_COLOUR = "#6b7280"  # grey: the level says nothing about the server (amber, as withheld, is for outputs)


@dataclass(frozen=True)
class LoadLevelRow:
    """One level of a sweep, every number the packet page's table and the JSON API carry."""

    level: str
    mode: str
    users: int | None
    rate_rps: Num | None
    completed: Num
    failed: Num
    aggregate_tok_s: Num
    per_user_tok_s: Num | None
    ttft_p50_ms: Num | None
    ttft_p90_ms: Num | None
    ttft_p99_ms: Num | None
    itl_p50_ms: Num | None
    itl_p90_ms: Num | None
    itl_p99_ms: Num | None
    e2e_p50_ms: Num | None
    e2e_p99_ms: Num | None
    goodput_pct: Num
    identical: Num
    identity: str  # "identical" | "differs" | "not checked"
    divergence_summary: str
    lag_p99_ms: Num | None  # None: not recorded by the source (an imported curve)
    usable: bool
    unusable_because: str | None
    client_cpu_s: Num | None
    peak_running: Num | None
    peak_waiting: Num | None
    peak_kv_cache_pct: Num | None
    preemptions: Num | None
    projected_aggregate_tok_s: Num | None
    projected_per_user_tok_s: Num | None
    measured_over_projected: Num | None
    flag: str | None
    energy: EnergyFigure | None = None  # None: the sweep is not this runner's (imported), so no energy


@dataclass(frozen=True)
class LoadSweepView:
    arm: str
    arm_label: str
    series: str
    href: str
    state: str
    slo: str
    lag_bound_ms: Num
    seed: int
    own_client: bool  # the runner's client sent the load: lag, CPU and the arrival seed are its own
    requests_per_level: Num
    rows: list[LoadLevelRow]
    projection_note: str
    # every level's energy absent for one reason: said once in the caption, not in a column of
    # identical cells (a CPU campaign's sixteen levels repeated it on each row)
    energy_absent: str = ""
    alone_bound: str = f"{ALONE_BOUND:g}"  # LoadLevel.faster_than_alone's, said in the caption
    command: LadderCommand | None = None  # the sweep's own server command, or why none is shown


@dataclass(frozen=True)
class LadderCommand:
    """The command of a ladder's own server (catalog.model.packet.Ladder.argv), shown beside its
    figures: a copyable block with `id`, or, where the packet records none (`text` None), words
    saying so (templates/macros.html `ladder_command`). The one-user command is not it: a ladder's
    server ran with room for many sequences (runner/plan.py ladder_command)."""

    id: str
    text: str | None


def ladder_command(packet: Packet, ladder: Ladder) -> LadderCommand:
    """`ladder`'s recorded server command, laid out as an arm's is, with the arm's recorded
    environment (the ladder's server ran with it)."""
    text = multiline(ladder.argv, packet.arm(ladder.arm).config.env) if ladder.argv else None
    return LadderCommand(f"ladder-command-{packet.id}-{ladder.arm}-{ladder.kind}", text)


WITHHELD_MARK = '<span class="withheld-value">withheld <s>{}</s></span>'  # the family page's chart tables'


def withheld_html(inner: str) -> Markup:
    """`inner` (HTML) struck beside the word "withheld": never read as a published figure."""
    return Markup(WITHHELD_MARK.format(inner))  # noqa: S704 -- inner is escaped HTML (Num, or escape())


@dataclass(frozen=True, eq=False)
class WithheldNum(Num):
    """A figure of a withheld arm: the same number (equal to it, in charts and the JSON API), shown
    struck on a page."""

    def __html__(self) -> str:
        return str(withheld_html(super().__html__()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Num) and (self.text, self.unit) == (other.text, other.unit)

    __hash__ = Num.__hash__


class WithheldText(str):
    """A text cell of a withheld arm's ladder (`yes`, `not checked`, an energy line): the same text,
    shown struck on a page."""

    __slots__ = ()

    def __html__(self) -> str:
        return str(withheld_html(str(escape(str(self)))))


def withheld_num(value: Num | None) -> Num | None:
    return None if value is None else WithheldNum(value.text, value.unit)


def withheld_cell(value: str | Num | None) -> str | Num | WithheldText | None:
    """One cell of a withheld arm's ladder, marked withheld; an absent one stays absent."""
    if value is None:
        return None
    if isinstance(value, Num):
        return withheld_num(value)
    return WithheldText(value)


def _withheld_row(row: LoadLevelRow) -> LoadLevelRow:
    """Every figure of a level struck (its numbers, its energy's); its labels and flags kept."""
    changed: dict[str, object] = {
        f.name: withheld_num(getattr(row, f.name)) for f in fields(row) if isinstance(getattr(row, f.name), Num)
    }
    energy = row.energy
    if energy is not None:
        changed["energy"] = replace(
            energy,
            j_per_token=withheld_num(energy.j_per_token),
            tok_s_per_w=withheld_num(energy.tok_s_per_w),
            avg_w=withheld_num(energy.avg_w),
        )
    return replace(row, **changed)  # type: ignore[arg-type]


def slo_words(slo: Slo) -> str:
    limits = [("TTFT", slo.ttft_ms), ("TPOT", slo.tpot_ms), ("end-to-end", slo.e2e_ms)]
    given = [
        f"{name} ≤ {num(limit, 0 if limit.is_integer() else 2).text} ms" for name, limit in limits if limit is not None
    ]
    return " and ".join(given) if given else "no objective: every completed request counts"


def _identity(level: LoadLevel) -> str:
    checked = [r.identical_to_oracle for r in level.completed if r.identical_to_oracle is not None]
    if any(value is False for value in checked):
        return "differs"
    return "identical" if checked and len(checked) == len(level.completed) else "not checked"


def _unusable_because(level: LoadLevel, sweep: LoadSweep, arm: Arm, own_client: bool) -> str | None:
    """Another client's lag and reads were not recorded (an imported curve): only its rates are judged."""
    if own_client:
        return level.unusable_because(sweep.lag_bound_ms, arm.server_values)
    return level.faster_than_alone(arm.server_values)


def _row(
    level: LoadLevel, sweep: LoadSweep, projected: LevelEstimate | None, own_client: bool, packet: Packet, arm: Arm
) -> LoadLevelRow:
    """`own_client`: the runner's client sent the load, so its schedule lag and CPU (and the cards'
    energy) were recorded."""
    ttft, e2e, itl, server = level.ttft, level.e2e, level.itl_ms, level.server
    unusable_because = _unusable_because(level, sweep, arm, own_client)
    first = level.first_diverging_request
    return LoadLevelRow(
        level=level.label,
        mode=f"{level.mode} loop",
        users=level.users,
        rate_rps=opt_num(level.rate_rps, unit="req/s"),
        completed=num(len(level.completed), 0),
        failed=num(level.failed, 0),
        aggregate_tok_s=num(level.aggregate_tok_s, unit="tok/s"),
        per_user_tok_s=opt_num(level.per_user_tok_s, unit="tok/s"),
        ttft_p50_ms=opt_num(ttft.p50_ms) if ttft else None,
        ttft_p90_ms=opt_num(ttft.p90_ms) if ttft else None,
        ttft_p99_ms=opt_num(ttft.p99_ms) if ttft else None,
        itl_p50_ms=opt_num(itl.p50_ms) if itl else None,
        itl_p90_ms=opt_num(itl.p90_ms) if itl else None,
        itl_p99_ms=opt_num(itl.p99_ms) if itl else None,
        e2e_p50_ms=opt_num(e2e.p50_ms) if e2e else None,
        e2e_p99_ms=opt_num(e2e.p99_ms) if e2e else None,
        goodput_pct=num(level.goodput(sweep.slo) * 100, 1, "%"),
        identical=num(level.identical, 0),
        identity=_identity(level),
        divergence_summary=f"{first.prompt_id} @ token {first.first_divergence}" if first else "",
        lag_p99_ms=num(level.lag.p99_ms, unit="ms") if own_client else None,
        usable=unusable_because is None,
        unusable_because=unusable_because,
        client_cpu_s=num(level.client_cpu_s, unit="s") if own_client else None,
        peak_running=opt_num(server.peak_running, 0) if server else None,
        peak_waiting=opt_num(server.peak_waiting, 0) if server else None,
        peak_kv_cache_pct=opt_num(server.peak_kv_cache_usage * 100, 1, "%")
        if server and server.peak_kv_cache_usage is not None
        else None,
        preemptions=opt_num(server.preemptions, 0) if server else None,
        projected_aggregate_tok_s=num(projected.aggregate_tok_s, unit="tok/s") if projected else None,
        projected_per_user_tok_s=num(projected.per_user_tok_s, unit="tok/s") if projected else None,
        measured_over_projected=num(projected.measured_over_projected) if projected else None,
        flag=DIFFERS if _identity(level) == "differs" else UNUSABLE if unusable_because else None,
        energy=window_figure(level.energy, packet) if own_client else None,
    )


def _projection(
    packet: Packet, arm: Arm, sweep: LoadSweep, hardware: Hardware | None, recipe: Recipe | None
) -> LoadProjection | None:
    if hardware is None:
        return None
    try:
        return project_load(packet, arm, sweep, hardware, recipe)
    except CatalogError:
        return None


def series_name(packet: Packet, arm: Arm) -> str:
    kind = packet.provenance.kind
    imported = "" if kind == "measured" else f" ({kind}, speed only)"
    return f"{packet.identity.model.quantization_label} · {arm.label}{imported}"


def sweep_view(packet: Packet, ladder: Ladder, hardware: Hardware | None, recipe: Recipe | None) -> LoadSweepView:
    sweep = ladder.load
    assert sweep is not None  # a load ladder carries its sweep (catalog.model.packet.Ladder)
    arm = packet.arm(ladder.arm)
    projection = _projection(packet, arm, sweep, hardware, recipe)
    projected = {e.level: e for e in projection.levels} if projection else {}
    own_client = packet.provenance.kind == "measured"
    note = (
        f"Projected: {projection.formula} (docs/projections.md, “Many users at once”). " + " ".join(projection.notes)
        if projection
        else "No multi-user projection: speculative arms and incomplete architectures are not modelled under load."
    )
    rows = [_row(level, sweep, projected.get(level.label), own_client, packet, arm) for level in sweep.levels]
    if arm.state == State.WITHHELD:  # for the record only: every figure struck (this module's docstring)
        rows = [_withheld_row(row) for row in rows]
    return LoadSweepView(
        arm=arm.id,
        arm_label=arm.label,
        series=series_name(packet, arm),
        href=routes.packet_page(packet.id, arm.id),
        state=arm.state.value,
        slo=slo_words(sweep.slo),
        lag_bound_ms=num(sweep.lag_bound_ms, 0 if sweep.lag_bound_ms.is_integer() else 2, "ms"),
        seed=sweep.seed,
        own_client=own_client,
        requests_per_level=num(sweep.requests_per_level, 0),
        rows=rows,
        projection_note=note,
        energy_absent=one_absence(row.energy for row in rows),
        command=ladder_command(packet, ladder),
    )


def load_sweep_ladders(ladders: Sequence[tuple[Packet, Ladder]]) -> list[tuple[Packet, Ladder]]:
    return [(p, ladder) for p, ladder in ladders if ladder.kind == "load" and ladder.load is not None]


def _level_point(
    packet: Packet, arm: Arm, series: str, x: float, x_label: str, value: float, row: LoadLevelRow
) -> Point:
    flag_label = {DIFFERS: "differs", UNUSABLE: "unusable"}.get(row.flag or "", "")
    return Point(
        series=series,
        x=x,
        x_label=x_label,
        centre=value,
        values=[value],
        state=arm.state.value,
        href=routes.packet_page(packet.id, arm.id),
        evidence=f"{packet.id} · {arm.label}",
        note=f"{row.identical.text} of {row.completed.text} outputs identical to the oracle"
        if row.identity != "not checked"
        else "identity not checked",
        flag=row.flag,
        flag_label=flag_label,
        flag_colour=UNUSABLE_COLOUR if row.flag == UNUSABLE else WITHHELD_COLOUR,
        source=packet.provenance.taken_from,
    )


def frontier_chart(sources: Sequence[tuple[Packet, Ladder, LoadSweepView]]) -> Chart:
    points = []
    for packet, ladder, view in sources:
        arm = packet.arm(ladder.arm)
        for level, row in zip(ladder.load.levels if ladder.load else [], view.rows, strict=True):
            per_user = level.per_user_tok_s
            if per_user is None:
                continue
            loop = "" if level.mode == "closed" else " (open loop)"
            x = num(per_user)
            label = f"{level.label} · {x.text} tok/s per user"
            points.append(_level_point(packet, arm, view.series + loop, x.value, label, level.aggregate_tok_s, row))
            if level.mode == "closed" and row.projected_aggregate_tok_s and row.projected_per_user_tok_s:
                points.append(
                    Point(
                        series=f"{view.series} (projected)",
                        x=row.projected_per_user_tok_s.value,
                        x_label=f"{level.label} · projected",
                        centre=row.projected_aggregate_tok_s.value,
                        state="estimated",
                        href=view.href,
                        evidence=f"{packet.id} · {arm.label}",
                        note="projection: docs/projections.md, Many users at once",
                        source=packet.provenance.taken_from,
                    )
                )
    return chart(
        "load-frontier",
        "How many users, at what speed each",
        "A point per load level, a series per configuration: aggregate output tok/s of the card(s) against "
        "the median decode rate one user sees · dashed: the multi-user projection",
        points,
        x_title="tok/s per user",
        y_title="aggregate tok/s",
        x_ticks=False,
    )


def energy_chart(sources: Sequence[tuple[Packet, Ladder, LoadSweepView]]) -> Chart | None:
    """Joules per output token against aggregate throughput, a point per level with a valid energy
    window; None when no level has one (the tables say why for each level)."""
    points = []
    for packet, ladder, view in sources:
        arm = packet.arm(ladder.arm)
        for level, row in zip(ladder.load.levels if ladder.load else [], view.rows, strict=True):
            figure = row.energy
            if figure is None or not figure.valid or figure.j_per_token is None:
                continue
            loop = "" if level.mode == "closed" else " (open loop)"
            label = f"{level.label} · {row.aggregate_tok_s.text} tok/s aggregate"
            point = _level_point(packet, arm, view.series + loop, row.aggregate_tok_s.value, label, 0.0, row)
            points.append(replace(point, centre=figure.j_per_token.value, values=[figure.j_per_token.value]))
    if not points:
        return None
    return chart(
        "load-energy",
        "Energy per token against throughput",
        "A point per load level with a valid energy window: joules per output token of the card(s) against "
        "aggregate output tok/s; the whole card's energy over the level, idle power included",
        points,
        x_title="aggregate tok/s",
        y_title="J per output token",
        x_ticks=False,
    )


def latency_charts(sources: Sequence[tuple[Packet, Ladder, LoadSweepView]]) -> list[Chart]:
    charts = []
    for mode, x_title, chart_id in (("closed", "concurrent users", "users"), ("open", "request rate (req/s)", "rate")):
        points = []
        for packet, ladder, view in sources:
            arm = packet.arm(ladder.arm)
            for level, row in zip(ladder.load.levels if ladder.load else [], view.rows, strict=True):
                if level.mode != mode:
                    continue
                x = float((level.users if mode == "closed" else level.rate_rps) or 0.0)
                for name, value in (
                    ("TTFT p50", row.ttft_p50_ms),
                    ("TTFT p99", row.ttft_p99_ms),
                    ("ITL p50", row.itl_p50_ms),
                    ("ITL p99", row.itl_p99_ms),
                ):
                    if value is not None:
                        series = f"{view.series} · {name}"
                        points.append(_level_point(packet, arm, series, x, level.label, value.value, row))
        if points:
            charts.append(
                chart(
                    f"load-latency-{chart_id}",
                    f"Latency percentiles against {x_title}",
                    "Time to first token and inter-token latency (from token ids), p50 and p99 per level; log scale",
                    points,
                    x_title=x_title,
                    y_title="milliseconds",
                    x_log=True,
                    y_log=True,
                )
            )
    return charts


@dataclass(frozen=True)
class LoadSweepSection:
    charts: list[Chart]
    sweeps: list[LoadSweepView]


def load_sweep_section(
    ladders: Sequence[tuple[Packet, Ladder]], hardware: dict[str, Hardware], recipe: Recipe | None
) -> LoadSweepSection | None:
    """The family page's load charts and per-configuration tables; None without a load sweep."""
    sources = [
        (packet, ladder, sweep_view(packet, ladder, hardware.get(packet.identity.host.hardware), recipe))
        for packet, ladder in load_sweep_ladders(ladders)
    ]
    if not sources:
        return None
    energy = energy_chart(sources)
    # every number the frontier and latency charts draw is in the per-level tables under them
    # (templates/family.html); the energy chart keeps its own numbers table
    drawn = [replace(c, numbers_at=LOAD_TABLES) for c in (frontier_chart(sources), *latency_charts(sources))]
    return LoadSweepSection(
        charts=[drawn[0], *([energy] if energy else []), *drawn[1:]],
        sweeps=[view for _, _, view in sources],
    )
