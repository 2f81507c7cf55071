"""The workload is what it says: every row within the token budget the packet declares, one
prompt one size, within the context the server was sized for, and oracle speeds that are the
oracle's.

A packet declares its workload (`max_tokens`, each arm's `max_model_len`) and the rows it ran;
both are claims, and they must tell one story: a row longer than the max_tokens the request asked
for, a prompt counted at two sizes by the same model, or a context deeper than the server could
hold did not happen as written. The context a server could hold is its arm's max_model_len, or,
where the config records none, the `--max-model-len` its recorded command set (`server_context`:
vLLM sized the server by the flag; a config and a command that disagree are
catalog/checks/commands.py's); and never more than the model's own context length as the catalog
knows it (`model_context_problems`: the recipe's model.context_length, or the `--max-model-len` of a
recipe feature, such as YaRN's long_context, whose arguments the arm's recorded command carries),
whatever the packet says. (Load sweeps keep their own checks, catalog/checks/load_sweep.py,
the concurrency a closed level declares among them; token ids against the vocabulary are
catalog/checks/facts.py's.) A ladder says only what runner/ladders.py records: a concurrency
level identical to the oracle holds the oracle rows' tokens (`concurrency_oracle_problems`), a
context point is of a class the runner fills context with (`context_class_problems`: both go by
the suite's prompts, so catalog/checks/cross_check.py calls them for a measured packet), and a
depth-0 arm's context point was compared with no oracle, a speculative arm's only with its G3
oracle's point at the same depth and class (`_context_oracle_problems`); and only a measured
packet's ladders were compared with an oracle at all (`_unmeasured_identity_problems`: an import's
record null). (No rule that a deeper context decodes slower: noise would refuse honest ladders.)
Each check returns `(field, message)` problems.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from catalog.checks.load_sweep import _oracle_of
from catalog.model.packet import LADDER_MOST_USERS, Arm, Packet
from catalog.recipes.command_facts import (
    MAX_MODEL_LEN_FLAG,
    command_facts,
    option_groups,
    option_value,
    vllm_args,
    vllm_length,
)
from catalog.recipes.compose import flag_groups, split_joined
from catalog.recipes.recipe import Recipe
from catalog.recipes.suite import Suite

Problem = tuple[str, str]


def server_context(arm: Arm) -> tuple[int, str] | None:
    """The context an arm's servers were sized for, in words (after "the arm's") that say where: its
    config's max_model_len, else the smallest `--max-model-len` its recorded commands set (a
    server holds no more than its command sized it for, whatever the config leaves unsaid); None
    where neither says."""
    config = arm.config
    if config.max_model_len is not None:
        return config.max_model_len, f"max_model_len {config.max_model_len:,}"
    stated = [
        (length, field)
        for field, argv in (("argv", config.argv), ("launch_argv", config.launch_argv))
        if argv and (length := command_facts(argv).max_model_len) is not None
    ]
    if not stated:
        return None
    length, field = min(stated)
    return length, f"recorded command's {MAX_MODEL_LEN_FLAG} {length:,} (config.{field}; config.max_model_len is null)"


def workload_problems(packet: Packet) -> list[Problem]:
    return [
        *_sampling_problems(packet),
        *_row_problems(packet),
        *_context_problems(packet),
        *_oracle_problems(packet),
        *_unmeasured_identity_problems(packet),
        *_context_oracle_problems(packet),
        *_ladder_users_problems(packet),
        # a measured packet's concurrency ladders are held to its suite's prompt order (cross_check)
        *(concurrency_oracle_problems(packet) if packet.provenance.kind != "measured" else []),
    ]


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
        context, sized = server_context(arm) or (None, "")
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
                            f"{row.prompt_tokens:,} prompt + {row.completion_tokens:,} completion tokens exceed"
                            f" the arm's {sized}",
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
    limits = {arm.id: server_context(arm) for arm in packet.arms}
    return _deeper_points(packet, limits, lambda arm, length, sized: f"exceed arm {arm!r}'s {sized}")


def _deeper_points(
    packet: Packet, limits: dict[str, tuple[int, str] | None], words: Callable[[str, int, str], str]
) -> list[Problem]:
    """Each context point deeper than its arm's limit (length, where it is written); `words` says
    what it exceeds, given the arm, the length and where."""
    problems: list[Problem] = []
    for i, ladder in enumerate(packet.ladders):
        limit = limits.get(ladder.arm)
        if limit is None:
            continue
        length, where = limit
        for k, point in enumerate(ladder.context):
            if point.depth_tokens > length:
                problems.append(
                    (
                        f"ladders[{i}].context[{k}].depth_tokens",
                        f"{point.depth_tokens:,} prompt tokens {words(ladder.arm, length, where)}",
                    )
                )
    return problems


def model_context(recipe: Recipe, arm: Arm) -> tuple[int, str]:
    """The most context the model serves as the catalog knows it, and where that is written: the
    recipe's model.context_length, or the larger `--max-model-len` of a recipe feature (YaRN's
    long_context) whose every argument the arm's recorded command carries."""
    length = recipe.model.context_length
    words = f"recipe {recipe.meta.slug!r} model.context_length"
    carried = [
        group
        for argv in (arm.config.argv, arm.config.launch_argv)
        if argv
        for group in option_groups(vllm_args(argv)[0])
    ]
    for name, feature in recipe.features.items():
        value = option_value(split_joined(feature.args), MAX_MODEL_LEN_FLAG)  # as vLLM reads it: 128k too
        extended = vllm_length(value) if value is not None else None
        if extended is not None and extended > length and all(g in carried for g in flag_groups(feature.args)):
            length, words = extended, f"recipe {recipe.meta.slug!r} feature {name!r}'s {MAX_MODEL_LEN_FLAG}"
    return length, words


def model_context_problems(packet: Packet, recipe: Recipe | None) -> list[Problem]:
    """No row and no context point holds more tokens than the model serves, whatever max_model_len
    the packet gives its arm or leaves out. Where the server's own context is no larger, the
    server's check has already said so."""
    if recipe is None or recipe.model.context_length <= 0:
        return []  # an omni (diffusion) recipe writes 0: it states no context length
    beyond = {arm.id: _beyond_server(recipe, arm) for arm in packet.arms}
    problems: list[Problem] = []
    for i, arm in enumerate(packet.arms):
        limit = beyond[arm.id]
        if limit is None:
            continue
        length, words = limit
        for j, server_run in enumerate(arm.servers):
            for k, row in enumerate(server_run.rows):
                if row.prompt_tokens + row.completion_tokens > length:
                    problems.append(
                        (
                            f"arms[{i}].servers[{j}].rows[{k}].prompt_tokens",
                            f"{row.prompt_tokens:,} prompt + {row.completion_tokens:,} completion tokens exceed"
                            f" the model's context length {length:,} ({words})",
                        )
                    )
    return problems + _deeper_points(
        packet,
        beyond,
        lambda arm, length, where: (
            f"exceed the model's context length {length:,} ({where}), whatever arm {arm!r} was sized for"
        ),
    )


def _beyond_server(recipe: Recipe, arm: Arm) -> tuple[int, str] | None:
    """The model's context as `model_context` gives it, where the arm's server may hold more (none
    sized, or sized larger); None where the server's own bound is the tighter one. The recipe's
    context length is the least the model serves, so a server sized within it needs no parsing of
    its command for features."""
    server = server_context(arm)
    if server is not None and server[0] <= recipe.model.context_length:
        return None
    length, words = model_context(recipe, arm)
    return None if server is not None and server[0] <= length else (length, words)


def _ladder_users_problems(packet: Packet) -> list[Problem]:
    """A measured packet's ladders are this runner's: none of more than LADDER_MOST_USERS users
    (runner/plan.py refuses more, and gives a ladder's server that many sequences). More users
    would also divide the energy floor's steps among users no ladder of it served."""
    if packet.provenance.kind != "measured":
        return []
    levels: list[tuple[str, int | None]] = []
    for i, ladder in enumerate(packet.ladders):
        levels += [(f"ladders[{i}].concurrency[{k}].users", p.users) for k, p in enumerate(ladder.concurrency)]
        if ladder.load is not None:
            levels += [(f"ladders[{i}].load.levels[{k}].users", v.users) for k, v in enumerate(ladder.load.levels)]
    return [
        (where, f"is {users:,} users, but this runner's ladders end at {LADDER_MOST_USERS}")
        for where, users in levels
        if users is not None and users > LADDER_MOST_USERS
    ]


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


def concurrency_oracle_problems(packet: Packet, order: Sequence[str] | None = None) -> list[Problem]:
    """A concurrency level identical to the oracle holds the oracle's tokens. runner/ladders.py sends
    the suite's prompt i mod its prompt count to user i and calls the level identical only when every
    output's token ids equal the oracle row's for its prompt (the oracle: its campaign's depth-0 arm's
    first server's rows, runner/measure.py, which is what G3 names: `_oracle_of`); so an identical
    level's completion_tokens is the sum, over its users, of those rows' completion_tokens, and every
    prompt it sent has such a row. `order`: the suite's prompt ids (catalog/checks/cross_check.py
    passes them for a measured packet); None: the oracle rows' own order. A ladder whose arm has no
    oracle rows to compare with has nothing to check."""
    problems: list[Problem] = []
    for i, ladder in enumerate(packet.ladders):
        if not any(point.identical_to_oracle for point in ladder.concurrency):
            continue
        oracle = _oracle_of(packet, ladder.arm)
        if oracle is None or not oracle.servers or not oracle.servers[0].rows:
            continue
        rows = oracle.servers[0].rows
        lengths = {row.prompt_id: row.completion_tokens for row in rows}
        sent = list(order) if order is not None else [row.prompt_id for row in rows]
        if not sent:
            continue
        for k, point in enumerate(ladder.concurrency):
            if not point.identical_to_oracle:
                continue
            sends = [(p, times) for p, times in zip(sent, point.prompt_sends(len(sent)), strict=True) if times]
            where = f"ladders[{i}].concurrency[{k}]"
            users = f"{point.users:,} user" + ("s" if point.users != 1 else "")
            missing = sorted({p for p, _ in sends if p not in lengths})
            if missing:
                problems.append(
                    (
                        f"{where}.identical_to_oracle",
                        f"is true, but oracle arm {oracle.id!r}'s first server has no row for prompt"
                        f" {missing[0]!r}, which its {users} sent: nothing to be identical to",
                    )
                )
                continue
            expected = sum(times * lengths[p] for p, times in sends)
            if point.completion_tokens != expected:
                problems.append(
                    (
                        f"{where}.completion_tokens",
                        f"{point.completion_tokens:,} completion tokens identical to the oracle, but oracle arm"
                        f" {oracle.id!r}'s rows for the prompts its {users} sent (user i: prompt i mod"
                        f" {len(sent)}) hold {expected:,}: outputs identical to the oracle's have its lengths",
                    )
                )
    return problems


def _claimed(value: bool | int | str) -> str:
    """A claim as its packet writes it: true, 3, 'speculative'."""
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, str) else f"{value:,}"


def _unmeasured_identity_problems(packet: Packet) -> list[Problem]:
    """Only this project's runner compares a ladder's outputs with an oracle (runner/ladders.py,
    runner/load_sweep.py): an imported or screened packet's ladders were run by another client,
    whose outputs no one compared, and its importers (runner/import_bench.py,
    runner/import_load_sweep.py) record null. So every identity claim of such a packet is refused:
    identical_to_oracle and divergence of a concurrency point, identical_to_oracle of a context
    point, identical_to_oracle and first_divergence of a load request. A load level is one problem,
    at its first claim, with how many of its requests claim one (a level holds up to hundreds)."""
    kind = packet.provenance.kind
    if kind == "measured":
        return []
    never = (
        f"but {'an' if kind == 'imported' else 'a'} {kind} packet's outputs were never compared with an oracle:"
        " only this project's runner (a measured packet) compares them, and its importers record null"
    )
    problems: list[Problem] = []
    for i, ladder in enumerate(packet.ladders):
        points: list[tuple[str, bool | str | None]] = []
        for k, point in enumerate(ladder.concurrency):
            where = f"ladders[{i}].concurrency[{k}]"
            points += [
                (f"{where}.identical_to_oracle", point.identical_to_oracle),
                (f"{where}.divergence", point.divergence),
            ]
        points += [
            (f"ladders[{i}].context[{k}].identical_to_oracle", p.identical_to_oracle)
            for k, p in enumerate(ladder.context)
        ]
        problems += [(field, f"is {_claimed(value)}, {never}") for field, value in points if value is not None]
        for j, level in enumerate(ladder.load.levels if ladder.load is not None else []):
            requests: list[tuple[str, bool | int | None]] = []
            for k, r in enumerate(level.requests):
                where = f"ladders[{i}].load.levels[{j}].requests[{k}]"
                requests += [
                    (f"{where}.identical_to_oracle", r.identical_to_oracle),
                    (f"{where}.first_divergence", r.first_divergence),
                ]
            claims = [(field, value) for field, value in requests if value is not None]
            if not claims:
                continue
            claiming = sum(
                1 for r in level.requests if r.identical_to_oracle is not None or r.first_divergence is not None
            )
            field, value = claims[0]
            problems.append(
                (
                    field,
                    f"is {_claimed(value)}, {never} ({claiming} of the {len(level.requests)} requests at"
                    f" {level.label} claim a comparison)",
                )
            )
    return problems


def _context_oracle_problems(packet: Packet) -> list[Problem]:
    """A context point says what runner/ladders.py compared: only a speculative arm's output, with
    its oracle arm's output at the same depth and class (the oracle: the depth-0 arm its G3 names,
    `_oracle_of`, whose context ladder runs first and keeps its outputs). It records null for a
    depth-0 arm (the oracle itself, or a plain arm beside it), and null where the oracle has no
    output at that depth and class; so a speculative arm's true or false needs the oracle arm's
    context point at the same depth_tokens and content_class in the packet. An imported or screened
    packet claims no comparison at all (`_unmeasured_identity_problems`, one problem a claim)."""
    if packet.provenance.kind != "measured":
        return []
    depths = {arm.id: arm.config.spec_depth for arm in packet.arms}
    points: dict[str, set[tuple[int, str]]] = {}
    for ladder in packet.ladders:
        points.setdefault(ladder.arm, set()).update((p.depth_tokens, p.content_class) for p in ladder.context)
    problems: list[Problem] = []
    for i, ladder in enumerate(packet.ladders):
        oracle = _oracle_of(packet, ladder.arm)
        for k, point in enumerate(ladder.context):
            if point.identical_to_oracle is None:
                continue
            claim = str(point.identical_to_oracle).lower()
            if depths.get(ladder.arm) == 0:
                why = (
                    f" on depth-0 arm {ladder.arm!r}, whose context outputs are compared with no oracle's (the runner"
                    " records null)"
                )
            elif oracle is None or oracle.id == ladder.arm:
                why = (
                    f", but no G3 of arm {ladder.arm!r} names an oracle arm whose context output it was compared with"
                    " (the runner records null)"
                )
            elif (point.depth_tokens, point.content_class) not in points.get(oracle.id, set()):
                why = (
                    f", but oracle arm {oracle.id!r} has no context point at {point.depth_tokens:,} tokens of"
                    f" {point.content_class!r}: the runner compares with the oracle's output at the same depth and"
                    " class, and records null where there is none"
                )
            else:
                continue
            problems.append((f"ladders[{i}].context[{k}].identical_to_oracle", f"is {claim}{why}"))
    return problems


CONTEXT_CLASSES = ("prose", "code", "analysis")
"""The classes whose prompts runner/ladders.py fills a context ladder's depth with, where the suite
has them (`context_classes`)."""


def context_classes(suite: Suite) -> list[str]:
    """The classes a context ladder runs on the suite: its CONTEXT_CLASSES, else its first three
    (runner/ladders.py `_context_classes`, which builds each depth from that class's prompts)."""
    present = [c.id for c in suite.classes]
    chosen = [c for c in CONTEXT_CLASSES if c in present]
    return chosen or present[:3]


def context_class_problems(packet: Packet, suite: Suite) -> list[Problem]:
    """Every context point of a measured packet is of a class the runner fills context with from the
    suite's prompts (`context_classes`): another is context the suite never held. One per ladder."""
    if packet.provenance.kind != "measured":
        return []
    classes = context_classes(suite)
    problems: list[Problem] = []
    for i, ladder in enumerate(packet.ladders):
        for k, point in enumerate(ladder.context):
            if point.content_class not in classes:
                problems.append(
                    (
                        f"ladders[{i}].context[{k}].content_class",
                        f"is {point.content_class!r}, but a context ladder on suite {suite.id!r} fills its depth"
                        f" with the prompts of {', '.join(repr(c) for c in classes)}",
                    )
                )
                break  # one per ladder
    return problems
