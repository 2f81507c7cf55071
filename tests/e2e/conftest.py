"""Session fixtures for the real-vLLM smoke tests: one demo model, few servers, logs kept.

Without `.venv-vllm` the tests skip locally, but fail in CI (env CI set): there a missing
vLLM environment is a broken pipeline, not a reason to pass.

No child outlives the session: every runner and server started here is tagged (processes.py),
stopped by its test or fixture, and swept at session end; a leftover fails the session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from runner.server import VllmServer, find_free_port, vllm_serve_argv  # noqa: E402
from tests.e2e.processes import TAG_VAR, new_tag, stop_all  # noqa: E402

SERVED_MODEL = "demo"
# Fastest reliable settings measured for the tiny model on 2 cores: eager mode starts in about
# half the time of torch.compile, and decode speed is dominated by per-step overhead anyway.
DEMO_SERVER_ARGS = [
    "--served-model-name",
    SERVED_MODEL,
    "--dtype",
    "bfloat16",
    "--max-model-len",
    "4096",
    "--max-num-seqs",
    "1",
    "--enforce-eager",
    "--no-enable-prefix-caching",
    "--enable-prompt-tokens-details",
]
NGRAM_SPEC_CONFIG = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3,"prompt_lookup_min":2}'
DEMO_SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}
# Startup is ~60-100 s on an idle host but took 285 s while other sessions ran vLLM here too.
HEALTH_DEADLINE_S = 600.0

_running_servers: dict[str, VllmServer] = {}


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """No runner or vLLM server of this session survives it: stop what is still running, and
    fail the session if anything escaped its test's own teardown."""
    running, orphans = stop_all()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if running and reporter is not None:
        reporter.write_line(f"stopped at session end, still running: {', '.join(running)}")
    if orphans:
        lines = "\n".join(f"  {leftover}" for leftover in orphans)
        message = f"test processes outlived their test (now stopped):\n{lines}"
        if reporter is not None:
            reporter.write_sep("=", "leftover processes", red=True)
            reporter.write_line(message)
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    python = Path(os.environ.get("VLLM_VENV", REPO / ".venv-vllm")) / "bin" / "python"
    if python.exists():
        return python
    message = f"no vLLM environment at {python.parent.parent}: run scripts/install-vllm-cpu.sh"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI must not skip the real-vLLM tests)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def demo_model_dir(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo-model") / "demo"
    completed = subprocess.run(
        [str(vllm_python), "-m", "runner.demo_model", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if completed.returncode != 0:
        pytest.fail(f"demo model generation failed:\n{completed.stdout}\n{completed.stderr}")
    return out


SERVER_EXTRA_ARGS = {
    "plain": [],
    "ngram": ["--speculative-config", NGRAM_SPEC_CONFIG],
}
# vLLM's "auto" binding pins every server's worker to CPU 0 (CPU 1 is reserved for the API
# processes), so two servers started together would share one core; give each its own.
SERVER_CPU = {"plain": "0", "ngram": "1"}


@pytest.fixture(scope="session")
def demo_servers(
    vllm_python: Path, demo_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, VllmServer]]:
    """Both servers, started in parallel: startup is mostly single-threaded imports, so two
    overlap well on 2 cores (about 80 s together instead of 150 s one after the other)."""
    run_root = tmp_path_factory.mktemp("servers")
    servers = {}
    for name, extra_args in SERVER_EXTRA_ARGS.items():
        port = find_free_port()
        argv = vllm_serve_argv(vllm_python, demo_model_dir, port, [*DEMO_SERVER_ARGS, *extra_args])
        env = {**DEMO_SERVER_ENV, "VLLM_CPU_OMP_THREADS_BIND": SERVER_CPU[name], TAG_VAR: new_tag(f"smoke-{name}")}
        servers[name] = VllmServer(
            argv, port=port, run_dir=run_root / name, env=env, health_deadline_s=HEALTH_DEADLINE_S
        )
    try:
        with ThreadPoolExecutor(max_workers=len(servers)) as pool:
            starts = [pool.submit(server.start) for server in servers.values()]
        for start in starts:
            start.result()  # re-raises the first ServerError, log tail attached as a note
        for name, server in servers.items():
            print(f"\n[e2e] {name} server ready in {server.startup_s:.1f} s, log {server.log_path}")
        _running_servers.update(servers)
        yield servers
    finally:
        _running_servers.clear()
        for server in servers.values():
            server.stop()


@pytest.fixture(scope="session")
def plain_server(demo_servers: dict[str, VllmServer]) -> VllmServer:
    return demo_servers["plain"]


@pytest.fixture(scope="session")
def ngram_server(demo_servers: dict[str, VllmServer]) -> VllmServer:
    return demo_servers["ngram"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the tail of every running server's log to a failing e2e test's report."""
    report = yield
    if report.failed:
        for name, server in _running_servers.items():
            report.sections.append((f"vLLM {name} server log tail ({server.log_path})", server.log_tail()))
    return report
