"""The cell process of a fleet job (runner/fleet/cell.py) without Ray: it detaches from whoever
started it, runs the runner, and when its pipe ends stops the runner as on Ctrl-C and reaps what
the runner left, even a process in a session of its own (as vLLM servers are). The Ray worker
that starts it in a fleet SIGKILLs its direct children when it exits (Ray's "Lifetimes of a
User-Spawn Process"), which is why nothing of the job may be one; tests/e2e/test_fleet.py shows it
against a real cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from catalog.model.packet import CampaignRef
from runner.fleet.cell import LOG, RESULT, SPEC, CellResult, CellSpec
from runner.plan import CampaignRequest
from tests.catalog.factories import signed_data
from tests.e2e.processes import TAG_VAR, new_tag, sweep, tagged_env, tagged_processes

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
# A "vLLM environment" that hangs when the runner reads its version, after starting a process
# in a session of its own, as a vLLM server is started.
HANGING_PYTHON = """#!/bin/sh
setsid sleep 600 &
exec sleep 600
"""


def job(tmp_path: Path, model: str) -> Path:
    data = signed_data(tmp_path / "data")
    if model == "ghost":
        text = (data / "models" / "demo.yaml").read_text()
        text = text.replace('slug: "demo"', 'slug: "ghost"').replace("local/demo-qwen3-tiny", "example/ghost-model")
        (data / "models" / "ghost.yaml").write_text(text)
    python = tmp_path / "vllm-env" / "python"
    python.parent.mkdir()
    python.write_text(HANGING_PYTHON)
    python.chmod(0o755)
    (tmp_path / "models" / "demo").mkdir(parents=True)
    (tmp_path / "models" / "demo" / "config.json").write_text(json.dumps({"num_attention_heads": 4}))
    folder = tmp_path / "job"
    folder.mkdir()
    spec = CellSpec(
        request=CampaignRequest(model=model, hardware="cpu_generic", max_tokens=101),
        campaign=CampaignRef(name="lab", cell="0123456789ab", repeat=1, repeats=1),
        runtime="local",
        health_timeout_s=30,
        vllm_python=str(python),
        data=str(data),
        runs=str(tmp_path / "runs"),
        models=str(tmp_path / "models"),
    )
    (folder / SPEC).write_text(spec.model_dump_json())
    return folder


def start(folder: Path, tag: str) -> subprocess.Popen[bytes]:
    launcher = subprocess.Popen(
        [sys.executable, "-m", "runner.fleet.cell", str(folder)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**tagged_env(tag), "HF_HUB_OFFLINE": "1", "HF_HOME": str(folder / "hf")},
        start_new_session=True,
    )
    assert launcher.wait(timeout=60) == 0  # it forks the cell process and returns at once
    return launcher


def test_a_closed_pipe_stops_the_runner_and_reaps_what_it_left(tmp_path: Path) -> None:
    folder = job(tmp_path, "demo")
    tag = new_tag("fleet-cell")
    launcher = start(folder, tag)
    try:
        end = time.monotonic() + 120
        while len([p for p in tagged_processes(tag) if "sleep 600" in p.cmdline]) < 2:
            assert time.monotonic() < end, (folder / LOG).read_text(errors="replace")
            time.sleep(0.2)
        assert launcher.stdin is not None and launcher.stdout is not None
        launcher.stdin.close()  # what the Ray task's end (or the job's timeout) does
        assert json.loads(launcher.stdout.read()) == {"rc": 130}
        result = CellResult.model_validate_json((folder / RESULT).read_bytes())
        assert result.rc == 130 and result.packet is None
        assert result.error == "stopped: the Ray task ended (host lost, head interrupted or the cell timed out)"
        log = (folder / LOG).read_text(errors="replace")
        assert "stopped 1 process(es) the runner left" in log  # the one in a session of its own
        assert tagged_processes(tag) == []
    finally:
        left = sweep(tag)
    assert left == []


def test_a_runner_failure_comes_back_as_the_result_with_its_message(tmp_path: Path) -> None:
    folder = job(tmp_path, "ghost")
    tag = new_tag("fleet-cell")
    launcher = start(folder, tag)
    try:
        assert launcher.stdout is not None
        assert json.loads(launcher.stdout.read()) == {"rc": 1}
        result = CellResult.model_validate_json((folder / RESULT).read_bytes())
        assert result.error is not None and result.error.startswith(
            "MODEL: example/ghost-model is not in the Hugging Face cache and HF_HUB_OFFLINE=1"
        )
        assert TAG_VAR and tagged_processes(tag) == []
    finally:
        assert launcher.stdin is not None
        launcher.stdin.close()
        left = sweep(tag)
    assert left == []
