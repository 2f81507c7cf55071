"""A fleet campaign on a real Ray cluster, through the real runner and vLLM CPU servers.

`ray.cluster_utils.Cluster` (Ray's own multi-node harness: every node a raylet of its own on this
machine) starts a head that measures nothing and two hosts, `host-a` and `host-b`, each advertising
the CPU stand-in card and one `measuring_host`, each with its own home (runs/, models/), signing
key and name, as `ray start --resources=...` would on two machines. Everything stays on loopback:
nodes on 127.0.0.1, and RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 so that Ray keeps 127.0.0.1 when a
driver connects instead of replacing it with the machine's address
(ray._private.services.resolve_ip_for_localhost). One CPU and an 80 MB object store per node,
no dashboard.

The plan has two cells: the demo model's oracle (two fresh servers, the smallest completion the
protocol allows) and a "ghost" model whose weights no host has (preflight refuses it in a second,
every time). One test, in order, because every vLLM start costs a minute of the 2 cores:

1. the head starts; the host the demo job lands on is removed from the cluster mid-job (Ray's
   `Cluster.remove_node` kills its raylet and workers); its cell process stops its runner and
   vLLM server by itself; Ray re-runs the job on the other host;
2. once the demo job's first server has finished there, the head is interrupted (SIGTERM): the
   job is cancelled and its server stopped;
3. the head runs again: it resumes, the host reuses the attempt it finished, and the packet comes
   back; the ghost job fails on each of its two tries (never more), reported with its host and log;
4. the packet is signed by that host's own key and written by its content address;
5. `campaign plan` then finds the repeat in packets/.

No Ray, runner or vLLM process survives the test (each host's processes carry its tag,
tests/e2e/processes.py), even when it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog.packets.keys import load_keys
from catalog.packets.verify import Verified, verify
from catalog.store.repository import load_catalog
from runner.cli import run
from runner.fleet.cells import HOST_RESOURCE
from tests.catalog.factories import signed_data
from tests.e2e.demo_campaign import HEALTH_DEADLINE_S, REPO
from tests.e2e.processes import TAG_VAR, Child, new_tag, sweep, tagged_processes

# Each step waits up to STEP_DEADLINE_S; a vLLM start took 285-470 s here while other sessions ran vLLM.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(3600)]

HOSTS = ("host-a", "host-b")
NODE_OBJECT_STORE = 80 * 1024 * 1024
PLAN = """\
name: fleet-e2e
attempts: 2
host_losses: 2
timeout_s: 1500
max_tokens: 101
health_timeout_s: {health}
matrix:
  - model: demo
    hardware: [cpu_generic]
  - model: ghost
    hardware: [cpu_generic]
"""
STEP_DEADLINE_S = 900.0
CLEANUP_GRACE_S = 90.0  # a cell process stops its runner and servers itself (20 s a server, then SIGKILL)


@dataclass
class Fleet:
    root: Path
    data: Path
    packets: Path
    plan: Path
    cluster: Any
    nodes: dict[str, Any]
    tags: dict[str, str]
    homes: dict[str, Path]

    def head_argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "runner",
            "--data",
            str(self.data),
            "--packets",
            str(self.packets),
            "--runs",
            str(self.root / "head-runs"),
            "campaign",
            "run",
            str(self.plan),
            "--address",
            self.cluster.address,
        ]

    def job_log(self, host: str, key: str) -> Path:
        return self.homes[host] / "runs" / "fleet" / "fleet-e2e" / "-" / f"{key}-r1" / "cell.log"


def _ghost_recipe(data: Path) -> None:
    """A model no host has the weights of: a copy of the demo's recipe under another name and repo."""
    recipe = yaml.safe_load((data / "models" / "demo.yaml").read_text())
    recipe["meta"].update(title="Ghost: weights nowhere", slug="ghost")
    recipe["model"]["model_id"] = "example/ghost-model"
    (data / "models" / "ghost.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))


@pytest.fixture
def fleet(tmp_path: Path, demo_model_dir: Path, vllm_python: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fleet]:
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before Ray reads it, here and in every child
    from ray.cluster_utils import Cluster

    data = signed_data(tmp_path / "data")
    _ghost_recipe(data)
    (tmp_path / "packets").mkdir()
    plan = tmp_path / "campaigns" / "fleet-e2e.yaml"
    plan.parent.mkdir()
    plan.write_text(PLAN.format(health=int(HEALTH_DEADLINE_S)))
    # Ray's sockets live under its temp dir, and a unix socket path has 107 bytes at most. The
    # cluster's temp dir is Ray's default one under RAY_TMPDIR: Ray 2.60's Cluster.add_node writes
    # the head's address to <default temp dir>/ray_current_cluster (cluster_utils.py, through
    # write_ray_address with no temp_dir) without making that folder, so on a machine where no Ray
    # ever ran (/tmp/ray absent: a fresh CI machine) the head failed to start.
    base = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", base)  # here and in every child, the head's command included
    temp_dir = os.path.join(base, "ray")
    common: dict[str, Any] = {
        "object_store_memory": NODE_OBJECT_STORE,
        "include_dashboard": False,
        "node_ip_address": "127.0.0.1",
        "temp_dir": temp_dir,
    }
    tags = {host: new_tag(f"fleet-{host}") for host in HOSTS}
    homes: dict[str, Path] = {}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, **common})
    try:
        nodes = {}
        for host in HOSTS:
            home = tmp_path / host
            (home / "models").mkdir(parents=True)
            (home / "models" / "demo").symlink_to(demo_model_dir)  # the generator is deterministic: one is enough
            homes[host] = home
            env = {
                "PYTHONPATH": str(REPO),
                "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                "LLMCAT_FLEET_HOST": host,
                "LLMCAT_FLEET_HOME": str(home),
                "LLMCAT_VLLM_PYTHON": str(vllm_python),
                "XDG_CONFIG_HOME": str(home / "config"),  # this host's own signing key
                "HF_HOME": str(home / "hf"),
                "HF_HUB_OFFLINE": "1",
                TAG_VAR: tags[host],
            }
            nodes[host] = cluster.add_node(
                num_cpus=1, resources={"cpu_generic": 1, HOST_RESOURCE: 1}, env_vars=env, node_name=host, **common
            )
        yield Fleet(tmp_path, data, tmp_path / "packets", plan, cluster, nodes, tags, homes)
    finally:
        cluster.shutdown()
        # every cell process sees its worker gone and stops what it started; wait for that, then
        # stop (and report) whatever did not
        end = time.monotonic() + CLEANUP_GRACE_S
        while any(tagged_processes(tag) for tag in tags.values()) and time.monotonic() < end:
            time.sleep(1.0)
        leftovers = [p for tag in tags.values() for p in sweep(tag)]
        shutil.rmtree(base, ignore_errors=True)
        assert not leftovers, f"processes outlived the cluster: {leftovers}"


def wait_for(what: str, found: Callable[[], Any], head: Child, log: Path, deadline_s: float = STEP_DEADLINE_S) -> Any:
    """Poll until `found()` is truthy; fail with the head's output if it never is or the head ended."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = found()
        if value:
            return value
        if head.process.poll() is not None:
            pytest.fail(f"the head ended (exit {head.process.returncode}) before {what}:\n{_tail(log)}")
        time.sleep(1.0)
    pytest.fail(f"no {what} within {deadline_s:.0f} s:\n{_tail(log)}")


def _tail(path: Path, size: int = 6000) -> str:
    return path.read_text(errors="replace")[-size:] if path.exists() else "(no output)"


def _started_on(log: Path, key: str) -> str | None:
    """The host the head last saw job `<key> r1` start on."""
    text = log.read_text(errors="replace") if log.exists() else ""
    hosts = re.findall(rf"(host-[ab]): {key} r1: started ", text)
    return hosts[-1] if hosts else None


def _contains(path: Path, needle: str) -> bool:
    return path.exists() and needle in path.read_text(errors="replace")


def test_a_campaign_survives_a_lost_host_a_failing_cell_and_an_interrupted_head(fleet: Fleet, capsys) -> None:
    assert run(["--data", str(fleet.data), "--packets", str(fleet.packets), "campaign", "plan", str(fleet.plan)]) == 0
    cells = [line.split()[1:3] for line in capsys.readouterr().out.splitlines() if line.startswith("cell ")]
    keys = {model: key for key, model in cells}
    demo, ghost = keys["demo"], keys["ghost"]

    # 1. the demo job starts; its host is removed from the cluster while the job runs there
    first_log = fleet.root / "head-1.log"
    with first_log.open("wb") as out:
        head = Child(fleet.head_argv(), "fleet-head", cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    try:
        lost = wait_for("the demo job started", lambda: _started_on(first_log, demo), head, first_log)
        other = next(h for h in HOSTS if h != lost)
        wait_for(
            f"the runner working on {lost}",
            lambda: _contains(fleet.job_log(lost, demo), "tp1-oracle server A: starting"),
            head,
            first_log,
        )
        fleet.cluster.remove_node(fleet.nodes[lost])
        # Ray SIGKILLed the lost host's workers; the cell process stopped its runner and server itself
        wait_for(f"{lost}'s processes to stop", lambda: not tagged_processes(fleet.tags[lost]), head, first_log, 120.0)
        assert _contains(fleet.job_log(lost, demo), "cell finished: stopped: the Ray task ended")

        # 2. Ray re-runs the demo job on the other host; once its first server is done, interrupt the head
        resumed_log = fleet.job_log(other, demo)
        wait_for(
            f"the first server's attempt on {other}",
            lambda: _contains(resumed_log, "tp1-oracle server B: starting"),
            head,
            first_log,
        )
        assert _started_on(first_log, demo) == other
    finally:
        head.stop()
    first = first_log.read_text(errors="replace")
    assert head.process.returncode == 130, first[-4000:]
    assert "interrupted: 0 of 2 job(s) are in" in first and "Run the same command again to resume" in first
    assert list(fleet.packets.iterdir()) == []
    end = time.monotonic() + CLEANUP_GRACE_S
    while any("vllm" in p.cmdline for p in tagged_processes(fleet.tags[other])) and time.monotonic() < end:
        time.sleep(1.0)
    assert not [p for p in tagged_processes(fleet.tags[other]) if "vllm" in p.cmdline], "a server outlived its job"

    # 3. the head again: it resumes, the host reuses the attempt it finished and the packet comes
    # back; the ghost job fails on each of its two tries (one host left: after the demo job)
    second_log = fleet.root / "head-2.log"
    with second_log.open("wb") as out:
        again = Child(fleet.head_argv(), "fleet-head-again", cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    code = again.wait(2 * STEP_DEADLINE_S)
    second = second_log.read_text(errors="replace")
    assert code == 1, second[-4000:]  # the ghost job failed; the demo job did not
    assert "tp1-oracle server A: finished earlier, reusing" in resumed_log.read_text(errors="replace")
    assert f"{other}: {demo} r1 sealed demo-bf16-" in second
    assert f"FAILED ghost default cpu_generic tp1 depths 0 · repeat 1/1 ({ghost} r1) after 2 tries:" in second
    for n in (1, 2):
        assert re.search(
            rf"  try {n} on {other} \(log {re.escape(str(fleet.job_log(other, ghost)))}\): MODEL: "
            r"example/ghost-model is not in the Hugging Face cache and HF_HUB_OFFLINE=1",
            second,
        ), second[-4000:]
    assert "error: 1 of 2 job(s) failed: each try's host and log are listed above" in second

    # 4. the packet: signed by the host's own key, which data/keys.yaml lists once its lines are added
    assert f"{other} signs with key " in second
    (packet_file,) = [p for p in fleet.packets.iterdir() if not p.name.endswith(".dsse.json")]
    printed = second.split("so builds accept its packets:\n", 1)[1].splitlines()
    entry = "".join(line + "\n" for line in takewhile(lambda line: line.startswith("  "), printed))
    assert f'owner: "{other}"' in entry
    listed = fleet.data / "keys.yaml"
    listed.write_text(listed.read_text() + entry)
    checked = verify(packet_file, load_keys(listed))
    assert isinstance(checked, Verified), getattr(checked, "problems", None)
    packet = checked.packet
    assert packet.signed and packet.campaign is not None
    assert (packet.campaign.name, packet.campaign.cell, packet.campaign.repeat) == ("fleet-e2e", demo, 1)
    assert packet.identity.model.slug == "demo" and [a.state.value for a in packet.arms] == ["measured"]

    # 5. the plan now finds the repeat in packets/
    catalog = load_catalog(fleet.data, fleet.packets, allow_unsigned=True)
    assert [p.campaign.repeat for p in catalog.packets.values() if p.campaign] == [1]
    assert run(["--data", str(fleet.data), "--packets", str(fleet.packets), "campaign", "plan", str(fleet.plan)]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"cell {demo} ")]
    assert line.endswith("· repeats done: 1")
