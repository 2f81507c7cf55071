"""`make reproduce PACKET=<id>`: measure again what a packet describes, then compare side by side.

A reproduction is always a new campaign on fresh servers: its campaign id is salted with the
packet it reproduces and the time it started, so it never reuses an attempt of the original
campaign (or of an earlier reproduction). Each arm of the packet becomes one planned arm, with
the packet's arm id, tensor parallel size, depth and environment (two depth-3 arms that differ
by their draft head stay two arms). The new packet names the one it reproduces; what matches
(token arrays, gates) and how far the numbers moved is printed.

Each arm runs what it recorded: its `vllm serve` argv and environment, in the image it recorded,
pinned by that digest (or on this host's vLLM install when it ran on one). An arm that recorded no
command (an imported result) runs the closest command this catalog composes for it
(catalog/recipes/shown.py). Where that is not the stack the packet was measured on (the source's
image cannot be pulled, a composed command states another graph mode, switch or depth, this host's
vLLM install is another version or package set, another runtime) the reproduction refuses and says
what differs, unless asked to run anyway (ALLOW_DIFFERENT_STACK=1, `--allow-different-stack`): the
comparison is then labelled "different stack", here and on every page (catalog/checks/stack.py).

A packet that cannot be reproduced here says why before anything starts: a screened packet is
one `vllm bench serve` run, not a campaign; an imported result whose checkpoint is no variant of
the recipe has no command; hardware this host does not have cannot be measured on it.
`python -m runner reproduce --list` prints that verdict for every packet.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from catalog.checks.stack import DIFFERENT_STACK, stack_differences
from catalog.errors import UserError
from catalog.model.packet import Arm, Packet, RuntimeIdentity
from catalog.model.secrets import REDACTED
from catalog.numbers import fmt
from catalog.recipes.command_facts import command_facts
from catalog.recipes.compose import LaunchCommand
from catalog.recipes.recorded import disagreements, recorded_facts
from catalog.recipes.shown import composed_for_arm, unrunnable_image
from catalog.store.repository import Catalog
from runner.identity import local_runtime_identity
from runner.measure import Places, RuntimeChoice, measure
from runner.plan import (
    PROTOCOL_ARGS,
    STRICT_ARGS,
    ArmPlan,
    CampaignRequest,
    LoadSweepOptions,
    plan_arms,
    with_max_model_len,
)
from runner.progress import console_progress

DEFAULT_SUITE = "strict-v1"


class NotReproducible(UserError):
    """This packet names no campaign this host can run; the message says why."""


@dataclass(frozen=True)
class Reproduction:
    request: CampaignRequest
    arms: list[ArmPlan]
    notes: list[str]
    # what the planned campaign would run otherwise than the packet measured: empty, or (asked
    # for with allow_different_stack) a reproduction on a different stack
    different_stack: list[str]


def hardware_present(platform: str) -> bool:
    """A first look for the platform's devices (preflight checks them in full before a start):
    the CPU always; an Intel GPU's render nodes; NVIDIA's driver tool."""
    if platform == "cpu":
        return True
    if platform == "xpu":
        return any(Path("/dev/dri").glob("renderD*"))
    if platform == "cuda":
        return shutil.which("nvidia-smi") is not None
    return False


def plan_reproduction(
    packet: Packet,
    catalog: Catalog,
    started: datetime | None = None,
    *,
    docker: bool | None = None,
    local_runtime: RuntimeIdentity | None = None,
    allow_different_stack: bool = False,
) -> Reproduction:
    """The campaign that measures this packet's arms again, or NotReproducible saying why.
    `docker`: the runtime asked for (None: the packet's own); `local_runtime`: this host's vLLM
    install as probed, compared with the packet's when both are local."""
    model = packet.identity.model
    if packet.provenance.kind == "screened":
        raise NotReproducible(
            "is a screened `vllm bench serve` run, not a campaign of this runner: run the benchmark again instead",
            field="provenance.kind",
        )
    recipe = catalog.recipes.get(model.slug)
    if recipe is None:
        raise NotReproducible(
            f"names model {model.slug!r}, which has no recipe in data/models", field="identity.model.slug"
        )
    if model.variant is None:
        raise NotReproducible(
            f"names no recipe variant: its checkpoint {model.repo} is not a variant of data/models/{model.slug}.yaml, "
            "so there is no command to run (add the variant to make it reproducible)",
            field="identity.model.variant",
        )
    if model.variant not in recipe.variants:
        raise NotReproducible(
            f"names variant {model.variant!r}, which data/models/{model.slug}.yaml no longer lists",
            field="identity.model.variant",
        )
    hardware = catalog.hardware.get(packet.identity.host.hardware)
    if hardware is None:
        raise NotReproducible(
            f"names unknown hardware {packet.identity.host.hardware!r}", field="identity.host.hardware"
        )
    if not hardware_present(hardware.platform):
        raise NotReproducible(
            f"was measured on {hardware.name} ({hardware.platform}); this host has no {hardware.platform} device",
            field="identity.host.hardware",
        )
    notes = []
    suite = packet.workload.suite_id
    if suite not in catalog.suites:
        notes.append(f"its suite {suite!r} is not in data/suites: measured with {DEFAULT_SUITE}")
        suite = DEFAULT_SUITE
    moment = (started or datetime.now(UTC)).replace(microsecond=0)
    tps = sorted({arm.config.tensor_parallel_size for arm in packet.arms})
    request = CampaignRequest(
        model=model.slug,
        variant=model.variant,
        hardware=hardware.id,
        tp=max(tps),  # preflight checks that this many cards are there
        depths=sorted({arm.config.spec_depth for arm in packet.arms}),
        ladders=sorted({ladder.kind for ladder in packet.ladders}),
        suite=suite,
        max_tokens=packet.workload.max_tokens,
        seed=packet.workload.seed if packet.workload.seed is not None else 1234,
        salt=f"reproduces {packet.id} at {moment.isoformat()}",
        load=next(
            (LoadSweepOptions.of_sweep(ladder.load) for ladder in packet.ladders if ladder.load is not None), None
        ),
    )
    source = f"data/models/{model.slug}.yaml"
    image = _recorded_pullable_image(packet)
    arms: list[ArmPlan] = []
    for tp in tps:
        mine = [arm for arm in packet.arms if arm.config.tensor_parallel_size == tp]
        if not any(arm.config.spec_depth == 0 for arm in mine):
            oracle = plan_arms(request.model_copy(update={"tp": tp, "depths": [0]}), recipe, hardware, source)[0]
            arms.append(oracle)
            notes.append(f"no depth-0 arm at TP {tp}: its oracle {oracle.id} is measured too, for the gates")
        for arm in sorted(mine, key=lambda a: a.config.spec_depth > 0):  # the oracle first
            arms.append(_arm_plan(packet, arm, request.model_copy(update={"tp": tp}), catalog, image))
    different = _stack_differences(packet, arms, catalog, docker, local_runtime)
    if different and not allow_different_stack:
        raise NotReproducible(
            "would not run the stack it was measured on: "
            + "; ".join(different)
            + ". ALLOW_DIFFERENT_STACK=1 measures it anyway, and labels the comparison 'different stack'",
            field="identity.runtime",
        )
    return Reproduction(request, arms, notes, different)


def _recorded_pullable_image(packet: Packet) -> str | None:
    """The image the packet ran, pinned by its registry digest, when one can pull it again."""
    runtime = packet.identity.runtime
    if runtime.image_pinned:
        return runtime.image_pinned
    if runtime.image and runtime.image_digest and unrunnable_image(packet) is None:
        return f"{runtime.image.split('@', 1)[0].rsplit(':', 1)[0]}@{runtime.image_digest}"
    return None


def _arm_plan(packet: Packet, arm: Arm, request: CampaignRequest, catalog: Catalog, image: str | None) -> ArmPlan:
    """The arm as it ran: its recorded vllm serve argv and environment, in its recorded image; an
    arm that recorded none (imported) runs the closest command composed for it, with the protocol's
    fixed flags, as `make measure` would."""
    recipe = catalog.recipes[request.model]
    hardware = catalog.hardware[request.hardware or ""]
    config = arm.config
    # a credential was recorded redacted and comes from this host's environment, as it did there
    env = {k: v for k, v in config.env.items() if v != REDACTED}
    if config.argv and len(config.argv) >= 3 and config.argv[1] == "serve":
        docker_image = image or _recipe_image(request, catalog)
        command = LaunchCommand(config.argv[2], list(config.argv[3:]), env, docker_image, hardware.platform)
        source = config.max_model_len_source
    else:
        composed, _ = composed_for_arm(recipe, packet, arm, hardware)
        protocol = [*PROTOCOL_ARGS, *STRICT_ARGS, "--seed", str(request.seed)]
        composed = LaunchCommand(
            composed.model_id, [*composed.args, *protocol], composed.env, composed.docker_image, composed.platform
        )
        command, source = with_max_model_len(composed, recipe.model.context_length)
    # The arm's draft head ("draft INT4 head") is recorded in the new packet as in the old one.
    return ArmPlan(arm.id, config.spec_depth, config.spec_method, command, source, config.draft_head)


def _recipe_image(request: CampaignRequest, catalog: Catalog) -> str | None:
    """The image the recipe names for the request's card (a packet measured locally has none)."""
    oracle = request.model_copy(update={"depths": [0], "configuration": None})
    recipe, hardware = catalog.recipes[request.model], catalog.hardware[request.hardware or ""]
    return plan_arms(oracle, recipe, hardware, "recipe")[0].command.docker_image


def _stack_differences(
    packet: Packet,
    arms: list[ArmPlan],
    catalog: Catalog,
    docker: bool | None,
    local_runtime: RuntimeIdentity | None,
) -> list[str]:
    """What the planned campaign would run otherwise than the packet measured."""
    found: list[str] = []
    runtime = packet.identity.runtime
    recorded_docker = runtime.image is not None or runtime.image_pinned is not None
    unpullable = unrunnable_image(packet)
    if unpullable is not None:
        found.append(
            f"it ran {runtime.label}, an image no registry serves by digest ({unpullable}): it cannot be pulled"
        )
    if docker is not None and docker != recorded_docker:
        ran = f"the image {runtime.image_pinned or runtime.image}" if recorded_docker else "a local vLLM install"
        instead = "RUNTIME=docker runs an image" if docker else "RUNTIME=local runs this host's vLLM install"
        found.append(f"it ran {ran}; {instead}")
    elif not recorded_docker and local_runtime is not None:
        if local_runtime.version != runtime.version:
            found.append(f"it ran vLLM {runtime.version}; this host's install is vLLM {local_runtime.version}")
        elif (
            runtime.package_set_sha256
            and local_runtime.package_set_sha256
            and runtime.package_set_sha256 != local_runtime.package_set_sha256
        ):
            found.append("this host's vLLM environment holds another set of packages (package_set_sha256)")
    by_id = {arm.id: arm for arm in packet.arms}
    for plan in arms:
        arm = by_id.get(plan.id)
        if arm is None:
            continue
        docker_argv = plan.command.docker_argv() if recorded_docker else None
        shown = command_facts(docker_argv or plan.command.argv(), None if docker_argv else plan.command.env)
        for difference in disagreements(shown, recorded_facts(packet, arm), graph_label=arm.config.graph_capture):
            if difference.field == "image" and (unpullable is not None or plan.command.docker_image is None):
                continue  # said once above, or a local install runs no image
            found.append(f"arm {arm.id}: {difference.field}: {difference.words('the planned command')}")
    return found


def same_tokens(before: Arm, after: Arm) -> tuple[int, int]:
    """Prompts whose token arrays are identical on the first server of each campaign."""
    if not before.servers or not after.servers:
        return 0, 0
    old = {row.prompt_id: row.token_ids for row in before.servers[0].rows}
    new = {row.prompt_id: row.token_ids for row in after.servers[0].rows}
    return sum(old.get(pid) == ids for pid, ids in new.items()), len(old)


def comparison(before: Packet, after: Packet) -> Table:
    """Arm by arm, before and after; on a different stack the title says so and what differs."""
    different = stack_differences(before, after)
    title = f"{after.id} reproduces {before.id}"
    if different:
        title += f" on a {DIFFERENT_STACK} ({'; '.join(different)}): the figures compare two stacks"
    table = Table(title=title)
    for column in ("arm", "tokens identical", "gates before", "gates after", "tok/s before", "tok/s after", "moved"):
        table.add_column(column)
    by_id = {arm.id: arm for arm in after.arms}
    for arm in before.arms:
        new = by_id.get(arm.id)
        if new is None:
            table.add_row(arm.id, "not re-run", "", "", "", "", "")
            continue
        same, total = same_tokens(arm, new)
        old_rate, new_rate = arm.decode_tok_s, new.decode_tok_s
        moved = f"{(new_rate / old_rate - 1) * 100:+.1f} %" if old_rate and new_rate else "n/a"
        table.add_row(
            arm.id,
            f"{same}/{total}" if total else "no rows before",
            ", ".join(g.summary for g in arm.gates) or "none",
            ", ".join(g.summary for g in new.gates) or "none",
            fmt(old_rate) if old_rate else "n/a",
            fmt(new_rate) if new_rate else "n/a",
            moved,
        )
    return table


def reproducibility(catalog: Catalog) -> Table:
    """Every packet: reproducible here (with how many arms), or why not."""
    table = Table(title="Reproducible on this host")
    for column in ("packet", "reproducible here", "why not / arms"):
        table.add_column(column)
    for packet_id, packet in sorted(catalog.packets.items()):
        try:
            plan = plan_reproduction(packet, catalog)
        except UserError as error:
            table.add_row(packet_id, "no", error.message)
            continue
        table.add_row(packet_id, "yes", ", ".join(arm.id for arm in plan.arms))
    return table


def reproduce(
    catalog: Catalog, packet_id: str, choice: RuntimeChoice, places: Places, *, allow_different_stack: bool = False
) -> int:
    original = catalog.packets.get(packet_id)
    if original is None:
        raise UserError(f"no packet {packet_id!r} in {places.packets}", field="PACKET")
    try:
        plan = plan_reproduction(
            original,
            catalog,
            docker=choice.docker,
            local_runtime=_local_install(original, choice),
            allow_different_stack=allow_different_stack,
        )
    except UserError as error:
        raise NotReproducible(
            f"cannot be reproduced here: {error.message}", file=catalog.packet_paths.get(packet_id), field=error.field
        ) from None
    with console_progress() as progress:
        for note in plan.notes:
            progress(f"reproducing {original.id}: {note}")
        for difference in plan.different_stack:
            progress(f"reproducing {original.id} on a {DIFFERENT_STACK} (ALLOW_DIFFERENT_STACK=1): {difference}")
        fresh = measure(catalog, plan.request, choice, places, progress, reproduces=original.id, planned=plan.arms)
    Console().print(comparison(original, fresh))
    return 0


def _local_install(packet: Packet, choice: RuntimeChoice) -> RuntimeIdentity | None:
    """This host's vLLM install, when the packet ran on one and this run uses one too; None when it
    cannot be read (preflight then says why, naming VLLM_PYTHON)."""
    runtime = packet.identity.runtime
    if choice.docker or runtime.image is not None or choice.vllm_python is None or not choice.vllm_python.exists():
        return None
    try:
        identity, _facts = local_runtime_identity(choice.vllm_python, runtime.platform)
    except (OSError, RuntimeError, ValueError):
        return None
    return identity
