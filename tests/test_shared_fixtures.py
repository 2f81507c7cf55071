"""The shared `browser` fixture (tests/conftest.py) without Chromium: a skip on a developer's
machine, a failure in CI, as the real-vLLM tests do."""

from __future__ import annotations

import pytest

import tests.conftest as shared

pytest_plugins = ["pytester"]

USES_THE_BROWSER = """
from tests.conftest import browser  # noqa: F401 - the shared fixture, under test

def test_needs_a_browser(browser):
    pass
"""


@pytest.mark.parametrize(("ci", "outcome"), [("true", {"errors": 1}), ("", {"skipped": 1})])
def test_a_missing_chromium_fails_in_ci_and_skips_elsewhere(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str, outcome: dict[str, int]
) -> None:
    monkeypatch.setattr(shared, "ensure_chromium", lambda: False)
    monkeypatch.setenv("CI", ci)
    pytester.makepyfile(test_browser_missing=USES_THE_BROWSER)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(**outcome)
    reason = "CI must not skip the browser tests" if ci else "Debian's chromium is not installed"
    result.stdout.fnmatch_lines([f"*{reason}*"])
