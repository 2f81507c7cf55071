"""`python -m runner measure ... --docker` end to end on a stand-in B70 box: a fake `docker`
(tests/runner/bin/docker) runs the fake vLLM server as its containers, fake `xpu-smi` replays a
recorded B70 (tests/runner/smi/b70) and its power trace with the card's hwmon energy counter
(tests/runner/power). The runner's real code runs throughout."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import runner.attempt
from catalog.errors import exit_on_user_error
from catalog.model.packet import Packet
from catalog.packets.layout import SIGNATURE_SUFFIX
from runner import cli as runner_cli
from runner import preflight
from runner.cards import CardNodes, CardSelection, Device
from runner.docker import CONTAINER_PREFIX
from runner.energy import meter as energy_meter
from runner.energy import sources as energy_sources
from runner.plan import campaign_id
from runner.runtime import DockerRuntime
from runner.server import ServerError, VllmServer, find_free_port
from tests.catalog.factories import signed_data

HERE = Path(__file__).resolve().parent
BIN = HERE / "bin"
IMAGE = "vllm/vllm-openai-xpu:latest"
DIGEST = "sha256:" + "5e" * 32
TOKEN = "hf_notarealtoken_0123456789"
CONFIG = {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}


def values(call: list[str], option: str) -> list[str]:
    return [call[i + 1] for i, arg in enumerate(call) if arg == option]


def devices(call: list[str]) -> list[str]:
    return values(call, "--device")


def container_env(call: list[str]) -> dict[str, str]:
    return dict(item.partition("=")[::2] for item in values(call, "-e") if "=" in item)


@dataclass
class Box:
    root: Path
    state: Path
    pids: Path

    def run(self, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
        if not any(arg == "--model" for arg in extra):
            extra = ("--model", "demo", "--model-dir", "model", *extra)
        argv = [
            "--data", "data", "--packets", "packets", "--runs", "runs",
            "measure", "--hardware", "arc_pro_b70", "--runtime", "docker", "--health-timeout", "20", *extra,
        ]  # fmt: skip
        code = 0
        try:
            exit_on_user_error(lambda: runner_cli.run(argv))()
        except SystemExit as done:
            code = int(done.code or 0)
        return code, capsys.readouterr().err

    def calls(self) -> list[list[str]]:
        path = self.state / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def containers(self) -> list[str]:
        return sorted(p.name for p in self.state.glob("container-*.json"))

    def live(self) -> list[int]:
        alive = []
        for entry in self.pids.iterdir():
            if entry.name.isdigit():
                try:
                    state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                if state != "Z":
                    alive.append(int(entry.name))
        return alive

    def packet(self) -> dict[str, object]:
        (path,) = [p for p in (self.root / "packets").iterdir() if not p.name.endswith(SIGNATURE_SUFFIX)]
        loaded: dict[str, object] = json.loads(path.read_text())
        return loaded

    def add_container(self, name: str, devices: list[str], **host_config: object) -> subprocess.Popen[bytes]:
        """A container some other run left: a live process holding (or not) the card.
        `host_config`: privileged=True, runtime="nvidia", gpus=["all"] as `docker run` records them."""
        process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        record = {"name": name, "id": name[:12], "pid": process.pid, "image": IMAGE, "devices": devices, "gpus": []}
        record.update(host_config)
        (self.state / f"container-{name}.json").write_text(json.dumps(record))
        return process


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Box]:
    signed_data(tmp_path / "data")
    (tmp_path / "packets").mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(CONFIG))
    state = tmp_path / "docker"
    state.mkdir()
    (state / "images.json").write_text(json.dumps({IMAGE: DIGEST}))
    pids = tmp_path / "pids"
    pids.mkdir()
    dri = tmp_path / "dri"
    (dri / "by-path").mkdir(parents=True)
    host_cards = []
    for number, bus in ((1, "0000:03:00.0"), (2, "0000:04:00.0")):
        nodes = [dri / f"card{number}", dri / f"renderD{127 + number}"]
        for node, kind in zip(nodes, ("card", "render"), strict=True):
            node.write_bytes(b"")
            (dri / "by-path" / f"pci-{bus}-{kind}").symlink_to(f"../{node.name}")
        host_cards.append({"bus": bus, "nodes": [str(n) for n in nodes]})
    monkeypatch.setattr(preflight, "DRI", dri)
    hwmon = tmp_path / "sys" / "0000:03:00.0" / "hwmon" / "hwmon3"  # the card's PCI address in smi/b70
    hwmon.mkdir(parents=True)
    (hwmon / "name").write_text("xe\n")
    (hwmon / "energy1_input").write_text("0\n")  # the replayed trace writes its counter here
    monkeypatch.setattr(energy_sources, "SYS_PCI_DEVICES", tmp_path / "sys")
    monkeypatch.setattr(energy_meter, "INTERVAL_MS", 100)  # many samples in the fake server's short windows
    monkeypatch.setattr(energy_meter, "IDLE_BASELINE_S", 1.0)
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(("FAKE_", "ZE_", "HF_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(state))
    monkeypatch.setenv("FAKE_SMI_BOX", str(HERE / "smi" / "b70"))
    monkeypatch.setenv("FAKE_POWER_TRACE", str(HERE / "power" / "b70-idle.trace"))
    monkeypatch.setenv("FAKE_HWMON", str(hwmon))
    # the fake docker refuses a container that could see any card but the one preflight checked
    monkeypatch.setenv("FAKE_DOCKER_HOST_CARDS", json.dumps(host_cards))
    monkeypatch.setenv("FAKE_DOCKER_CHOSEN", "0000:03:00.0")
    monkeypatch.setenv("FAKE_VLLM_PIDS", str(pids))
    monkeypatch.setenv("FAKE_VLLM_TOKEN_DELAY", "0.0002")
    monkeypatch.setenv("FAKE_VLLM_VERSION", "0.32.0+xpu")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    # docker stop -t 1 instead of 20: the same code path, a shorter wait
    monkeypatch.setattr(runner.attempt, "VllmServer", functools.partial(VllmServer, stop_grace_s=1.0))
    found = Box(tmp_path, state, pids)
    yield found
    for pid in found.live():
        os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_docker_campaign_pins_names_stops_and_removes_every_container(
    box: Box, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = box.run(capsys)
    assert code == 0, err
    calls = box.calls()
    runs = [c for c in calls if c[0] == "run" and "--entrypoint" not in c]
    assert len(runs) == 2  # the oracle's two fresh servers
    pinned = f"vllm/vllm-openai-xpu@{DIGEST}"
    names = []
    for call in runs:
        name = call[call.index("--name") + 1]
        names.append(name)
        assert name.startswith(CONTAINER_PREFIX + "demo-default-")
        assert pinned in call and IMAGE not in call  # the pinned image, never the moving tag
        assert f"{box.root / 'model'}:/models/model:ro" in call  # MODEL_DIR is what the container serves
        assert call[call.index(pinned) + 1] == "/models/model"
        assert call[call.index("HF_TOKEN") - 1 : call.index("HF_TOKEN") + 1] == ["-e", "HF_TOKEN"]
        assert not any(TOKEN in arg for arg in call)
        # only the card preflight checked: its two nodes, its by-path links, no --privileged
        assert devices(call) == [str(box.root / "dri" / "card1"), str(box.root / "dri" / "renderD128")]
        assert "--privileged" not in call and "/dev/dri" not in call
        env = container_env(call)
        assert env["ZE_AFFINITY_MASK"] == "0" and env["ZE_ENABLE_PCI_ID_DEVICE_ORDER"] == "1"
        by_path = next(v for v in values(call, "-v") if v.endswith(":/dev/dri/by-path:ro"))
        links = {p.name: os.readlink(p) for p in Path(by_path.split(":")[0]).iterdir()}
        assert links == {"pci-0000:03:00.0-card": "../card1", "pci-0000:03:00.0-render": "../renderD128"}
        # compile caches: container paths on an anonymous volume, new for each container
        assert "/root/.cache/llmcat-compile" in values(call, "-v")
        assert {k: v for k, v in env.items() if k.endswith(("CACHE_DIR", "CACHE_ROOT"))} == {
            "VLLM_CACHE_ROOT": "/root/.cache/llmcat-compile/vllm",
            "TORCHINDUCTOR_CACHE_DIR": "/root/.cache/llmcat-compile/inductor",
            "TRITON_CACHE_DIR": "/root/.cache/llmcat-compile/triton",
            "SYCL_CACHE_DIR": "/root/.cache/llmcat-compile/sycl",
            "NEO_CACHE_DIR": "/root/.cache/llmcat-compile/neo",
        }
        assert env["HF_HUB_OFFLINE"] == "1"  # the weights are the folder preflight hashed
    assert names[0].endswith("-tp1-oracle-A") and names[1].endswith("-tp1-oracle-B")
    for name in names:
        assert ["stop", "-t", "1", name] in calls and ["rm", "-f", name] in calls
    assert ["pull", IMAGE] in calls
    assert box.containers() == [] and box.live() == []

    packet = box.packet()
    text = json.dumps(packet)
    assert TOKEN not in text
    identity = packet["identity"]
    assert isinstance(identity, dict)
    runtime = identity["runtime"]
    assert runtime["image"] == IMAGE and runtime["image_digest"] == DIGEST and runtime["image_pinned"] == pinned
    assert runtime["version"] == "0.32.0"
    (arm,) = packet["arms"]  # type: ignore[misc]
    config = arm["config"]  # type: ignore[has-type]
    assert config["passed_env"] == ["HF_TOKEN"]
    assert config["max_model_len"] == 4096 and config["max_model_len_source"] == "recipe"
    assert config["launch_argv"][:3] == ["docker", "run", "--rm"] and pinned in config["launch_argv"]
    assert config["argv"][:3] == ["vllm", "serve", "local/demo-qwen3-tiny"]
    assert {server["server_version"] for server in arm["servers"]} == {"0.32.0+xpu"}  # type: ignore[has-type]

    # the card's energy beside each strict suite, read from the stand-in xpu-smi and hwmon
    typed = Packet.model_validate(packet)
    assert typed.energy is not None and typed.energy.sources == [energy_sources.XPU_POWER, energy_sources.HWMON_COUNTER]
    assert typed.energy.idle is not None and typed.energy.idle.valid
    for server in typed.arms[0].servers:
        assert server.energy is not None
        assert server.energy.invalid == [], server.energy.invalid
        assert server.energy.figures is not None and server.energy.figures.avg_w < 40.0  # the idle trace


@pytest.mark.slow
def test_hub_weights_are_served_at_the_commit_hashed_and_offline(
    box: Box, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub cache in use lies outside HF_HOME (HF_HUB_CACHE): it is the one mounted, the
    snapshot refs/main named when preflight hashed it is the `--revision` served, offline."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    hub = box.root / "elsewhere" / "hub"
    repo = hub / "models--RedHatAI--Qwen3.5-4B-quantized.w4a16"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text(json.dumps(CONFIG))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    code, err = box.run(capsys, "--model", "qwen3.5-4b", "--variant", "w4a16")
    assert code == 0, err
    runs = [c for c in box.calls() if c[0] == "run" and "--entrypoint" not in c]
    for call in runs:
        assert f"{hub}:/root/.cache/huggingface/hub" in values(call, "-v")
        assert container_env(call)["HF_HUB_OFFLINE"] == "1"
        assert values(call, "--revision") == [commit] and values(call, "--tokenizer-revision") == [commit]
        assert values(call, "--served-model-name") == ["RedHatAI/Qwen3.5-4B-quantized.w4a16"]
    packet: Any = box.packet()
    (arm,) = packet["arms"]
    assert values(arm["config"]["argv"], "--revision") == [commit]
    assert packet["identity"]["model"]["revision"] == commit


@pytest.mark.slow
def test_a_container_that_ignores_sigterm_is_killed_and_removed(
    box: Box, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_FAULT", "ignore_sigterm")
    code, err = box.run(capsys)
    assert code == 0, err
    assert box.containers() == [] and box.live() == []


@pytest.mark.slow
def test_leftover_containers_are_swept_and_a_card_held_by_another_container_is_refused(
    box: Box, capsys: pytest.CaptureFixture[str]
) -> None:
    leftover = box.add_container(CONTAINER_PREFIX + "demo-default-0123456789ab-tp1-oracle-A", ["/dev/dri:/dev/dri"])
    other = box.add_container("someone-elses-llm", ["/dev/dri:/dev/dri"])
    try:
        code, err = box.run(capsys)
        assert code == 1
        assert "container(s) someone-elses-llm hold a GPU" in err and "Traceback" not in err
        assert not any(c[0] == "run" for c in box.calls())  # nothing started
        assert leftover.wait(timeout=10) is not None  # our leftover was removed all the same
        assert box.containers() == ["container-someone-elses-llm.json"]
    finally:
        other.kill()
        other.wait()
        leftover.kill()


@pytest.mark.slow
def test_a_container_outlives_a_killed_docker_client_until_stopped_by_name(box: Box, tmp_path: Path) -> None:
    """The fault the names exist for: SIGKILL reaches the `docker run` client, not the container."""
    from catalog.recipes.compose import LaunchCommand

    command = LaunchCommand("m", ["--max-num-seqs", "1"], {}, IMAGE, "xpu")
    dri = box.root / "dri"
    cards = CardSelection(
        "xpu", (Device(0, "B70", "0000:03:00.0"),), (CardNodes("0000:03:00.0", f"{dri}/card1", f"{dri}/renderD128"),)
    )
    runtime = DockerRuntime(tmp_path / "hf", "camp", f"vllm/vllm-openai-xpu@{DIGEST}", cards=cards)
    (box.state / "pulled").write_text(IMAGE + "\n")
    port = find_free_port()
    server = VllmServer(runtime.argv(command, port, "arm-A"), port=port, run_dir=tmp_path / "srv", stop_grace_s=1.0)
    server.start()
    assert server.container == "llmcat-camp-arm-A" and server.version == "0.32.0+xpu"
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)  # the client dies...
    time.sleep(0.3)
    assert box.containers() == ["container-llmcat-camp-arm-A.json"] and box.live()  # ...the container does not
    server.stop()
    assert box.containers() == [] and box.live() == []


@pytest.mark.slow
def test_the_stand_in_refuses_a_container_that_could_see_another_card(box: Box, tmp_path: Path) -> None:
    """What makes the campaign tests above fail if the runner gave a container every card:
    without a card selection a container gets the platform's options (`--device /dev/dri
    --privileged`), which the fake docker refuses as docker would have granted them."""
    from catalog.recipes.compose import LaunchCommand

    command = LaunchCommand("m", ["--max-num-seqs", "1"], {}, IMAGE, "xpu")
    runtime = DockerRuntime(tmp_path / "hf", "camp", f"vllm/vllm-openai-xpu@{DIGEST}")
    (box.state / "pulled").write_text(IMAGE + "\n")
    port = find_free_port()
    server = VllmServer(runtime.argv(command, port, "arm-A"), port=port, run_dir=tmp_path / "srv", stop_grace_s=1.0)
    with pytest.raises(ServerError) as caught:
        server.start()
    assert "could see card(s) 0000:04:00.0 besides the chosen" in caught.value.log_tail


@pytest.mark.slow
def test_the_card_the_mask_names_is_the_only_card_its_containers_get(
    box: Box, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two B70s, ZE_AFFINITY_MASK=1: preflight checks card 1 (0000:04:00.0), and its containers
    get that card's nodes and no other, numbered 0 inside."""
    monkeypatch.setenv("FAKE_SMI_BOX", str(HERE / "smi" / "b70x2-2x"))
    monkeypatch.setenv("FAKE_DOCKER_CHOSEN", "0000:04:00.0")
    monkeypatch.setenv("ZE_AFFINITY_MASK", "1")
    code, err = box.run(capsys)
    assert code == 0, err
    runs = [c for c in box.calls() if c[0] == "run" and "--entrypoint" not in c]
    assert len(runs) == 2
    for call in runs:
        assert devices(call) == [str(box.root / "dri" / "card2"), str(box.root / "dri" / "renderD129")]
        assert container_env(call)["ZE_AFFINITY_MASK"] == "0"


@pytest.mark.slow
@pytest.mark.parametrize(
    "host_config",
    [{"privileged": True}, {"runtime": "nvidia"}, {"gpus": ["all"]}],
    ids=["privileged", "nvidia-runtime", "gpus-all"],
)
def test_a_container_holding_every_card_without_a_device_list_is_seen(
    box: Box, capsys: pytest.CaptureFixture[str], host_config: dict[str, object]
) -> None:
    """`--privileged` and the legacy nvidia runtime give a container cards without listing any
    in HostConfig.Devices or DeviceRequests (moby api/types/container/hostconfig.go)."""
    other = box.add_container("privileged-job", [], **host_config)
    try:
        code, err = box.run(capsys)
        assert code == 1 and "container(s) privileged-job hold a GPU" in err
        assert not any(c[0] == "run" and "--entrypoint" not in c for c in box.calls())
    finally:
        other.kill()
        other.wait()


def test_docker_without_an_image_is_an_error_not_a_local_run(box: Box, capsys: pytest.CaptureFixture[str]) -> None:
    code = 0
    try:
        exit_on_user_error(
            lambda: runner_cli.run(
                ["--data", "data", "--packets", "packets", "measure", "--model", "demo", "--runtime", "docker"]
            )
        )()
    except SystemExit as done:
        code = int(done.code or 0)
    err = capsys.readouterr().err
    assert code == 1 and "RUNTIME=docker, but neither the recipe nor cpu_generic names a docker image" in err
    assert box.calls() == []


def test_the_campaign_id_changes_with_the_image_digest_or_vllm_version() -> None:
    from runner.plan import CampaignRequest

    request = CampaignRequest(model="demo")
    keys = ("sha256:a 0.32.0 ", "sha256:b 0.32.0 ", "sha256:a 0.33.0 ")
    ids = {campaign_id(request, [], "s" * 64, key) for key in keys}
    assert len(ids) == 3
