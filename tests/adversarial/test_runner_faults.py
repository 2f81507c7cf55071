"""Runner faults against the fake vLLM (testkit/fake_vllm), through the runner's real code:
runner.cli -> measure -> campaign -> attempt -> VllmServer -> LocalRuntime's `python -m
vllm.entrypoints.openai.api_server`, where "python" is a shim that finds the fake.

Every fault must leave no process of any server group alive, no packet (and no temporary file) in
packets/, one clear error line, and the server logs and finished attempts under runs/."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import catalog.files
import runner.attempt
import runner.server
from catalog.errors import CatalogError, exit_on_user_error
from catalog.files import write_file
from catalog.store.repository import load_catalog
from runner.measure import Places, RuntimeChoice, measure
from runner.plan import CampaignRequest
from runner.server import find_free_port
from tests.adversarial.fakes import Campaign
from tests.adversarial.support import REPO, Tally

# ---- the server misbehaves ----


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_server_exits_during_start(campaign: Campaign, monkeypatch: pytest.MonkeyPatch, capsys, tally: Tally) -> None:
    monkeypatch.setenv("FAKE_VLLM_FAULT", "exit_on_start")
    code, err = campaign.run(capsys)
    campaign.assert_failed_cleanly(code, err)
    assert "exited with code 3 during startup" in err
    log = campaign.run_dir() / "tp1-oracle" / "server-A.log"
    assert "fake engine failed to allocate KV cache" in log.read_text()
    record = json.loads((campaign.run_dir() / "tp1-oracle" / "server-A.json").read_text())
    assert record["status"] == "failed" and "KV cache" in record["error"]
    tally.add("runner faults", "server exits during start", 1)


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_server_never_becomes_ready(campaign: Campaign, monkeypatch: pytest.MonkeyPatch, capsys, tally: Tally) -> None:
    monkeypatch.setenv("FAKE_VLLM_FAULT", "never_ready")
    code, err = campaign.run(capsys, "--health-timeout", "2")
    campaign.assert_failed_cleanly(code, err)
    assert "not ready within 2 s" in err
    assert (campaign.run_dir() / "tp1-oracle" / "server-A.log").exists()
    tally.add("runner faults", "health endpoint never ready (2 s deadline)", 1)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_server_dies_mid_suite_then_a_rerun_resumes(
    campaign: Campaign, monkeypatch: pytest.MonkeyPatch, capsys, tally: Tally
) -> None:
    """Server B dies in the middle of prompt 4 and leaves its engine child (which ignores SIGTERM)
    behind: nothing is promoted, A's finished attempt is kept, and a rerun reuses it."""
    monkeypatch.setenv("FAKE_VLLM_FAULT", "exit_mid_suite")
    monkeypatch.setenv("FAKE_VLLM_FAULT_SERVER", "2")
    monkeypatch.setenv("FAKE_VLLM_STUBBORN", "1")
    code, err = campaign.run(capsys)
    campaign.assert_failed_cleanly(code, err)
    assert "tp1-oracle server B failed, no packet written" in err
    assert "server-B.log" in err
    arm = campaign.run_dir() / "tp1-oracle"
    assert "engine core died" in (arm / "server-B.log").read_text()
    assert json.loads((arm / "server-A.json").read_text())["status"] == "ok"
    assert json.loads((arm / "server-B.json").read_text())["status"] == "failed"

    monkeypatch.delenv("FAKE_VLLM_FAULT")
    code, err = campaign.run(capsys)
    assert code == 0, err
    assert "server A: finished earlier, reusing" in err
    assert len(campaign.packet_files()) == 1 and campaign.live() == []
    load_catalog(campaign.root / "data", campaign.root / "packets")  # the packet verifies
    tally.add("runner faults", "server dies mid-suite (engine child ignores SIGTERM); rerun resumes", 1)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_server_ignores_sigterm_at_teardown(
    campaign: Campaign, monkeypatch: pytest.MonkeyPatch, capsys, tally: Tally
) -> None:
    monkeypatch.setenv("FAKE_VLLM_FAULT", "ignore_sigterm")
    code, err = campaign.run(capsys)
    assert code == 0, err
    assert campaign.servers_started() == 2
    assert campaign.live() == [], "SIGKILL did not reach the group"
    assert len(campaign.packet_files()) == 1
    tally.add("runner faults", "server and engine ignore SIGTERM at teardown", 2)


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_port_taken_before_start(campaign: Campaign, monkeypatch: pytest.MonkeyPatch, capsys, tally: Tally) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        monkeypatch.setattr(runner.attempt, "find_free_port", lambda: port)
        code, err = campaign.run(capsys)
    campaign.assert_failed_cleanly(code, err)
    assert f"port 127.0.0.1:{port} is already in use" in err
    assert campaign.servers_started() == 0
    tally.add("runner faults", "port taken before the server starts", 1)


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_port_taken_between_check_and_bind(
    campaign: Campaign, monkeypatch: pytest.MonkeyPatch, capsys, tally: Tally
) -> None:
    """Another process takes the port after the runner checked it: vLLM fails to bind."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        monkeypatch.setattr(runner.attempt, "find_free_port", lambda: port)
        monkeypatch.setattr(runner.server, "is_port_free", lambda port, host="127.0.0.1": True)
        code, err = campaign.run(capsys)
    campaign.assert_failed_cleanly(code, err)
    assert "during startup (port taken by another process first)" in err
    tally.add("runner faults", "port taken between the check and the bind", 1)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_port_taken_by_another_vllm_server(
    campaign: Campaign, monkeypatch: pytest.MonkeyPatch, capsys, tally: Tally
) -> None:
    """The port goes to another (working) vLLM server after the check, as when another session
    starts one on this host: the runner must not measure that server as if it were its own."""
    foreign_pids = campaign.root / "foreign"
    foreign_pids.mkdir()
    port = find_free_port()
    env = {**os.environ, "FAKE_VLLM_PIDS": str(foreign_pids)}
    argv = [str(campaign.python), "-m", "vllm.entrypoints.openai.api_server", "--port", str(port)]
    foreign = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while runner.server.is_port_free(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        monkeypatch.setattr(runner.attempt, "find_free_port", lambda: port)
        monkeypatch.setattr(runner.server, "is_port_free", lambda port, host="127.0.0.1": True)
        code, err = campaign.run(capsys)
        campaign.assert_failed_cleanly(code, err)
        assert "port taken by another process first" in err
        assert foreign.poll() is None, "the runner stopped a server that was not its own"
    finally:
        foreign.kill()
        foreign.wait()
        for pid in foreign_pids.iterdir():
            if pid.name.isdigit():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid.name), signal.SIGKILL)
    tally.add("runner faults", "port taken by another, working vLLM server", 1)


# ---- the disk fills ----


class FullDisk:
    """os.fdopen stand-in for catalog.files: writes to files under `folder` stop half way with
    ENOSPC, as a full disk does; other files are written normally."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()
        self.hits = 0
        self.real = os.fdopen

    def __call__(self, fd: int, *args: Any, **kwargs: Any) -> Any:
        handle = self.real(fd, *args, **kwargs)
        if not Path(os.readlink(f"/proc/self/fd/{fd}")).is_relative_to(self.folder):
            return handle
        real_write = handle.write

        def write(data: bytes) -> int:
            self.hits += 1
            real_write(data[: len(data) // 2])
            handle.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        handle.write = write
        return handle


def test_disk_full_keeps_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch, tally: Tally) -> None:
    target = tmp_path / "packet.json"
    target.write_text("the old, complete file\n")
    full = FullDisk(tmp_path)
    monkeypatch.setattr(catalog.files.os, "fdopen", full)  # type: ignore[attr-defined]
    with pytest.raises(CatalogError, match="cannot write: No space left on device") as caught:
        write_file(target, "x" * 100_000)
    assert caught.value.file == str(target)
    assert full.hits == 1
    assert target.read_text() == "the old, complete file\n"
    assert [p.name for p in tmp_path.iterdir()] == ["packet.json"]
    tally.add("runner faults", "disk full while a file is replaced", 1)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_disk_full_while_sealing_the_packet(
    campaign: Campaign, monkeypatch: pytest.MonkeyPatch, capsys, tally: Tally
) -> None:
    full = FullDisk(campaign.root / "packets")
    monkeypatch.setattr(catalog.files.os, "fdopen", full)  # type: ignore[attr-defined]
    code, err = campaign.run(capsys)
    assert full.hits == 1
    campaign.assert_failed_cleanly(code, err)
    assert "packets/demo-bf16-" in err and "cannot write: No space left on device" in err
    arm = campaign.run_dir() / "tp1-oracle"
    assert {p.name for p in arm.iterdir()} >= {"server-A.json", "server-A.log", "server-B.json", "server-B.log"}

    monkeypatch.setattr(catalog.files.os, "fdopen", full.real)  # type: ignore[attr-defined]  # space again: the rerun resumes
    code, err = campaign.run(capsys)
    assert code == 0, err
    assert err.count("finished earlier, reusing") == 2
    assert campaign.servers_started() == 2 and len(campaign.packet_files()) == 1
    tally.add("runner faults", "disk full while the packet is sealed; rerun resumes", 1)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_disk_full_while_saving_an_attempt(
    campaign: Campaign, monkeypatch: pytest.MonkeyPatch, capsys, tally: Tally
) -> None:
    full = FullDisk(campaign.root / "runs")
    real = catalog.files.os.fdopen  # type: ignore[attr-defined]

    def only_json(fd: int, *args: Any, **kwargs: Any) -> Any:  # server logs are not written by us
        attempt = ".server-A.json" in os.readlink(f"/proc/self/fd/{fd}")
        return full(fd, *args, **kwargs) if attempt else real(fd, *args, **kwargs)

    monkeypatch.setattr(catalog.files.os, "fdopen", only_json)  # type: ignore[attr-defined]
    code, err = campaign.run(capsys)
    campaign.assert_failed_cleanly(code, err)
    assert "tp1-oracle server A failed, no packet written: " in err and "No space left on device" in err
    arm = campaign.run_dir() / "tp1-oracle"
    assert not (arm / "server-A.json").exists() and (arm / "server-A.log").exists()
    assert not [p for p in arm.iterdir() if p.name.endswith(".tmp")]
    tally.add("runner faults", "disk full while an attempt is saved", 1)


@pytest.mark.timeout(120)
def test_disk_full_while_publishing_the_site(tmp_path: Path, monkeypatch, tally: Tally, capsys) -> None:
    from builder import cli as builder_cli

    site = tmp_path / "site"
    shutil.copytree(REPO / "data", tmp_path / "data")
    (tmp_path / "packets").mkdir()
    for path in (REPO / "packets").glob("qwen*.json"):
        shutil.copy(path, tmp_path / "packets" / path.name)
    argv = ["build", "--data", str(tmp_path / "data"), "--packets", str(tmp_path / "packets"), "--out", str(site)]
    assert builder_cli.run(argv) == 0
    before = {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    (site / ".catalog-build.json").unlink()  # force a real build that rewrites the manifest
    del before[Path(".catalog-build.json")]
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "86400")  # every page changes: all are written again
    full = FullDisk(tmp_path)
    monkeypatch.setattr(catalog.files.os, "fdopen", full)  # type: ignore[attr-defined]
    inputs = sorted(p.name for p in tmp_path.iterdir())
    try:
        exit_on_user_error(lambda: builder_cli.run(argv))()
    except SystemExit as done:
        assert done.code == 1
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "Traceback" not in err and all(line.startswith(("error: ", "warning: ")) for line in lines), err
    assert next(line for line in lines if line.startswith("error: ")).endswith("cannot write: No space left on device")
    assert full.hits == 1
    after = {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    assert after == before, "the previous site changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == inputs, "a staging folder was left"
    tally.add("runner faults", "disk full while the site is published", 1)


# ---- the runner is interrupted ----


def _signal_mid_suite(campaign: Campaign, sig: signal.Signals) -> tuple[int, str]:
    """Run `python -m runner measure` as a process; send `sig` once a prompt has streamed."""
    shim = campaign.root / "python"  # a relative --vllm-python must run this very file
    shutil.copy(campaign.python, shim)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "FAKE_VLLM_PIDS": str(campaign.pids),
        "FAKE_VLLM_TOKEN_DELAY": "0.01",
    }
    argv = [sys.executable, "-m", "runner", *campaign.argv()]
    argv[argv.index("--vllm-python") + 1] = "./python"
    process = subprocess.Popen(
        argv,
        cwd=campaign.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # a terminal's Ctrl-C: the default SIGINT handler, even if this test process ignores SIGINT
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "prompt 2/12" in line:
            break
    else:
        process.wait()
        raise AssertionError("".join(seen))
    process.send_signal(sig)
    try:
        _, rest = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        _, rest = process.communicate()
        raise AssertionError(f"the runner ignored {sig.name}: " + "".join(seen) + rest) from None
    return process.returncode, "".join(seen) + rest


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_to_the_runner_mid_suite(campaign: Campaign, sig: signal.Signals, tally: Tally) -> None:
    code, err = _signal_mid_suite(campaign, sig)
    assert code == 130, err
    assert "Traceback" not in err, err
    assert "interrupted: no packet written; finished attempts and server logs stay in runs/" in err
    assert err.rstrip().endswith("interrupted")
    assert campaign.servers_started() == 1
    assert campaign.live() == [], "a server process survived the interrupted runner"
    assert campaign.packets() == []
    log = campaign.run_dir() / "tp1-oracle" / "server-A.log"
    assert "POST /v1/completions" in log.read_text()
    assert "ready after" in err  # the relative ./python ran the shim (PATH's python has no vllm)
    tally.add("runner faults", f"{sig.name} to `python -m runner measure` mid-suite", 1)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_interrupt_while_the_runner_prints(campaign: Campaign, tally: Tally) -> None:
    """Ctrl-C landing while the measuring task runs ordinary code (printing progress), not while
    it waits: the cancellation must not be lost at the next await."""
    catalog = load_catalog(campaign.root / "data", campaign.root / "packets")
    places = Places(campaign.root / "data", campaign.root / "packets", campaign.root / "runs", campaign.root)
    choice = RuntimeChoice(campaign.python, False, campaign.root / "model", 20.0)

    def progress(message: str) -> None:
        if "prompt 2/12" in message:
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            measure(catalog, CampaignRequest(model="demo"), choice, places, progress)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert campaign.servers_started() == 1, "the interrupt was lost: the campaign went on"
    assert campaign.live() == [] and campaign.packets() == []
    tally.add("runner faults", "SIGINT while the measuring task prints progress", 1)
