"""`make measure`: preflight, plan, two fresh servers per arm, gates, ladders, one sealed packet."""

from __future__ import annotations

import getpass
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from catalog.errors import CatalogError
from catalog.packet import Identity, ModelIdentity, Packet, RuntimeIdentity
from catalog.repository import Catalog
from catalog.signing import HostKey, host_key
from runner import preflight
from runner.attempt import Progress, Workload
from runner.campaign import CampaignSetup, assemble, measure_arms, publish
from runner.identity import config_facts, host_identity, local_runtime_identity, model_files, weight_bytes
from runner.ladders import run_ladders
from runner.plan import ArmPlan, CampaignRequest, campaign_id, flag_value, plan_arms
from runner.runtime import DockerRuntime, LocalRuntime, Runtime

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


def measure(
    catalog: Catalog,
    request: CampaignRequest,
    choice: RuntimeChoice,
    places: Places,
    progress: Progress,
    reproduces: str | None = None,
    planned: list[ArmPlan] | None = None,
) -> Packet:
    """`planned`: the arms to measure, when the caller planned them (a reproduction plans one per
    arm of the packet it reproduces); otherwise one per requested depth."""
    recipe_path = places.data / "models" / f"{request.model}.yaml"
    recipe = catalog.recipes.get(request.model)
    if recipe is None:
        raise CatalogError(f"no recipe {recipe_path} (models: {', '.join(sorted(catalog.recipes))})", field="MODEL")
    hardware_id = request.hardware or (DEMO_HARDWARE if request.model == DEMO_SLUG else None)
    if hardware_id is None:
        raise CatalogError(
            f"name the hardware, e.g. HW=arc_pro_b70 (known: {', '.join(sorted(catalog.hardware))})", field="HW"
        )
    hardware = catalog.hardware.get(hardware_id)
    if hardware is None:
        raise CatalogError(
            f"unknown hardware {hardware_id!r} (known: {', '.join(sorted(catalog.hardware))})", field="HW"
        )
    if request.variant not in recipe.variants:
        raise CatalogError(
            f"unknown variant {request.variant!r} (choose from {', '.join(recipe.variants)})", field="VARIANT"
        )
    suite = catalog.suites.get(request.suite)
    canaries = catalog.canary_sets.get(request.canaries)
    if suite is None or canaries is None:
        raise CatalogError(
            f"suite {request.suite!r} or canary set {request.canaries!r} is not in data/suites", field="SUITE"
        )

    arms = planned or plan_arms(request, recipe, hardware, str(recipe_path))
    image = arms[0].command.docker_image if choice.docker else None
    devices = preflight.check(recipe, request.variant, hardware, request.tp, choice.vllm_python, image)
    model_dir = choice.model_dir
    if request.model == DEMO_SLUG and model_dir is None:
        model_dir = ensure_demo_model(choice.vllm_python, places.models / DEMO_SLUG, progress)
    preflight.check_weights(arms[0].command.model_id, model_dir)
    key = signing_key(catalog, progress)
    runtime: Runtime = (
        DockerRuntime(Path.home() / ".cache" / "huggingface")
        if image
        else LocalRuntime(choice.vllm_python or Path("python"), model_dir)
    )
    for arm in arms:
        progress(f"{arm.id}: {arm.command.redacted().shell()}")

    cid = campaign_id(request, arms, suite.sha256)
    run_dir = places.runs / cid
    progress(f"campaign {cid}: logs and finished attempts in {run_dir}")
    workload = Workload(suite, canaries, request.max_tokens, request.seed, choice.health_deadline_s)
    files = model_files(model_dir) if model_dir else []
    identity = Identity(
        model=ModelIdentity(
            slug=recipe.meta.slug,
            variant=request.variant,
            repo=arms[0].command.model_id,
            quantization=recipe.variants[request.variant].precision.lower(),
            quantization_label=recipe.variants[request.variant].precision.upper(),
            weight_bytes=weight_bytes(files) or None,
            weight_files=files,
            config=config_facts(model_dir) if model_dir else None,
            synthetic=request.model == DEMO_SLUG,
            synthetic_note=DEMO_NOTE if request.model == DEMO_SLUG else None,
        ),
        runtime=local_runtime_identity(choice.vllm_python, hardware.platform)
        if choice.vllm_python and not image
        else _docker_identity(image or "", hardware.platform),
        host=host_identity(hardware.id, max(request.tp, 1), devices.name, devices.driver),
    )
    setup = CampaignSetup(
        request,
        arms,
        workload,
        run_dir,
        identity,
        _title(recipe.meta.title, request, hardware.name),
    )
    try:
        results = measure_arms(setup, runtime, progress)
        ladders = []
        if request.ladders:
            max_model_len = int(flag_value(arms[0].command.args, "--max-model-len") or recipe.model.context_length)
            oracle_context: dict[tuple[int, str], list[int]] = {}
            for arm in arms:
                arm_ladders, outputs = run_ladders(
                    request.ladders,
                    arm,
                    results[arms[0].id][0].rows,
                    oracle_context,
                    runtime,
                    workload,
                    run_dir,
                    max_model_len,
                    progress,
                    request.concurrency_levels,
                )
                if arm.spec_depth == 0:
                    oracle_context = outputs
                ladders.extend(arm_ladders)
    except KeyboardInterrupt:
        progress(f"interrupted: no packet written; finished attempts and server logs stay in {run_dir}")
        raise
    sealed = assemble(setup, results, ladders, reproduces, key)
    path = publish(sealed, places.packets)
    packet = sealed.packet
    progress(f"sealed {packet.id} ({packet.state.value}), signed by key {key.key_id[:12]} -> {path}")
    return packet


def signing_key(catalog: Catalog, progress: Progress) -> HostKey:
    """This host's key (made on first use, outside the repository); until its public half is in
    data/keys.yaml, its packets are refused by every build but a local `--allow-unsigned` one."""
    key = host_key(role="measurer")
    if key.key_id not in catalog.keys.by_id():
        owner = f"{getpass.getuser()}@{socket.gethostname()}"
        progress(
            f"this host's signing key {key.key_id[:12]} is not in data/keys.yaml yet: "
            f"add these lines there so others can verify its packets:\n{key.keys_yaml_entry(owner)}"
        )
    return key


def _title(model_title: str, request: CampaignRequest, hardware_name: str) -> str:
    cards = "one" if request.tp == 1 else str(request.tp)
    depths = ", ".join(str(d) for d in request.depths)
    return f"{model_title} · {request.variant} · {cards} {hardware_name} · depths {depths}"


def _docker_identity(image: str, platform: str) -> RuntimeIdentity:
    digest = (
        subprocess.run(
            ["docker", "image", "inspect", "--format", "{{index .RepoDigests 0}}", image],
            capture_output=True,
            text=True,
        ).stdout.strip()
        or None
    )
    return RuntimeIdentity(
        platform=platform,
        version="see image",
        label=f"vLLM {platform.upper()} ({image})",
        image=image,
        image_digest=digest,
    )


def ensure_demo_model(vllm_python: Path | None, out_dir: Path, progress: Progress) -> Path:
    """Generate the demo model once; the generator is deterministic, so hashes are stable."""
    if (out_dir / "config.json").exists():
        return out_dir
    if vllm_python is None or not vllm_python.exists():
        raise CatalogError(
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
        raise CatalogError(f"demo model generation failed: {out.stderr.strip()[-500:]}", file=out_dir)
    return out_dir
