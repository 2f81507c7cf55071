"""Shared by the adversarial tests: where things are, the counters, and a file-tree snapshot."""

from __future__ import annotations

import shutil
import stat
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
REPORT = REPO / "docs" / "reliability.md"
REPORT_CHECK = "test_reliability_report.py"  # runs last; not one of the tests it counts


def trusting_data(dest: Path) -> Path:
    """A copy of data/ whose keys.yaml lists the project's keys and the test session's: the real
    committed packets and test-signed ones verify side by side. Returns `dest`."""
    from tests.catalog.factories import session_key_entries

    shutil.copytree(REPO / "data", dest, dirs_exist_ok=True)
    keys = dest / "keys.yaml"
    listed = keys.read_text(encoding="utf-8").rstrip("\n") + "\n" + session_key_entries()
    keys.write_text(listed + "test_catalog: true  # the session's throwaway keys are undated\n", encoding="utf-8")
    return dest


@dataclass
class Tally:
    """What the suite tried, by area and attack; filled by tests once their inputs survived."""

    counts: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))

    def add(self, area: str, attack: str, count: int = 1) -> None:
        self.counts[(area, attack)] += count


TALLY = Tally()


@dataclass
class SuiteRun:
    """This session's run of the suite (filled by conftest.py's hooks): which of its tests were
    collected and how each ended, and whether -k or -m left some out."""

    collected: set[str] = field(default_factory=set)
    passed: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    xfailed: set[str] = field(default_factory=set)
    deselected: bool = False

    def incomplete(self) -> str | None:
        """Why the counts are not the whole suite's, or None when they are."""
        modules = {path.name for path in HERE.glob("test_*.py")} - {REPORT_CHECK}
        ran = {nodeid.split("::")[0].rsplit("/", 1)[-1] for nodeid in self.collected}
        if self.deselected or ran != modules:
            return "only part of the suite was selected"
        if self.failed or self.passed | self.xfailed != self.collected:
            return "not every test of the suite passed"
        return None


RUN = SuiteRun()


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and mtime: to prove nothing was written."""
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode):
            found[path.relative_to(root).as_posix()] = (info.st_size, info.st_mtime_ns)
    return found


def run_main(main: Callable[[], object], argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """A command line's `main` in this process, as `python -m` runs it: exit code and stderr."""
    saved = sys.argv
    sys.argv = argv
    try:
        main()
        code = 0
    except SystemExit as done:
        code = int(done.code or 0)
    finally:
        sys.argv = saved
    captured = capsys.readouterr()
    return code, captured.err
