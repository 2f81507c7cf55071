"""A campaign: every arm on two (or more) fresh servers, the gates, then one sealed packet.

The packet is written only when every attempt finished; a failed campaign leaves its attempts
and logs under runs/<campaign>/ and nothing in packets/.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from catalog.errors import UserError
from catalog.model.energy import EnergySetup
from catalog.model.metrics import compare_rows
from catalog.model.packet import (
    ArmConfig,
    ArmParts,
    CampaignRef,
    GateResult,
    Identity,
    Ladder,
    PacketParts,
    Provenance,
    ServerRun,
    Workload,
)
from catalog.packets.seal import Sealed, seal, write_packet
from catalog.packets.signing import HostKey
from catalog.recipes.command_facts import KV_CACHE_DTYPE_FLAG, command_facts, option_value
from catalog.recipes.recorded import graph_capture_words
from runner.attempt import arm_cards, finished_attempt, run_attempt
from runner.energy.packet import judged
from runner.identity import scrub_argv, scrub_env
from runner.plan import ArmPlan, CampaignRequest
from runner.runtime import PORT_PLACEHOLDER, Runtime
from runner.settings import MeasurementSettings, Progress

SERVER_LABELS = "ABCD"


@dataclass(frozen=True)
class CampaignSetup:
    request: CampaignRequest
    arms: list[ArmPlan]
    settings: MeasurementSettings
    run_dir: Path
    identity: Identity
    title: str
    campaign: CampaignRef | None = None  # the fleet campaign cell this measures (runner/fleet)


class CampaignFailed(UserError):
    """An attempt failed: nothing is promoted; the logs say why."""


def measure_arms(setup: CampaignSetup, runtime: Any, progress: Progress) -> dict[str, list[ServerRun]]:
    results: dict[str, list[ServerRun]] = {}
    labels = SERVER_LABELS[: setup.request.servers_per_arm]
    for arm in setup.arms:
        runs = []
        for label in labels:
            done = finished_attempt(setup.run_dir, arm.id, label, progress)
            if done is not None:
                progress(f"{arm.id} server {label}: finished earlier, reusing {done.decode_tok_s or 0:.1f} tok/s")
                runs.append(done)
                continue
            try:
                runs.append(run_attempt(arm, label, runtime, setup.settings, setup.run_dir, progress))
            except Exception as error:
                raise CampaignFailed(
                    f"{arm.id} server {label} failed, no packet written: {str(error).splitlines()[0]}",
                    file=setup.run_dir / arm.id / f"server-{label}.log",
                ) from error
        results[arm.id] = runs
    return results


def arm_tp(arm: ArmPlan) -> int:
    """The arm's tensor parallel size, as its command says (compose writes the flag above 1;
    a reproduction plans arms of several sizes in one campaign)."""
    return arm_cards(arm)


def oracle_of(arm: ArmPlan, arms: list[ArmPlan]) -> ArmPlan:
    """The depth-0 arm of the same tensor parallel size: G3 compares like with like."""
    tp = arm_tp(arm)
    return next((a for a in arms if a.spec_depth == 0 and arm_tp(a) == tp), arms[0])


def gates_for(arm: ArmPlan, runs: list[ServerRun], oracle: ArmPlan, oracle_runs: list[ServerRun]) -> list[GateResult]:
    """G1 for the oracle (its servers agree); G2 and per-server G3 for a speculative arm.

    Servers A and B are compared by one unlabelled G1 (G2), as every packet has recorded them; each
    further server (C, D: `servers_per_arm` above 2) by a G1 (G2) of its own, naming it, against
    server A, so no server's rows (and rate, which the arm's figure averages) go ungated."""
    kind = "G1" if arm.spec_depth == 0 else "G2"
    gates = [compare_rows(kind, "the arm's second fresh server", runs[0].rows, runs[1].rows, cause="repeat")]
    gates += [
        compare_rows(kind, "the arm's first fresh server", run.rows, runs[0].rows, server=run.label, cause="repeat")
        for run in runs[2:]
    ]
    if arm.spec_depth == 0:
        return gates
    gates += [
        compare_rows("G3", oracle.id, run.rows, oracle_runs[0].rows, server=run.label, cause="speculative")
        for run in runs
    ]
    return gates


def arm_parts(
    arm: ArmPlan,
    runs: list[ServerRun],
    gates: list[GateResult],
    request: CampaignRequest,
    runtime: Runtime | None = None,
) -> ArmParts:
    launch: list[str] = []
    passed: list[str] = []
    entrypoint = None
    if runtime is not None:
        # The command the servers ran, as server A ran it; each server has its own free port.
        launch = scrub_argv(runtime.argv(arm.command, PORT_PLACEHOLDER, attempt=f"{arm.id}-A"))
        passed = runtime.passed_env(dict(os.environ))
        entrypoint = runtime.entrypoint_name
    return ArmParts(
        id=arm.id,
        label=_label(arm, request),
        config=ArmConfig(
            tensor_parallel_size=arm_tp(arm),
            spec_method=arm.spec_method,
            spec_depth=arm.spec_depth,
            draft_head=arm.draft_head,
            graph_capture=graph_capture_words(arm.command.argv()),
            kv_cache_dtype=option_value(arm.command.argv(), KV_CACHE_DTYPE_FLAG),  # None: none set, vLLM's "auto"
            max_model_len=command_facts(arm.command.argv()).max_model_len,  # 8k as vLLM reads it: 8,000
            argv=scrub_argv(arm.command.argv()),
            env=scrub_env(arm.command.env),
            max_model_len_source=arm.max_model_len_source,
            launch_argv=launch,
            passed_env=passed,
            entrypoint=entrypoint,
        ),
        servers=runs,
        gates=gates,
    )


def _label(arm: ArmPlan, request: CampaignRequest) -> str:
    tp = arm_tp(arm)
    cards = "1 card" if tp == 1 else f"{tp} cards"
    if arm.spec_depth == 0:
        return f"{cards}, no speculative decoding (oracle)"
    return f"{cards}, {arm.spec_method} speculative decoding, depth {arm.spec_depth}"


def judge_gates(arms: list[ArmPlan], results: dict[str, list[ServerRun]]) -> dict[str, list[GateResult]]:
    """Each arm's gates, by arm id: its servers against each other, a speculative arm's against its oracle."""
    gates = {}
    for arm in arms:
        oracle = oracle_of(arm, arms)
        gates[arm.id] = gates_for(arm, results[arm.id], oracle, results[oracle.id])
    return gates


def assemble(
    setup: CampaignSetup,
    results: dict[str, list[ServerRun]],
    gates: dict[str, list[GateResult]],
    ladders: list[Ladder],
    reproduces: str | None,
    key: HostKey | None,
    runtime: Runtime | None = None,
) -> Sealed:
    arms = [arm_parts(arm, results[arm.id], gates[arm.id], setup.request, runtime) for arm in setup.arms]
    energy: EnergySetup | None = None
    if setup.settings.energy is not None:
        energy = setup.settings.energy.setup()
        arms, ladders = judged(arms, ladders, energy)
    parts = PacketParts(
        title=setup.title,
        created=datetime.now(UTC).replace(microsecond=0),
        provenance=Provenance(kind="measured", tool="runner (this repository)"),
        identity=setup.identity,
        workload=Workload(
            suite_id=setup.settings.suite.id,
            suite_sha256=setup.settings.suite.sha256,
            canary_set_id=setup.settings.canaries.id,
            canary_set_sha256=setup.settings.canaries.sha256,
            max_tokens=setup.settings.max_tokens,
            temperature=0.0,
            top_p=1.0,
            seed=setup.settings.seed,
        ),
        arms=arms,
        ladders=ladders,
        reproduces=reproduces,
        campaign=setup.campaign,
        energy=energy,
    )
    return seal(parts, key)


def publish(sealed: Sealed, packets_dir: Path) -> Path:
    return write_packet(sealed, packets_dir)
