"""The adversarial suite's fixtures, and docs/reliability.md written from its counters.

Each test records what it tried with `tally.add(area, attack, count)` once it has checked that
every input survived (loaded, or refused with one line naming the file; no traceback, hang or
write). When every test of the suite ran and passed (or is a known gap marked xfail, which the
report lists), the session writes docs/reliability.md from the counts: deterministic (hypothesis
runs derandomized), so a rerun leaves it unchanged.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.local_browser import chromium, ensure_chromium
from tests.adversarial.fakes import campaign  # noqa: F401 - a fixture for every module
from tests.adversarial.report import render_report
from tests.adversarial.support import FAKE_VLLM, HERE, REPO, REPORT, TALLY, Tally

# ---- write docs/reliability.md only when the whole suite ran and passed ----

_state: dict[str, set[str]] = {"collected": set(), "passed": set(), "failed": set(), "xfailed": set()}


def _ours(item_path: str) -> bool:
    return Path(item_path).resolve().is_relative_to(HERE)


def pytest_collection_finish(session: pytest.Session) -> None:
    _state["collected"] = {item.nodeid for item in session.items if _ours(str(item.path))}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.nodeid not in _state["collected"]:
        return
    if report.when == "call" and report.passed:
        _state["passed"].add(report.nodeid)
    elif report.when == "call" and report.skipped and hasattr(report, "wasxfail"):
        _state["xfailed"].add(report.nodeid)  # a known gap, listed in the report as such
    elif report.failed or report.skipped:
        _state["failed"].add(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    modules = {path.name for path in HERE.glob("test_*.py")}
    ran = {nodeid.split("::")[0].rsplit("/", 1)[-1] for nodeid in _state["collected"]}
    deselected = session.config.getoption("keyword") or session.config.getoption("markexpr")
    complete = ran == modules and not deselected and not _state["failed"]
    if complete and _state["passed"] | _state["xfailed"] == _state["collected"]:
        gaps = sorted(nodeid.split("::", 1)[1] for nodeid in _state["xfailed"])
        text = render_report(dict(TALLY.counts), len(_state["passed"]), gaps)
        if not REPORT.exists() or REPORT.read_text() != text:
            REPORT.write_text(text)


# ---- fixtures ----


@pytest.fixture(scope="session")
def tally() -> Tally:
    return TALLY


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A private copy of data/ and packets/ (the real files every attack starts from)."""
    shutil.copytree(REPO / "data", tmp_path / "data")
    shutil.copytree(REPO / "packets", tmp_path / "packets")
    return tmp_path


@pytest.fixture(scope="session")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One hostile copy of the whole catalog per session (tests/adversarial/hostile.py); tests
    that change it work on a copy. `hostile / "carried"` holds how many fields carry the payload."""
    from tests.adversarial.hostile import hostile_catalog

    root = tmp_path_factory.mktemp("hostile")
    _, _, carried = hostile_catalog(root)
    (root / "carried").write_text(str(carried))
    return root


@pytest.fixture(scope="session")
def vllm_shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A "python" whose `-m vllm.entrypoints.openai.api_server` is the fake server: what
    runner.runtime.LocalRuntime runs, so the runner's real code path drives it."""
    folder = tmp_path_factory.mktemp("shim")
    python = folder / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{FAKE_VLLM}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return python


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No FAKE_VLLM_* settings leak between tests."""
    for name in list(os.environ):
        if name.startswith("FAKE_VLLM_"):
            monkeypatch.delenv(name)
    yield


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's Chromium, as tests/browser drives it. Module-scoped: the runner's asyncio.run
    cannot start while playwright lives in this thread."""
    if not ensure_chromium():
        pytest.skip("Debian's chromium is not installed (scripts/ensure-chromium.sh)")
    with chromium() as launched:
        yield launched
