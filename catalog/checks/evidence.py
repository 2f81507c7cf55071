"""Re-derive a measured packet's numbers from its raw rows: every published figure must trace."""

from __future__ import annotations

import math

from catalog.checks.canaries import verdict
from catalog.model.metrics import compare_rows, no_rate_because, server_decode_rate, server_ttft_ms
from catalog.model.packet import Arm, GateResult, Packet, PromptRow, ServerRun
from catalog.recipes.suite import CanarySet

Problem = tuple[str, str]


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def evidence_problems(packet: Packet) -> list[Problem]:
    problems: list[Problem] = []
    for arm_index, arm in enumerate(packet.arms):
        problems.extend(_server_problems(arm, f"arms[{arm_index}]"))
        problems.extend(_gate_problems(packet, arm, f"arms[{arm_index}]"))
    return problems


def _server_problems(arm: Arm, where: str) -> list[Problem]:
    problems: list[Problem] = []
    for index, server in enumerate(arm.servers):
        field = f"{where}.servers[{index}]"
        if server.status != "ok":
            if server.decode_tok_s is not None:
                problems.append((f"{field}.decode_tok_s", "a failed server cannot publish a rate"))
            continue
        rate = server_decode_rate(server.rows)
        if not _close(server.decode_tok_s, rate):
            problems.append((f"{field}.decode_tok_s", _rate_differs(server, rate)))
        if not _close(server.ttft_ms, server_ttft_ms(server.rows)):
            problems.append((f"{field}.ttft_ms", "does not match the TTFT re-computed from its rows"))
        if server.cache_zero is not None and server.cache_zero != shows_cache_zero(server):
            problems.append((f"{field}.cache_zero", "disagrees with the rows' cached_tokens"))
    return problems


def _rate_differs(server: ServerRun, rate: float | None) -> str:
    """What the rows say instead of the published rate; where they give none, the row that has none
    and why (a completion too short for the window, or tokens 1..100 read in bursts)."""
    silent = next(((row, why) for row in server.rows if (why := no_rate_because(row.token_times_us))), None)
    if rate is not None or silent is None:
        return "does not match the rate re-computed from its rows"
    return f"is published, but its rows give no rate: prompt {silent[0].prompt_id!r} has {silent[1]}"


def shows_cache_zero(server: ServerRun) -> bool:
    """Every row reported cached_tokens 0; or, where a server left prompt_tokens_details out
    (cached_tokens unknown), none reported more and vllm:prefix_cache_hits stayed at 0."""
    check = server.cache_check
    if check is not None and check.source == "metrics":
        return check.prefix_cache_hits == 0 and not any(row.cached_tokens for row in server.rows)
    return all(row.cached_tokens == 0 for row in server.rows)


def _gate_problems(packet: Packet, arm: Arm, where: str) -> list[Problem]:
    problems: list[Problem] = []
    for index, gate in enumerate(arm.gates):
        pair = _gate_pair(packet, arm, gate)
        if pair is None and gate.server is not None and _compares_named_server(packet, gate):
            problems.append((f"{where}.gates[{index}].server", _unnamed(arm, gate)))
            continue
        if pair is None:
            problems.append((f"{where}.gates[{index}].against", f"names no arm or server pair: {gate.against!r}"))
            continue
        if not pair[0]:
            problems.append((f"{where}.gates[{index}]", "has no prompt rows to re-compare"))
            continue
        recomputed = compare_rows(gate.gate, gate.against, *pair)
        if (recomputed.exact, recomputed.first_divergence) != (gate.exact, gate.first_divergence):
            problems.append((f"{where}.gates[{index}]", "does not match the token arrays re-compared"))
        elif gate.divergences and gate.divergences != recomputed.divergences:
            problems.append((f"{where}.gates[{index}].divergences", "do not match the token arrays re-compared"))
    return problems


def _gate_pair(packet: Packet, arm: Arm, gate: GateResult) -> tuple[list[PromptRow], list[PromptRow]] | None:
    """G1 and G2 compare an arm's first two servers, or, naming a further server (`gate.server`:
    servers C and D of a campaign of 3 or 4 per arm), that server with the first; G3 compares one
    server (`gate.server`) with the oracle arm named in `against`, whose servers G1 has shown
    identical. A label held by two servers names neither: which one was compared is unknown."""
    if gate.gate in ("G1", "G2"):
        if len(arm.servers) < 2:
            return None
        if gate.server is None:
            return arm.servers[0].rows, arm.servers[1].rows
        named = _named(arm, gate.server)
        if named is None or named is arm.servers[0]:
            return None
        return named.rows, arm.servers[0].rows
    oracle = next((a for a in packet.arms if a.id == gate.against), None)
    server = _named(arm, gate.server) if gate.server is not None else None
    if oracle is None or not oracle.servers or server is None:
        return None
    return server.rows, oracle.servers[0].rows


def _compares_named_server(packet: Packet, gate: GateResult) -> bool:
    """A G1 or G2 naming a server, or a G3 naming one and an arm of the packet: only the server can be amiss."""
    return gate.gate in ("G1", "G2") or any(a.id == gate.against and a.servers for a in packet.arms)


def _unnamed(arm: Arm, gate: GateResult) -> str:
    held = sum(server.label == gate.server for server in arm.servers)
    if held > 1:
        return f"names {gate.server!r}, a label {held} servers of arm {arm.id!r} hold: which one it compared is unknown"
    if held == 0:
        return f"names {gate.server!r}, which is no server of arm {arm.id!r}"
    return f"names {gate.server!r}, the first server of arm {arm.id!r}, which a {gate.gate} compares the others with"


def _named(arm: Arm, label: str) -> ServerRun | None:
    """The one server of the arm with this label; none where no server, or more than one, has it."""
    found = [server for server in arm.servers if server.label == label]
    return found[0] if len(found) == 1 else None


def canary_problems(packet: Packet, canaries: CanarySet) -> list[Problem]:
    """Every recorded verdict is judged again from the recorded answers, and a server that records
    canaries records the whole set, each canary once: the runner asks every canary of the set on
    every server (runner/attempt.py `run_canaries`), so a set with some left out is a record with
    the failures dropped (a grade counts only the canaries it is shown)."""
    problems: list[Problem] = []
    by_id = {c.id: c for c in canaries.canaries}
    for arm_index, arm in enumerate(packet.arms):
        for server_index, server in enumerate(arm.servers):
            problems.extend(_canary_set_problems(server, canaries, f"arms[{arm_index}].servers[{server_index}]"))
            for index, result in enumerate(server.canaries):
                field = f"arms[{arm_index}].servers[{server_index}].canaries[{index}]"
                canary = by_id.get(result.id)
                if canary is None:
                    problems.append((f"{field}.id", f"canary {result.id!r} is not in {canaries.id}"))
                    continue
                passed, detail = verdict(canary, result.outputs, result.reasoning)
                if (passed, detail) != (result.passed, result.detail):
                    problems.append(
                        (
                            f"{field}.passed" if passed != result.passed else f"{field}.detail",
                            f"recorded {result.passed} ({result.detail!r}), its answers give {passed} ({detail!r})",
                        )
                    )
    return problems


def _canary_set_problems(server: ServerRun, canaries: CanarySet, where: str) -> list[Problem]:
    """A server with canaries recorded carries every canary of the set exactly once (a server
    that recorded none is a limitation the grade discloses, not a forgery)."""
    if not server.canaries:
        return []
    recorded = [result.id for result in server.canaries]
    problems: list[Problem] = []
    twice = sorted({cid for cid in recorded if recorded.count(cid) > 1})
    if twice:
        problems.append(
            (f"{where}.canaries", f"records canary {', '.join(map(repr, twice))} more than once; each is asked once")
        )
    missing = [c.id for c in canaries.canaries if c.id not in recorded]
    if missing:
        count = len(canaries.canaries)
        problems.append(
            (
                f"{where}.canaries",
                f"records {count - len(missing)} of the {count} canaries of {canaries.id}; missing"
                f" {', '.join(map(repr, missing))}: a server that records canaries records every one of its set",
            )
        )
    return problems
