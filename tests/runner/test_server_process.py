"""VllmServer's lifecycle against the fake vLLM (testkit/fake_vllm) and small stand-in programs."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from runner.server import ServerError, VllmServer, find_free_port, is_port_free, live_group_members, stop_process


def python_argv(code: str, port: int) -> list[str]:
    return [sys.executable, "-c", code, str(port), "--port", str(port)]


@pytest.mark.slow
def test_ready_server_reports_models_and_teardown_kills_the_whole_group(
    tmp_path: Path, vllm_shim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake vLLM prints its cache folder and leaves behind an engine child that ignores
    SIGTERM, so teardown must escalate to SIGKILL on the whole process group."""
    monkeypatch.setenv("FAKE_VLLM_STUBBORN", "1")
    monkeypatch.setenv("FAKE_VLLM_LOG_ENV", "VLLM_CACHE_ROOT")
    port = find_free_port()
    argv = [str(vllm_shim), "-m", "vllm.entrypoints.openai.api_server", "--port", str(port)]
    server = VllmServer(argv, port=port, run_dir=tmp_path, stop_grace_s=1.0)
    with server:
        assert server.served_models == ["fake"]
        assert server.startup_s is not None and server.startup_s > 0
        assert server.base_url == f"http://127.0.0.1:{port}"
        pgid = server.pid
        assert pgid is not None
        assert len(live_group_members(pgid)) == 2  # the server and its SIGTERM-proof child
        assert server.is_running
    assert live_group_members(pgid) == []
    assert not server.is_running
    assert is_port_free(port)
    assert f"environment VLLM_CACHE_ROOT={tmp_path / 'compile-cache' / 'vllm'}" in server.log_tail()
    assert server.env_overrides["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "compile-cache" / "inductor")


@pytest.mark.slow
def test_early_exit_raises_with_exit_code_and_log_tail(tmp_path: Path) -> None:
    port = find_free_port()
    code = "import sys; print('CUDA? no: fatal config error', flush=True); sys.exit(3)"
    with pytest.raises(ServerError, match="exited with code 3 during startup") as caught:
        VllmServer(python_argv(code, port), port=port, run_dir=tmp_path).start()
    assert "fatal config error" in caught.value.log_tail
    assert "\n" not in str(caught.value)
    assert any("fatal config error" in note for note in caught.value.__notes__)


@pytest.mark.slow
def test_lost_port_race_is_named(tmp_path: Path) -> None:
    port = find_free_port()
    code = "import sys; print('OSError: [Errno 98] Address already in use', flush=True); sys.exit(1)"
    with pytest.raises(ServerError, match="port taken by another process first"):
        VllmServer(python_argv(code, port), port=port, run_dir=tmp_path).start()


@pytest.mark.slow
def test_missed_health_deadline_raises_and_leaves_nothing_running(tmp_path: Path) -> None:
    port = find_free_port()
    server = VllmServer(
        python_argv("import time; time.sleep(60)", port), port=port, run_dir=tmp_path, health_deadline_s=1.0
    )
    with pytest.raises(ServerError, match="not ready within 1 s"):
        server.start()
    assert server.pid is None


def test_port_in_argv_must_match(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="--port '1234' but the server port is 4321"):
        VllmServer(["x", "--port", "1234"], port=4321, run_dir=tmp_path)
    with pytest.raises(ServerError, match="--port '1' but"):
        VllmServer(["x", "--port=1"], port=2, run_dir=tmp_path)


@pytest.mark.slow
def test_busy_port_is_refused_before_starting(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert not is_port_free(port)
        with pytest.raises(ServerError, match="already in use"):
            VllmServer(python_argv("pass", port), port=port, run_dir=tmp_path).start()


@pytest.mark.slow
def test_non_empty_compile_cache_is_refused(tmp_path: Path) -> None:
    (tmp_path / "compile-cache").mkdir()
    (tmp_path / "compile-cache" / "stale").write_text("old kernels")
    port = find_free_port()
    with pytest.raises(ServerError, match="not empty"):
        VllmServer(python_argv("pass", port), port=port, run_dir=tmp_path).start()


def test_missing_executable_raises(tmp_path: Path) -> None:
    port = find_free_port()
    with pytest.raises(ServerError, match="cannot execute"):
        VllmServer([str(tmp_path / "no-such-python")], port=port, run_dir=tmp_path).start()


def test_stop_process_kills_a_child_that_ignores_sigterm_and_leaves_a_finished_one() -> None:
    """The one way a benchmark's server or an energy reader is stopped (runner.server.stop_process)."""
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"  # its handler is set
    stop_process(stubborn, grace_s=0.2)
    assert stubborn.returncode == -signal.SIGKILL
    stubborn.stdout.close()
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    stop_process(done, grace_s=0.2)
    assert done.returncode == 0
