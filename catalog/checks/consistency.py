"""Cross-check a packet's figures with each other, its recipe, its hardware and physics.

The seal proves a file was not edited after it was written and `catalog.checks.evidence` that its
published figures follow from its rows; neither can tell whether the rows themselves are
plausible. These checks refuse what no honest campaign can produce: a speculative result
without the gates that make it publishable, a negative figure, a time over a day (MAX_TIME_S) or a
start faster than one read of the weights, token arrays that contradict their own timings,
speculative counters beyond the tokens they counted, rows in an import, and a "reproduction" that
is a copy of the original or ran on another card. What a packet claims
about the world has a module per class, run from here (docs/packets.md lists them): its model's
facts (facts.py), physics both ways (physics.py), its servers' independence (independence.py),
its workload (workload.py, load_sweep.py), its identity (identity.py), its dates (dates.py), its
size (bounds.py) and its fleet campaign cell (campaign.py).

Each check returns `(field, message)` problems, like `catalog.checks.evidence`; the loader turns them
into `CatalogError`s naming the file. API:
- `consistency_problems(packet, recipe, hardware, now)`: every check of one packet;
  it is `packet_problems(packet, now)` (the packet alone: run where the file is read, on every
  core) plus `reference_problems(packet, recipe, hardware)` (against data/).
- `reproduction_problems(packet, original)`: a reproduction against the packet it names (the same
  model, configurations and hardware, on its own boot, with its own timings).
Energy windows are checked by catalog/checks/energy.py, run from here too.
Load sweeps' own checks live in catalog/checks/load_sweep.py; they run from here (and their
prompt order against the suite from catalog.store.repository).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator
from datetime import datetime

from catalog.checks.bounds import text_bound_problems
from catalog.checks.campaign import campaign_problems
from catalog.checks.dates import date_problems, model_date_problems
from catalog.checks.energy import board_power_problems, energy_problems
from catalog.checks.facts import facts_problems, file_facts_problems
from catalog.checks.identity import identity_problems
from catalog.checks.independence import copied_from, copy_problems
from catalog.checks.load_sweep import load_problems
from catalog.checks.physics import physics_problems
from catalog.checks.workload import workload_problems
from catalog.model.arrays import decreasing
from catalog.model.packet import Arm, ArmConfig, Packet, PromptRow, ServerRun, State
from catalog.projection.precision import DRAFT_INT4_ENV
from catalog.recipes.command_facts import target_argv
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe

Problem = tuple[str, str]

# Configuration that belongs to the draft, not to the target model G3 compares against.
_DRAFT_ENV = frozenset({DRAFT_INT4_ENV})


def _token_times(row: PromptRow) -> tuple[str, array[int]]:
    """The row's field holding its token arrival times, and those times (integer µs from send)."""
    return "token_times_us", row.token_times_us


def _n(value: float) -> str:
    """A figure for a message: 1,234,567 / 61 / 2.56."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


# --- entry points ---------------------------------------------------------------------------


def consistency_problems(
    packet: Packet, recipe: Recipe | None, hardware: Hardware | None, now: datetime
) -> list[Problem]:
    """Every check of one packet. A missing recipe or hardware entry skips the checks that need it
    (the loader reports the missing entry itself)."""
    return [*packet_problems(packet, now), *reference_problems(packet, recipe, hardware)]


def packet_problems(packet: Packet, now: datetime) -> list[Problem]:
    """The checks that need nothing but the packet (and the clock)."""
    return [
        *gate_problems(packet),
        *server_problems(packet),
        *figure_problems(packet),
        *token_problems(packet),
        *spec_metric_problems(packet),
        *ladder_problems(packet),
        *load_problems(packet),
        *energy_problems(packet),
        *date_problems(packet, now),
        *file_facts_problems(packet),
        *copy_problems(packet),
        *workload_problems(packet),
        *text_bound_problems(packet),
        *campaign_problems(packet),
    ]


def reference_problems(packet: Packet, recipe: Recipe | None, hardware: Hardware | None) -> list[Problem]:
    """The checks against the packet's recipe and hardware entry."""
    return [
        *facts_problems(packet, recipe),
        *model_date_problems(packet, recipe),
        *identity_problems(packet, recipe, hardware),
        *physics_problems(packet, recipe, hardware),
        *board_power_problems(packet, hardware),
    ]


# --- gates and servers ----------------------------------------------------------------------


def gate_problems(packet: Packet) -> list[Problem]:
    """A measured arm carries the gates its state rests on: G1 at depth 0; G2 and one G3 per
    server above it, each G3 against a depth-0 arm of this packet serving the same target; its
    servers' labels are unique, and every server with rows is compared by its G1 (G2).
    An imported arm carries what its source published: a G1 at depth 0, a G3 above it (the
    importer seals an arm whose outcome the source did not print into a screened packet), and
    its G3s that name an arm of the packet never name the arm itself, always a depth-0 one."""
    if packet.provenance.kind != "measured":
        return _imported_g3_problems(packet)
    problems: list[Problem] = []
    for index, arm in enumerate(packet.arms):
        where = f"arms[{index}]"
        problems.extend(_label_problems(arm, where))
        problems.extend(_ungated_servers(arm, where))
        kinds = {gate.gate for gate in arm.gates}
        if arm.config.spec_depth == 0:
            if "G1" not in kinds:
                problems.append((f"{where}.gates", f"arm {arm.id!r} at depth 0 has no G1 gate"))
        else:
            if "G2" not in kinds:
                problems.append(
                    (f"{where}.gates", f"speculative arm {arm.id!r} (depth {arm.config.spec_depth}) has no G2 gate")
                )
            compared = {gate.server for gate in arm.gates if gate.gate == "G3"}
            for server in arm.servers:
                if server.label not in compared:
                    problems.append(
                        (
                            f"{where}.gates",
                            f"speculative arm {arm.id!r} has no G3 gate for server {server.label!r}",
                        )
                    )
        for gate_index, gate in enumerate(arm.gates):
            if gate.gate == "G3":
                problem = _oracle_problem(packet, arm, gate.against)
                if problem:
                    problems.append((f"{where}.gates[{gate_index}].against", problem))
    return problems


def _label_problems(arm: Arm, where: str) -> list[Problem]:
    """A measured arm's servers are labelled A, B, C, D, each once (runner/campaign.py
    `SERVER_LABELS`): a gate names its server by label, so a label held twice names neither."""
    problems: list[Problem] = []
    seen: set[str] = set()
    for j, server in enumerate(arm.servers):
        if server.label in seen:
            problems.append(
                (
                    f"{where}.servers[{j}].label",
                    f"server label {server.label!r} is held by another server of arm {arm.id!r}: each fresh"
                    " server has its own label, which its gates name",
                )
            )
        seen.add(server.label)
    return problems


def _ungated_servers(arm: Arm, where: str) -> list[Problem]:
    """Every server of a measured arm with rows is compared by a G1 (depth 0) or G2 (speculative)
    gate, as runner/campaign.py `gates_for` compares it: the second by the unlabelled gate (the
    first two servers), each further one by a gate naming its label (it against the first); the
    arm's published rate averages every server, so one no gate compared could publish any tokens.
    An arm with no such gate at all is refused by `gate_problems` already."""
    kind = "G1" if arm.config.spec_depth == 0 else "G2"
    gates = [gate for gate in arm.gates if gate.gate == kind]
    if not gates:
        return []
    named = {gate.server for gate in gates}
    problems: list[Problem] = []
    for j, server in enumerate(arm.servers):
        if j == 0 or not server.rows:
            continue
        needed = None if j == 1 else server.label
        if needed not in named:
            gate = f"an unlabelled {kind}" if needed is None else f"a {kind} naming {server.label!r}"
            problems.append(
                (
                    f"{where}.gates",
                    f"server {server.label!r} (servers[{j}]) of arm {arm.id!r} has rows but no {kind} gate"
                    f" compared them: {gate} compares it with server {arm.servers[0].label!r}",
                )
            )
    return problems


def _imported_g3_problems(packet: Packet) -> list[Problem]:
    if packet.provenance.kind == "screened":
        return []  # speed only: a screened arm carries no gate
    problems: list[Problem] = []
    for index, arm in enumerate(packet.arms):
        # an import keeps its gates: what its source printed, never fewer (a failing G3 deleted would
        # publish a withheld arm); an arm whose identity outcome the source did not print is screened
        needed = "G1" if arm.config.spec_depth == 0 else "G3"
        if not any(gate.gate == needed for gate in arm.gates):
            depth = f"depth {arm.config.spec_depth}"
            problems.append(
                (
                    f"arms[{index}].gates",
                    f"imported arm {arm.id!r} ({depth}) carries no {needed} gate: an imported arm carries the"
                    " gate outcome its source printed, or it is a screened result (speed only) in a screened packet",
                )
            )
        for gate_index, gate in enumerate(arm.gates):
            oracle = next((a for a in packet.arms if a.id == gate.against), None)
            if gate.gate != "G3" or oracle is None:
                continue
            if oracle is arm:
                problem = f"G3 compares arm {arm.id!r} with itself, not with its depth-0 oracle"
            elif oracle.config.spec_depth > 0:
                problem = f"G3 names arm {oracle.id!r} of depth {oracle.config.spec_depth}: the oracle is a depth-0 arm"
            else:
                continue
            problems.append((f"arms[{index}].gates[{gate_index}].against", problem))
    return problems


def _oracle_problem(packet: Packet, arm: Arm, against: str) -> str | None:
    oracle = next((a for a in packet.arms if a.id == against), None)
    if oracle is None:
        return f"G3 names {against!r}, which is no arm of this packet"
    if oracle is arm:
        return f"G3 compares arm {arm.id!r} with itself, not with its depth-0 oracle"
    if oracle.config.spec_depth > 0:
        return f"G3 names arm {against!r} of depth {oracle.config.spec_depth}: the oracle is a depth-0 arm"
    for name, mine, theirs in _target_config(arm.config, oracle.config):
        if mine != theirs:
            return f"G3 names arm {against!r} whose {name} {theirs!r} differs from this arm's {mine!r}"
    mine_argv, their_argv = target_argv(arm.config.argv), target_argv(oracle.config.argv)
    if mine_argv != their_argv:
        at = next((i for i, (a, b) in enumerate(zip(mine_argv, their_argv, strict=False)) if a != b), None)
        if at is None:
            at = min(len(mine_argv), len(their_argv))
        shown = [repr(args[at]) if at < len(args) else "nothing" for args in (their_argv, mine_argv)]
        return (
            f"G3 names arm {against!r} whose argv (without its speculative options) differs from this arm's"
            f" at argument {at}: {shown[0]} there, {shown[1]} here"
        )
    return None


def _target_config(arm: ArmConfig, oracle: ArmConfig) -> Iterator[tuple[str, object, object]]:
    """The configuration both sides of G3 must share: everything but the draft (argv apart)."""
    yield "tensor_parallel_size", arm.tensor_parallel_size, oracle.tensor_parallel_size
    yield "graph_capture", arm.graph_capture, oracle.graph_capture
    yield "kv_cache_dtype", arm.kv_cache_dtype, oracle.kv_cache_dtype
    yield "max_model_len", arm.max_model_len, oracle.max_model_len
    yield "env", _target_env(arm.env), _target_env(oracle.env)


def _target_env(env: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name not in _DRAFT_ENV}


def server_problems(packet: Packet) -> list[Problem]:
    """A measured arm rests on two fresh servers with rows; an imported or screened packet measured
    nothing: its servers carry only the values its source published, never per-prompt rows (rows,
    and the token arrays in them, come only from this repository's runner)."""
    problems: list[Problem] = []
    kind = packet.provenance.kind
    for index, arm in enumerate(packet.arms):
        if kind == "imported" and arm.state == State.MEASURED:
            problems.append((f"arms[{index}].state", f"arm {arm.id!r} of an imported packet cannot be measured"))
        if kind != "measured":
            for j, server in enumerate(arm.servers):
                if server.rows:
                    problems.append(
                        (
                            f"arms[{index}].servers[{j}].rows",
                            f"server {server.label!r} of arm {arm.id!r} carries {len(server.rows):,} per-prompt"
                            f" row(s), but the packet is {kind}: rows and their token arrays come only from"
                            " this repository's runner (a measured packet); an import carries the published"
                            " values alone",
                        )
                    )
        if kind == "measured":
            with_rows = sum(1 for server in arm.servers if server.status == "ok" and server.rows)
            if with_rows < 2:
                problems.append(
                    (
                        f"arms[{index}].servers",
                        f"arm {arm.id!r} has {with_rows} ok server(s) with prompt rows; a measured arm needs 2",
                    )
                )
    return problems


# --- figures --------------------------------------------------------------------------------


MAX_TIME_S = 86_400.0
"""The longest time (one day, in seconds) any time a packet records may hold: a server's startup_s,
a TTFT, a concurrency point's wall time, a load level's duration and its first request's planned
time (which bound every request's times: each ends inside its level, within a day of the first
due, and so within two).

No honest campaign comes near it: the runner gives a server `health_deadline_s` (15 minutes) to
answer, a strict-suite request streams at most max_tokens, and the longest committed figures are
minutes. A time past a day is a unit slip (µs for ms) or a forged value; one near the largest
float (1.7e308) is finite, so the sign and finiteness checks pass it, yet a page prints it as a
number of 309 digits. The bound is far above any real time, so it never refuses a slow card."""


def _figures(packet: Packet) -> Iterator[tuple[str, float | None]]:
    """Every number in a packet that counts, times or rates something, with its field."""
    yield "identity.model.weight_bytes", packet.identity.model.weight_bytes
    for i, arm in enumerate(packet.arms):
        where = f"arms[{i}]"
        yield f"{where}.published_figure", arm.published_figure
        for k, value in enumerate(arm.oracle_decode_tok_s):
            yield f"{where}.oracle_decode_tok_s[{k}]", value
        for k, value in enumerate(arm.published_ttft_ms):
            yield f"{where}.published_ttft_ms[{k}]", value
        for k, gate in enumerate(arm.gates):
            for d, divergence in enumerate(gate.first_divergence):
                yield f"{where}.gates[{k}].first_divergence[{d}]", divergence
        for j, server in enumerate(arm.servers):
            yield from _server_figures(server, f"{where}.servers[{j}]")
    for i, ladder in enumerate(packet.ladders):
        for k, point in enumerate(ladder.concurrency):
            yield f"ladders[{i}].concurrency[{k}].completion_tokens", point.completion_tokens
            yield f"ladders[{i}].concurrency[{k}].wall_s", point.wall_s
        for k, context in enumerate(ladder.context):
            yield f"ladders[{i}].context[{k}].decode_tok_s", context.decode_tok_s
            yield f"ladders[{i}].context[{k}].ttft_ms", context.ttft_ms


def _server_figures(server: ServerRun, where: str) -> Iterator[tuple[str, float | None]]:
    yield f"{where}.decode_tok_s", server.decode_tok_s
    yield f"{where}.ttft_ms", server.ttft_ms
    yield f"{where}.startup_s", server.startup_s
    metrics = server.spec_metrics
    if metrics is not None:
        yield f"{where}.spec_metrics.drafts", metrics.drafts
        yield f"{where}.spec_metrics.draft_tokens", metrics.draft_tokens
        yield f"{where}.spec_metrics.accepted_tokens", metrics.accepted_tokens
        for k, value in enumerate(metrics.accepted_per_position):
            yield f"{where}.spec_metrics.accepted_per_position[{k}]", value
    for k, row in enumerate(server.rows):
        yield f"{where}.rows[{k}].prompt_tokens", row.prompt_tokens
        yield f"{where}.rows[{k}].cached_tokens", row.cached_tokens
    # token times are checked with the token arrays (token_problems)


def _times(packet: Packet) -> Iterator[tuple[str, float | None, str]]:
    """Every time a packet records, with its field and unit ("s" or "ms")."""
    for i, arm in enumerate(packet.arms):
        for k, value in enumerate(arm.published_ttft_ms):
            yield f"arms[{i}].published_ttft_ms[{k}]", value, "ms"
        for j, server in enumerate(arm.servers):
            yield f"arms[{i}].servers[{j}].startup_s", server.startup_s, "s"
            yield f"arms[{i}].servers[{j}].ttft_ms", server.ttft_ms, "ms"
    for i, ladder in enumerate(packet.ladders):
        where = f"ladders[{i}]"
        for k, point in enumerate(ladder.concurrency):
            yield f"{where}.concurrency[{k}].wall_s", point.wall_s, "s"
        for k, context in enumerate(ladder.context):
            yield f"{where}.context[{k}].ttft_ms", context.ttft_ms, "ms"
        if ladder.load is None:
            continue
        for k, level in enumerate(ladder.load.levels):
            # its requests' times are bound to these two: each is due no sooner than the first and ends
            # inside the level (LoadLevel._times_fit), its TTFT no later than its end (LoadRequest._coherent)
            at = f"{where}.load.levels[{k}]"
            yield f"{at}.duration_s", level.duration_s, "s"
            first = min(range(len(level.requests)), key=lambda r: level.requests[r].planned_ms)
            yield f"{at}.requests[{first}].planned_ms", level.requests[first].planned_ms, "ms"


def figure_problems(packet: Packet) -> list[Problem]:
    """No count, time or rate is negative, infinite or not a number; no time exceeds MAX_TIME_S."""
    problems: list[Problem] = []
    for field, value in _figures(packet):
        if value is None:
            continue
        if not math.isfinite(value):
            problems.append((field, f"is {value}, not a finite number"))
        elif value < 0:
            problems.append((field, f"is negative: {_n(value)}"))
    for field, value, unit in _times(packet):
        most = MAX_TIME_S * (1000.0 if unit == "ms" else 1.0)
        if value is not None and math.isfinite(value) and value > most:
            problems.append(
                (
                    field,
                    f"is {value:.4g} {unit}, over the {most:,.0f} {unit} (one day) any time a packet records may"
                    " hold: no server takes a day to start or to answer one request",
                )
            )
    return problems


# --- token arrays, counters, ladders, dates -------------------------------------------------


def token_problems(packet: Packet) -> list[Problem]:
    """Token times are non-decreasing (token 0 arrives at TTFT by definition). Token ids lie in
    the model's vocabulary: catalog/checks/facts.py, which knows the model's."""
    rows = [
        (f"arms[{i}].servers[{j}].rows[{k}]", row)
        for i, arm in enumerate(packet.arms)
        for j, server in enumerate(arm.servers)
        for k, row in enumerate(server.rows)
    ]
    # unsigned microseconds: order is all there is to check, every row's at once
    out_of_order = decreasing([_token_times(row)[1] for _, row in rows])
    return [_time_problem(*rows[index]) for index in out_of_order]


def _time_problem(where: str, row: PromptRow) -> Problem:
    name, times = _token_times(row)
    p = next(p for p in range(1, len(times)) if times[p] < times[p - 1])
    return (
        f"{where}.{name}[{p}]",
        f"token time {times[p]:,} µs is earlier than the token before it ({times[p - 1]:,} µs)",
    )


def spec_metric_problems(packet: Packet) -> list[Problem]:
    """vLLM's speculative counters agree with each other, with the arm's depth and with the tokens
    they counted: no more accepted than drafted, per-position counts that add up, at most `depth`
    tokens per draft, and no more tokens than the server produced. A screened arm's depth is unknown
    (`vllm bench serve` does not record it): no depth checks.

    The runner differences the counters over the strict suite alone (runner/attempt.py scrapes
    /metrics after the canaries and after the last prompt), so a measured server's window holds
    exactly the completion tokens of its rows. Each draft is one verify step, and a step yields one
    token plus those of its draft accepted, so `drafts + accepted_tokens` tokens at least were
    produced in the window, less what a request's last step counted past its end (vLLM counts a
    step's accepted tokens before it cuts the output at max_tokens or a stop token): at most
    `depth` tokens a row. An imported or screened server has no rows: its counters' window (a
    `vllm bench serve` run) is not recorded token by token, so it is not bounded here."""
    problems: list[Problem] = []
    for i, arm in enumerate(packet.arms):
        depth = arm.config.spec_depth
        depth_known = packet.provenance.kind != "screened"
        for j, server in enumerate(arm.servers):
            metrics = server.spec_metrics
            if metrics is None:
                continue
            where = f"arms[{i}].servers[{j}].spec_metrics"
            if packet.provenance.kind == "measured":
                produced = sum(row.completion_tokens for row in server.rows)
                cut = depth * len(server.rows)  # a request's last step may count tokens past its end
                implied = metrics.drafts + metrics.accepted_tokens
                if implied > produced + cut:
                    problems.append(
                        (
                            f"{where}.drafts",
                            f"drafts + accepted_tokens = {metrics.drafts:,} + {metrics.accepted_tokens:,} ="
                            f" {implied:,} tokens (each verify step yields one token plus its accepted draft"
                            f" tokens), more than the {produced:,} completion tokens the server's"
                            f" {len(server.rows)} rows produced over the strict suite the counters cover"
                            f" (+ depth {depth} a row that its last step may count past the row's end)",
                        )
                    )
            if metrics.accepted_tokens > metrics.draft_tokens:
                problems.append(
                    (
                        f"{where}.accepted_tokens",
                        f"{metrics.accepted_tokens:,} accepted draft tokens exceed the"
                        f" {metrics.draft_tokens:,} drafted",
                    )
                )
            per_position = metrics.accepted_per_position
            if per_position and sum(per_position) != metrics.accepted_tokens:
                problems.append(
                    (
                        f"{where}.accepted_per_position",
                        f"sums to {sum(per_position):,}, not the {metrics.accepted_tokens:,} accepted_tokens",
                    )
                )
            if depth_known and len(per_position) > depth:
                problems.append(
                    (
                        f"{where}.accepted_per_position",
                        f"has {len(per_position)} positions, more than the arm's depth {depth}",
                    )
                )
            if depth_known and metrics.draft_tokens > metrics.drafts * depth:
                problems.append(
                    (
                        f"{where}.draft_tokens",
                        f"{metrics.draft_tokens:,} drafted tokens exceed drafts × depth ="
                        f" {metrics.drafts:,} × {depth} = {metrics.drafts * depth:,}",
                    )
                )
    return problems


def ladder_problems(packet: Packet) -> list[Problem]:
    """A concurrency point cannot return more tokens than its users may ask for: each of `users`
    sends one request of at most max_tokens. Not for a screened point: `vllm bench serve` runs
    all its requests through `users` slots, so its total is requests × max_tokens."""
    if packet.provenance.kind == "screened":
        return []
    problems: list[Problem] = []
    max_tokens = packet.workload.max_tokens
    for i, ladder in enumerate(packet.ladders):
        for k, point in enumerate(ladder.concurrency):
            most = point.users * max_tokens
            if point.completion_tokens > most:
                problems.append(
                    (
                        f"ladders[{i}].concurrency[{k}].completion_tokens",
                        f"{point.completion_tokens:,} completion tokens exceed users × max_tokens ="
                        f" {point.users} × {max_tokens:,} = {most:,}",
                    )
                )
    return problems


# --- reproductions --------------------------------------------------------------------------


def reproduction_problems(packet: Packet, original: Packet) -> list[Problem]:
    """A reproduction re-runs the same model and configurations on the same hardware (the same
    `identity.host.hardware` id; another card count with the same arms' TP is the same run) on an
    independent boot, and records its own timings: otherwise it is another campaign, or the
    original re-labelled."""
    problems: list[Problem] = []
    mine, theirs = packet.identity.model, original.identity.model
    for name in ("slug", "variant", "repo", "quantization"):
        if getattr(mine, name) != getattr(theirs, name):
            problems.append(
                (
                    f"identity.model.{name}",
                    f"is {getattr(mine, name)!r}, but the packet it reproduces ({original.id}) has"
                    f" {getattr(theirs, name)!r}",
                )
            )
    hardware, original_hardware = packet.identity.host.hardware, original.identity.host.hardware
    if hardware != original_hardware:
        problems.append(
            (
                "identity.host.hardware",
                f"is {hardware!r}, but the packet it reproduces ({original.id}) ran on {original_hardware!r}:"
                " a reproduction runs on the same card (another card has another ceiling; its numbers are"
                " another campaign)",
            )
        )
    configs, original_configs = _arm_configs(packet), _arm_configs(original)
    if configs != original_configs:
        extra = sorted(_describe(c) for c in configs - original_configs)
        missing = sorted(_describe(c) for c in original_configs - configs)
        parts = [f"only here: {'; '.join(extra)}" if extra else "", f"only in {original.id}: {'; '.join(missing)}"]
        problems.append(
            ("arms", "configurations differ from the packet it reproduces: " + ", ".join(p for p in parts if p))
        )
    boot = packet.identity.host.boot_id
    if boot is not None and boot == original.identity.host.boot_id:
        problems.append(
            (
                "identity.host.boot_id",
                f"{boot!r} is the boot of the packet it reproduces ({original.id}): a reproduction needs an"
                " independent run",
            )
        )
    # its own timings: no server a copy of the original's, shifted or scaled (catalog/checks/independence.py)
    problems += copied_from(packet, original)
    return problems


_Config = tuple[int, str | None, int, str | None, tuple[tuple[str, str], ...]]


def _arm_configs(packet: Packet) -> set[_Config]:
    return {
        (
            arm.config.tensor_parallel_size,
            arm.config.spec_method,
            arm.config.spec_depth,
            arm.config.draft_head,
            tuple(sorted(arm.config.env.items())),
        )
        for arm in packet.arms
    }


def _describe(config: _Config) -> str:
    tp, method, depth, head, env = config
    spec = f"{method} depth {depth}" if depth else "no speculation"
    extras = [f"draft head {head}"] if head else []
    extras += [f"{name}={value}" for name, value in env]
    return f"TP {tp}, {spec}" + "".join(f", {e}" for e in extras)
