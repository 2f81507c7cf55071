"""`make reproduce PACKET=<id>`: measure again what a packet describes, then compare side by side.

A reproduction is always a new campaign on fresh servers: its campaign id is salted with the
packet it reproduces and the time it started, so it never reuses an attempt of the original
campaign (or of an earlier reproduction). Each arm of the packet becomes one planned arm, with
the packet's arm id, tensor parallel size, depth and environment (two depth-3 arms that differ
by their draft head stay two arms). The new packet names the one it reproduces; what matches
(token arrays, gates) and how far the numbers moved is printed.

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

from catalog.errors import UserError
from catalog.model.packet import Arm, Packet
from catalog.model.secrets import REDACTED
from catalog.numbers import fmt
from catalog.recipes.compose import LaunchCommand
from catalog.store.repository import Catalog
from runner.measure import Places, RuntimeChoice, measure
from runner.plan import ArmPlan, CampaignRequest, LoadSweepOptions, plan_arms
from runner.progress import console_progress

DEFAULT_SUITE = "strict-v1"


class NotReproducible(UserError):
    """This packet names no campaign this host can run; the message says why."""


@dataclass(frozen=True)
class Reproduction:
    request: CampaignRequest
    arms: list[ArmPlan]
    notes: list[str]


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


def plan_reproduction(packet: Packet, catalog: Catalog, started: datetime | None = None) -> Reproduction:
    """The campaign that measures this packet's arms again, or NotReproducible saying why."""
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
    arms: list[ArmPlan] = []
    for tp in tps:
        mine = [arm for arm in packet.arms if arm.config.tensor_parallel_size == tp]
        if not any(arm.config.spec_depth == 0 for arm in mine):
            oracle = plan_arms(request.model_copy(update={"tp": tp, "depths": [0]}), recipe, hardware, source)[0]
            arms.append(oracle)
            notes.append(f"no depth-0 arm at TP {tp}: its oracle {oracle.id} is measured too, for the gates")
        for arm in sorted(mine, key=lambda a: a.config.spec_depth > 0):  # the oracle first
            arms.append(_arm_plan(arm, request.model_copy(update={"tp": tp}), catalog, source))
    return Reproduction(request, arms, notes)


def _arm_plan(arm: Arm, request: CampaignRequest, catalog: Catalog, source: str) -> ArmPlan:
    recipe = catalog.recipes[request.model]
    hardware = catalog.hardware[request.hardware or ""]
    depth = arm.config.spec_depth
    try:
        planned = plan_arms(request.model_copy(update={"depths": [depth]}), recipe, hardware, source)
    except UserError as error:
        raise NotReproducible(f"arm {arm.id}: {error.message}", field="arms") from None
    base = next(p for p in planned if p.spec_depth == depth)
    if arm.config.spec_method is not None and base.spec_method != arm.config.spec_method:
        raise NotReproducible(
            f"arm {arm.id} used {arm.config.spec_method} speculative decoding; the recipe's is {base.spec_method}",
            field="arms",
        )
    # The arm's own switches (a draft head's VLLM_XPU_DRAFT_LM_HEAD_INT4=1...): a credential
    # was recorded redacted and comes from this host's environment, as it did there.
    env = {**base.command.env, **{k: v for k, v in arm.config.env.items() if v != REDACTED}}
    command = LaunchCommand(
        base.command.model_id, base.command.args, env, base.command.docker_image, base.command.platform
    )
    # The arm's draft head ("draft INT4 head") is recorded in the new packet as in the old one.
    return ArmPlan(arm.id, depth, base.spec_method, command, base.max_model_len_source, arm.config.draft_head)


def same_tokens(before: Arm, after: Arm) -> tuple[int, int]:
    """Prompts whose token arrays are identical on the first server of each campaign."""
    if not before.servers or not after.servers:
        return 0, 0
    old = {row.prompt_id: row.token_ids for row in before.servers[0].rows}
    new = {row.prompt_id: row.token_ids for row in after.servers[0].rows}
    return sum(old.get(pid) == ids for pid, ids in new.items()), len(old)


def comparison(before: Packet, after: Packet) -> Table:
    table = Table(title=f"{after.id} reproduces {before.id}")
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


def reproduce(catalog: Catalog, packet_id: str, choice: RuntimeChoice, places: Places) -> int:
    original = catalog.packets.get(packet_id)
    if original is None:
        raise UserError(f"no packet {packet_id!r} in {places.packets}", field="PACKET")
    try:
        plan = plan_reproduction(original, catalog)
    except UserError as error:
        raise NotReproducible(
            f"cannot be reproduced here: {error.message}", file=catalog.packet_paths.get(packet_id), field=error.field
        ) from None
    with console_progress() as progress:
        for note in plan.notes:
            progress(f"reproducing {original.id}: {note}")
        fresh = measure(catalog, plan.request, choice, places, progress, reproduces=original.id, planned=plan.arms)
    Console().print(comparison(original, fresh))
    return 0
