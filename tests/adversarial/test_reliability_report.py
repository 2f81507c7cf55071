"""docs/reliability.md is the report the suite's counters render: run after every other test of
the suite (conftest.py orders it last), when the whole suite ran and passed under the full
hypothesis example counts. `make reliability` (RELIABILITY_WRITE=1) writes the file instead."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from tests.adversarial.report import render_report
from tests.adversarial.support import REPORT, RUN, TALLY
from tests.profiles import FAST_PROFILE


def test_docs_reliability_md_is_current() -> None:
    incomplete = RUN.incomplete()
    if incomplete is None and settings.get_current_profile_name() == FAST_PROFILE:
        incomplete = "the fast hypothesis profile tries fewer inputs"
    if incomplete is not None and os.environ.get("RELIABILITY_WRITE") == "1":
        pytest.fail(f"docs/reliability.md not written: the report counts the whole suite, but {incomplete}")
    if incomplete is not None:
        pytest.skip(f"the report counts the whole suite: {incomplete}")
    gaps = sorted(nodeid.split("::", 1)[1] for nodeid in RUN.xfailed)
    text = render_report(dict(TALLY.counts), len(RUN.passed), gaps)
    if os.environ.get("RELIABILITY_WRITE") == "1":
        REPORT.write_text(text, encoding="utf-8")
    current = REPORT.read_text(encoding="utf-8") if REPORT.exists() else ""
    assert current == text, "docs/reliability.md is stale: run make reliability"
