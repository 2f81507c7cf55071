"""The adversarial suite's fixtures, and the record of its run that docs/reliability.md is
rendered from.

Each test records what it tried with `tally.add(area, attack, count)` once it has checked that
every input survived (loaded, or refused with one line naming the file; no traceback, hang or
write). test_reliability_report.py, run after every other test of the suite, renders the report
from the counts when the whole suite ran and passed (or is a known gap marked xfail, which the
report lists) and checks docs/reliability.md against it; `make reliability` writes it. The counts
are deterministic (hypothesis runs derandomized), so a rerun renders the same text.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.adversarial.fakes import campaign, clean_env  # noqa: F401 - fixtures for every module
from tests.adversarial.support import HERE, REPO, REPORT_CHECK, RUN, TALLY, Tally

# ---- the record of this session's run of the suite ----


def _ours(item: pytest.Item) -> bool:
    return item.path.resolve().is_relative_to(HERE) and item.path.name != REPORT_CHECK


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The report check runs after every test it counts (the order is otherwise kept)."""
    items[:] = sorted(items, key=lambda item: item.path.name == REPORT_CHECK and item.path.parent == HERE)


def pytest_collection_finish(session: pytest.Session) -> None:
    RUN.collected = {item.nodeid for item in session.items if _ours(item)}
    RUN.deselected = bool(session.config.getoption("keyword") or session.config.getoption("markexpr"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.nodeid not in RUN.collected:
        return
    if report.when == "call" and report.passed:
        RUN.passed.add(report.nodeid)
    elif report.when == "call" and report.skipped and hasattr(report, "wasxfail"):
        RUN.xfailed.add(report.nodeid)  # a known gap, listed in the report as such
    elif report.failed or report.skipped:
        RUN.failed.add(report.nodeid)


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
