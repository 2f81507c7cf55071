"""`make measure`: preflight, plan, two fresh servers per arm, gates, ladders, one sealed packet."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from catalog.errors import UserError
from catalog.model.packet import (
    CampaignRef,
    GateResult,
    Identity,
    Ladder,
    ModelIdentity,
    Packet,
    RuntimeIdentity,
    ServerRun,
)
from catalog.packets.signing import HostKey, host_key
from catalog.recipes.command_facts import command_facts
from catalog.recipes.compose import LaunchCommand, merge_args
from catalog.recipes.docker_run import PASSED_ENV
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe
from catalog.recipes.suite import CanarySet, Suite
from catalog.store.repository import Catalog
from runner import docker, preflight
from runner.campaign import CampaignSetup, arm_tp, assemble, judge_gates, measure_arms, publish
from runner.cards import CardSelection
from runner.docker import PinnedImage
from runner.energy.meter import CardAddress, Meter, energy_meter
from runner.identity import config_facts, host_identity, local_runtime_identity, model_files, weight_bytes
from runner.ladders import ConcurrencyOutputs, concurrency_outputs_path, load_concurrency_outputs, run_ladders
from runner.plan import (
    LOAD_RATE_FRACTIONS,
    ArmPlan,
    CampaignRequest,
    LoadSweepOptions,
    campaign_id,
    flag_value,
    plan_arms,
)
from runner.runtime import DockerRuntime, LocalRuntime, Runtime
from runner.runtime_probe import RuntimeFacts
from runner.settings import MeasurementSettings, Progress

DEMO_SLUG = "demo"
DEMO_HARDWARE = "cpu_generic"
DEMO_NOTE = "random weights generated locally by runner/demo_model.py; its speed says nothing about real models"
REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Places:
    data: Path
    packets: Path
    runs: Path
    models: Path


@dataclass(frozen=True)
class RuntimeChoice:
    vllm_python: Path | None
    docker: bool = False
    model_dir: Path | None = None
    health_deadline_s: float = 900.0


@dataclass(frozen=True)
class Checked:
    """What preflight found: the card, the weights the servers will load and where they are."""

    devices: preflight.DeviceReport
    model_id: str
    model_dir: Path | None
    snapshot: preflight.HubSnapshot | None
    image: str | None
    cards: CardSelection | None = None  # the cards checked: the ones every server is given

    @property
    def offline(self) -> bool:
        """The weights were found on this machine: servers load them and never reach the hub."""
        return self.model_dir is not None or self.snapshot is not None

    @property
    def weights_dir(self) -> Path | None:
        return self.model_dir or (self.snapshot.folder if self.snapshot else None)


def measure(
    catalog: Catalog,
    request: CampaignRequest,
    choice: RuntimeChoice,
    places: Places,
    progress: Progress,
    reproduces: str | None = None,
    planned: list[ArmPlan] | None = None,
    campaign: CampaignRef | None = None,
) -> Packet:
    """The protocol's steps in order. `planned`: the arms to measure, when the caller planned them
    (a reproduction plans one per arm of the packet it reproduces); otherwise one per requested depth.
    `campaign`: the fleet campaign cell this measures (runner/fleet), recorded in the packet."""
    recipe, hardware, suite, canaries, recipe_path = resolve(catalog, request, places.data)
    arms = planned or plan_arms(request, recipe, hardware, str(recipe_path))
    checked = run_preflight(recipe, hardware, request, arms, choice, places, progress)
    if checked.snapshot is not None:
        arms = [with_revision(arm, checked.snapshot.revision) for arm in arms]
    pinned, runtime_identity, facts = pin_runtime(recipe, hardware, request, checked, choice, progress)
    unchecked = preflight.check_env_known(
        {arm.id: arm.command.env for arm in arms}, facts, f"vLLM {runtime_identity.version}", config_facts_of(checked)
    )
    if unchecked:
        progress(
            f"cannot read which variables this vLLM knows: {', '.join(unchecked)} will be checked in each server's log"
        )
    key = signing_key(catalog, progress)
    cid = campaign_id(request, arms, suite.sha256, _runtime_key(runtime_identity))
    runtime = _runtime(choice, checked, pinned, cid, facts)
    for arm in arms:
        progress(f"{arm.id}: {arm.command.redacted().shell()}")
    run_dir = places.runs / cid
    progress(f"campaign {cid}: logs and finished attempts in {run_dir}")
    meter = campaign_meter(hardware, checked, arms, progress)
    settings = MeasurementSettings(
        suite, canaries, request.max_tokens, request.seed, choice.health_deadline_s, energy=meter
    )
    identity = campaign_identity(recipe, hardware, request, checked, runtime_identity, progress)
    title = _title(recipe.meta.title, request, hardware.name)
    setup = CampaignSetup(request, arms, settings, run_dir, identity, title, campaign)
    try:
        with meter:
            meter.take_idle_baseline()  # before the first server starts
            results = measure_arms(setup, runtime, progress)  # the oracle and every speculative arm, fresh servers each
            ladders = run_campaign_ladders(setup, recipe, results, runtime, progress)
    except KeyboardInterrupt:
        progress(f"interrupted: no packet written; finished attempts and server logs stay in {run_dir}")
        raise
    gates = judge_gates(setup.arms, results)
    return seal_and_write(setup, results, gates, ladders, reproduces, key, runtime, places.packets, progress)


def campaign_meter(hardware: Hardware, checked: Checked, arms: list[ArmPlan], progress: Progress) -> Meter:
    """The energy meter of every card the campaign's largest arm uses (runner/energy/): a CPU
    host or a MIG slice has none, and its packet says so."""
    cards = max(arm_tp(arm) for arm in arms)
    used = [CardAddress.of(d) for d in checked.devices.devices[:cards]]
    return energy_meter(hardware.platform, used, progress)


def run_preflight(
    recipe: Recipe,
    hardware: Hardware,
    request: CampaignRequest,
    arms: list[ArmPlan],
    choice: RuntimeChoice,
    places: Places,
    progress: Progress,
) -> Checked:
    """Before anything starts: the runtime, the cards, the weights and the TP size, and no container
    holding a card; says what is wrong (docs/measuring.md lists every message)."""
    image = arms[0].command.docker_image if choice.docker else None
    if choice.docker and image is None:
        raise UserError(
            f"RUNTIME=docker, but neither the recipe nor {hardware.id} names a docker image: "
            "use RUNTIME=local (VLLM_PYTHON=...) or add the image to data/hardware.yaml",
            field="RUNTIME",
        )
    devices = preflight.check(recipe, request.variant, hardware, request.tp, choice.vllm_python, image)
    model_dir = choice.model_dir
    if request.model == DEMO_SLUG and model_dir is None:
        model_dir = ensure_demo_model(choice.vllm_python, places.models / DEMO_SLUG, progress)
    model_id = arms[0].command.model_id
    preflight.check_weights(model_id, model_dir)
    snapshot = preflight.hub_snapshot(model_id) if model_dir is None else None
    cards = preflight.card_selection(devices, request.tp, container=image is not None)
    checked = Checked(devices, model_id, model_dir, snapshot, image, cards)
    weights_dir = checked.weights_dir
    preflight.check_tensor_parallel(request.tp, preflight.read_config(weights_dir), str(weights_dir or model_id))
    if image:
        swept = docker.sweep()
        if swept:
            progress(f"removed {len(swept)} container(s) an earlier run left behind: {', '.join(swept)}")
    if image or (hardware.platform != "cpu" and shutil.which("docker") is not None):
        _refuse_held_cards(image)
    return checked


def _refuse_held_cards(image: str | None) -> None:
    """A container given the card holds it whatever runtime this campaign uses."""
    try:
        holders = docker.containers_holding_devices()
    except docker.DockerError:
        if image:
            raise
        holders = []  # a local run does not need the docker daemon to be up
    if holders:
        raise UserError(
            f"container(s) {', '.join(holders)} hold a GPU: stop them (`docker stop NAME`) before measuring",
            field="HW",
        )


def pin_runtime(
    recipe: Recipe,
    hardware: Hardware,
    request: CampaignRequest,
    checked: Checked,
    choice: RuntimeChoice,
    progress: Progress,
) -> tuple[PinnedImage | None, RuntimeIdentity, RuntimeFacts]:
    """The image pinned by digest (docker) or the local vLLM, identified, and new enough for the
    recipe; and what the install holds (runner/runtime_probe.py)."""
    pinned: PinnedImage | None = None
    if checked.image:
        progress(f"pulling {checked.image} to pin it by digest")
        pinned = docker.pin_image(checked.image)
        progress(f"image {pinned.pinned} (vLLM {pinned.vllm_version})")
        runtime_identity = _docker_identity(pinned, hardware.platform)
        facts = pinned.facts or RuntimeFacts(version=pinned.vllm_version)
    else:
        runtime_identity, facts = local_runtime_identity(choice.vllm_python or Path("python"), hardware.platform)
    preflight.check_vllm_version(recipe, request.variant, runtime_identity.version)
    return pinned, runtime_identity, facts


def _runtime_key(runtime_identity: RuntimeIdentity) -> str:
    """What of the runtime enters the campaign id: a different image or package set is a new campaign."""
    return (
        f"{runtime_identity.image_digest or ''} {runtime_identity.version} {runtime_identity.package_set_sha256 or ''}"
    )


def _runtime(
    choice: RuntimeChoice, checked: Checked, pinned: PinnedImage | None, cid: str, facts: RuntimeFacts
) -> Runtime:
    """The runtime every server of the campaign starts from: the cards preflight checked, the
    weights it found (offline), and for a local install the entrypoint it can run."""
    environ = tuple(name for name in PASSED_ENV if name in os.environ)
    if pinned:
        hub = preflight.hub_cache_root()
        return DockerRuntime(hub, cid, pinned.pinned, checked.model_dir, environ, checked.cards, checked.offline)
    python = choice.vllm_python or Path("python")
    return LocalRuntime(python, checked.model_dir, facts.entrypoint, checked.cards, checked.offline)


def with_revision(arm: ArmPlan, revision: str) -> ArmPlan:
    """Serve the commit preflight hashed (`--revision`, and `--tokenizer-revision` for the
    tokenizer from the same repository): vLLM would otherwise resolve `main` on its own."""
    args = [*arm.command.args, "--revision", revision]
    if flag_value(arm.command.args, "--tokenizer") is None:
        args += ["--tokenizer-revision", revision]
    command = arm.command
    return replace(
        arm,
        command=LaunchCommand(command.model_id, merge_args(args), command.env, command.docker_image, command.platform),
    )


def config_facts_of(checked: Checked) -> dict[str, object] | None:
    return preflight.read_config(checked.weights_dir)


def campaign_identity(
    recipe: Recipe,
    hardware: Hardware,
    request: CampaignRequest,
    checked: Checked,
    runtime_identity: RuntimeIdentity,
    progress: Progress,
) -> Identity:
    """What is measured: the weights (hashed), the runtime and the host."""
    weights_dir = checked.weights_dir
    if weights_dir is not None and (checked.model_dir is not None or checked.snapshot is not None):
        progress(f"hashing the weights in {weights_dir}")
    files = model_files(weights_dir) if weights_dir else []
    variant = recipe.variants[request.variant]
    demo = request.model == DEMO_SLUG
    return Identity(
        model=ModelIdentity(
            slug=recipe.meta.slug,
            variant=request.variant,
            repo=checked.model_id,
            revision=checked.snapshot.revision if checked.snapshot else None,
            quantization=variant.precision.lower(),
            quantization_label=variant.precision.upper(),
            weight_bytes=weight_bytes(files) or None,
            weight_files=files,
            config=config_facts(weights_dir) if weights_dir else None,
            synthetic=demo,
            synthetic_note=DEMO_NOTE if demo else None,
        ),
        runtime=runtime_identity,
        host=host_identity(hardware.id, max(request.tp, 1), checked.devices.name, checked.devices.driver),
    )


def run_campaign_ladders(
    setup: CampaignSetup, recipe: Recipe, results: dict[str, list[ServerRun]], runtime: Runtime, progress: Progress
) -> list[Ladder]:
    """The requested ladders of every arm, each on one more fresh server; the oracle's context
    outputs are what the speculative arms' context ladders are compared with."""
    request, arms = setup.request, setup.arms
    if not request.ladders:
        return []
    ladders: list[Ladder] = []
    # as vLLM reads the command (8k, --max-model-len=8192, an abbreviation); none, auto or -1: the model's own
    max_model_len = command_facts(arms[0].command.argv()).max_model_len or recipe.model.context_length
    oracle_context: dict[tuple[int, str], list[int]] = {}
    oracle_concurrency: ConcurrencyOutputs = {}
    for arm in arms:
        arm_ladders, outputs = run_ladders(
            request.ladders,
            arm,
            results[arms[0].id][0].rows,
            oracle_context,
            runtime,
            setup.settings,
            setup.run_dir,
            max_model_len,
            progress,
            request.concurrency_levels,
            request.load,
            oracle_concurrency,
            [s.decode_tok_s for s in results[arm.id] if s.decode_tok_s is not None],
        )
        if arm.spec_depth == 0:
            oracle_context = outputs
            oracle_concurrency = load_concurrency_outputs(concurrency_outputs_path(setup.run_dir, arm.id))
        ladders.extend(arm_ladders)
    return ladders


def seal_and_write(
    setup: CampaignSetup,
    results: dict[str, list[ServerRun]],
    gates: dict[str, list[GateResult]],
    ladders: list[Ladder],
    reproduces: str | None,
    key: HostKey,
    runtime: Runtime,
    packets: Path,
    progress: Progress,
) -> Packet:
    """One packet, sealed and signed, written only now that every attempt finished."""
    sealed = assemble(setup, results, gates, ladders, reproduces, key, runtime)
    path = publish(sealed, packets)
    packet = sealed.packet
    progress(f"sealed {packet.id} ({packet.state.value}), signed by key {key.key_id[:12]} -> {path}")
    return packet


def resolve(catalog: Catalog, request: CampaignRequest, data: Path) -> tuple[Recipe, Hardware, Suite, CanarySet, Path]:
    """The recipe, card, suite and canaries a request names, or an error naming the option."""
    recipe_path = data / "models" / f"{request.model}.yaml"
    recipe = catalog.recipes.get(request.model)
    if recipe is None:
        raise UserError(f"no recipe {recipe_path} (models: {', '.join(sorted(catalog.recipes))})", field="MODEL")
    hardware_id = request.hardware or (DEMO_HARDWARE if request.model == DEMO_SLUG else None)
    if hardware_id is None:
        raise UserError(
            f"name the hardware, e.g. HW=arc_pro_b70 (known: {', '.join(sorted(catalog.hardware))})", field="HW"
        )
    hardware = catalog.hardware.get(hardware_id)
    if hardware is None:
        raise UserError(f"unknown hardware {hardware_id!r} (known: {', '.join(sorted(catalog.hardware))})", field="HW")
    if request.variant not in recipe.variants:
        raise UserError(
            f"unknown variant {request.variant!r} (choose from {', '.join(recipe.variants)})", field="VARIANT"
        )
    suite = catalog.suites.get(request.suite)
    canaries = catalog.canary_sets.get(request.canaries)
    if suite is None or canaries is None:
        raise UserError(
            f"suite {request.suite!r} or canary set {request.canaries!r} is not in data/suites", field="SUITE"
        )

    return recipe, hardware, suite, canaries, recipe_path


def planned_arms(catalog: Catalog, request: CampaignRequest, docker: bool, data: Path) -> list[ArmPlan]:
    """The arms `measure` would run, before it installs or starts anything: the request resolves,
    the runtime is one the hardware has, and each arm's command composes."""
    recipe, hardware, _, _, recipe_path = resolve(catalog, request, data)
    arms = plan_arms(request, recipe, hardware, str(recipe_path))
    if docker and arms[0].command.docker_image is None:
        raise UserError(
            f"RUNTIME=docker, but neither the recipe nor {hardware.id} names a docker image: use RUNTIME=local",
            field="RUNTIME",
        )
    return arms


def plan_request(catalog: Catalog, request: CampaignRequest, docker: bool, data: Path) -> list[str]:
    """`make measure` before it installs or starts anything (`planned_arms`). Lines to print."""
    arms = planned_arms(catalog, request, docker, data)
    hardware = resolve(catalog, request, data)[1]
    lines = [f"{request.model} {request.variant} on {hardware.name}: {len(arms)} arm(s)"]
    lines += [f"{arm.id}: {arm.command.redacted().shell()}" for arm in arms]
    if request.load is not None:
        lines.append(load_sweep_summary(request.load))
    return lines


def load_sweep_summary(load: LoadSweepOptions) -> str:
    """The load sweep's settings in one line, as `make measure` prints them before it starts."""
    fractions = ", ".join(f"{f:g}" for f in LOAD_RATE_FRACTIONS)
    rates = (
        ", ".join(f"{r:g}" for r in load.rates_rps) + " req/s"
        if load.rates_rps
        else f"{fractions} x the last closed level's request rate"
    )
    slo = ", ".join(f"{k} <= {v:g}" for k, v in load.slo.model_dump(exclude_none=True).items()) or "none"
    return (
        f"load sweep: closed loop at {', '.join(map(str, load.users))} users, open loop at {rates}; "
        f"{load.requests_per_level} requests per level, arrival seed {load.seed}, SLO {slo}, "
        f"lag bound {load.lag_bound_ms:g} ms (p99)"
    )


def signing_key(catalog: Catalog, progress: Progress) -> HostKey:
    """This host's key (made on first use, outside the repository); until its public half is in
    data/keys.yaml, `make site` on this host shows its packets labelled as such, and every other
    build (make check, make verify, CI, anyone else's) refuses them."""
    key = host_key(role="measurer")
    if key.key_id not in catalog.keys.by_id():
        owner = f"{getpass.getuser()}@{socket.gethostname()}"
        progress(
            f"this host's signing key {key.key_id[:12]} is not in data/keys.yaml yet: `make site` here shows its "
            "packets labelled as signed by this host's key; add these lines there so make check, make verify and "
            f"others accept them:\n{key.keys_yaml_entry(owner)}"
        )
    return key


def _title(model_title: str, request: CampaignRequest, hardware_name: str) -> str:
    cards = "one" if request.tp == 1 else str(request.tp)
    depths = ", ".join(str(d) for d in request.depths)
    return f"{model_title} · {request.variant} · {cards} {hardware_name} · depths {depths}"


def _docker_identity(pinned: PinnedImage, platform: str) -> RuntimeIdentity:
    return RuntimeIdentity(
        platform=platform,
        version=pinned.vllm_version,
        label=f"vLLM {platform.upper()} {pinned.vllm_version} ({pinned.image}, {pinned.digest[7:19]})",
        image=pinned.image,
        image_digest=pinned.digest,
        image_pinned=pinned.pinned,
    )


def ensure_demo_model(vllm_python: Path | None, out_dir: Path, progress: Progress) -> Path:
    """Generate the demo model once; the generator is deterministic, so hashes are stable."""
    if (out_dir / "config.json").exists():
        return out_dir
    if vllm_python is None or not vllm_python.exists():
        raise UserError(
            "the demo model is generated with the vLLM environment's python: run `make vllm-env`", field="VLLM_PYTHON"
        )
    progress(f"generating the demo model into {out_dir}")
    out = subprocess.run(
        [str(vllm_python), "-m", "runner.demo_model", "--out", str(out_dir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise UserError(f"demo model generation failed: {out.stderr.strip()[-500:]}", file=out_dir)
    return out_dir
