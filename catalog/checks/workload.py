"""The workload is what it says: every row within the token budget the packet declares, one
prompt one size, within the context the server was sized for, and oracle speeds that are the
oracle's.

A packet declares its workload (`max_tokens`, each arm's `max_model_len`) and the rows it ran;
both are claims, and they must tell one story: a row longer than the max_tokens the request asked
for, a prompt counted at two sizes by the same model, or a context deeper than the server could
hold did not happen as written. (Load sweeps keep their own checks, catalog/checks/load_sweep.py,
the concurrency a closed level declares among them; token ids against the vocabulary are
catalog/checks/facts.py's.) Each check returns `(field, message)` problems.
"""

from __future__ import annotations

from catalog.model.packet import Packet

Problem = tuple[str, str]


def workload_problems(packet: Packet) -> list[Problem]:
    return [*_sampling_problems(packet), *_row_problems(packet), *_context_problems(packet), *_oracle_problems(packet)]


def _sampling_problems(packet: Packet) -> list[Problem]:
    """A measured packet sampled greedily, as the runner always does: its gates compare token
    arrays, which only greedy decoding (temperature 0, top_p 1) makes comparable."""
    if packet.provenance.kind != "measured":
        return []
    workload = packet.workload
    wanted = (("temperature", workload.temperature, 0.0), ("top_p", workload.top_p, 1.0))
    return [
        (f"workload.{name}", f"is {value:g}, but this runner measures greedily ({name} {greedy:g})")
        for name, value, greedy in wanted
        if value != greedy
    ]


def _row_problems(packet: Packet) -> list[Problem]:
    """No row holds more completion tokens than max_tokens asked for, or more tokens than its
    server's max_model_len; every row of one prompt counts the same prompt tokens."""
    max_tokens = packet.workload.max_tokens
    sizes: dict[str, tuple[int, str]] = {}  # prompt id -> (prompt tokens, where first seen)
    problems: list[Problem] = []
    for i, arm in enumerate(packet.arms):
        context = arm.config.max_model_len
        for j, server in enumerate(arm.servers):
            for k, row in enumerate(server.rows):
                where = f"arms[{i}].servers[{j}].rows[{k}]"
                if row.completion_tokens > max_tokens:
                    problems.append(
                        (
                            f"{where}.completion_tokens",
                            f"{row.completion_tokens:,} completion tokens exceed the workload's max_tokens"
                            f" {max_tokens:,}",
                        )
                    )
                if context is not None and row.prompt_tokens + row.completion_tokens > context:
                    problems.append(
                        (
                            f"{where}.prompt_tokens",
                            f"{row.prompt_tokens:,} prompt + {row.completion_tokens:,} completion tokens exceed the"
                            f" arm's max_model_len {context:,}",
                        )
                    )
                first = sizes.setdefault(row.prompt_id, (row.prompt_tokens, where))
                if first[0] != row.prompt_tokens:
                    problems.append(
                        (
                            f"{where}.prompt_tokens",
                            f"is {row.prompt_tokens:,} for prompt {row.prompt_id!r}, but {first[1]} counts"
                            f" {first[0]:,}: one model counts one prompt one way",
                        )
                    )
    return problems


def _context_problems(packet: Packet) -> list[Problem]:
    """A context point is no deeper than its arm's server was sized for."""
    limits = {arm.id: arm.config.max_model_len for arm in packet.arms}
    problems: list[Problem] = []
    for i, ladder in enumerate(packet.ladders):
        context = limits.get(ladder.arm)
        if context is None:
            continue
        for k, point in enumerate(ladder.context):
            if point.depth_tokens > context:
                problems.append(
                    (
                        f"ladders[{i}].context[{k}].depth_tokens",
                        f"{point.depth_tokens:,} prompt tokens exceed arm {ladder.arm!r}'s max_model_len {context:,}",
                    )
                )
    return problems


def _oracle_problems(packet: Packet) -> list[Problem]:
    """In a measured packet the oracle speeds quoted beside a speculative arm are its G3 oracle
    arm's server rates (an imported one quotes what its source printed)."""
    if packet.provenance.kind != "measured":
        return []
    problems: list[Problem] = []
    for i, arm in enumerate(packet.arms):
        if not arm.oracle_decode_tok_s:
            continue
        named = {g.against for g in arm.gates if g.gate == "G3"}
        oracle = next((a for a in packet.arms if a.id in named), None)
        values = oracle.server_values if oracle is not None else []
        if arm.oracle_decode_tok_s != values:
            whose = f"oracle arm {oracle.id!r}'s servers measured {values}" if oracle else "no G3 names an oracle arm"
            problems.append(
                (
                    f"arms[{i}].oracle_decode_tok_s",
                    f"is {arm.oracle_decode_tok_s}, but {whose}: a measured packet quotes its own oracle",
                )
            )
    return problems
