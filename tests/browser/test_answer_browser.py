"""The family page's answer in a real browser, at 1280 and 390 px, with and without JavaScript: the
hero's "run this" command is exactly the command the packet recorded (copied by its button, or read
from the page without JavaScript), and neither the family page nor the index scrolls sideways."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from catalog.store.repository import load_catalog

pytestmark = pytest.mark.browser

FAMILY = "models/fixture-7b/index.html"
CARD = "arc_pro_b70"
WIDTHS = [1280, 390]


def _recorded(built: Path, page: Any) -> list[str]:
    """The hero's packet and arm, read from its link, and the command that arm recorded: its
    variables, then its vllm serve argv."""
    href = page.locator(f"#run-{CARD} a.run-arm").get_attribute("href")
    packet_id, arm_id = href.split("packets/")[1].split("/index.html#arm-")
    arm = load_catalog(built.parent / "data", built.parent / "packets").packets[packet_id].arm(arm_id)
    assert arm.config.argv, "the fixture's lead arm recorded its command"
    return [*(f"{k}={v}" for k, v in sorted(arm.config.env.items())), *arm.config.argv]


def _tokens(text: str) -> list[str]:
    return shlex.split(text.replace("\\\n", " "))


@pytest.mark.parametrize("width", WIDTHS)
def test_the_hero_copies_exactly_the_recorded_command(browser: Any, base_url: str, built: Path, width: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url.rstrip("/"))
    page = context.new_page()
    page.goto(base_url + FAMILY)
    button = f"button[data-copy=run-local-{CARD}]"
    page.locator(button).scroll_into_view_if_needed()
    page.click(button)
    page.wait_for_function(f"document.querySelector('{button}').textContent === 'Copied'")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert _tokens(copied) == _recorded(built, page)
    assert copied == page.locator(f"#run-local-{CARD}").inner_text()
    context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_without_javascript_the_hero_shows_the_same_command(
    browser: Any, base_url: str, built: Path, width: int
) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900}, java_script_enabled=False)
    page = context.new_page()
    page.goto(base_url + FAMILY)
    assert page.locator(f"#run-local-{CARD}").is_visible()
    assert _tokens(page.locator(f"#run-local-{CARD}").inner_text()) == _recorded(built, page)
    context.close()


@pytest.mark.parametrize("javascript", [True, False])
@pytest.mark.parametrize("width", WIDTHS)
def test_no_sideways_scroll(browser: Any, base_url: str, width: int, javascript: bool) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900}, java_script_enabled=javascript)
    page = context.new_page()
    wide = {}
    for path in (FAMILY, "index.html", "filter/hw/arc_pro_b70/index.html"):
        page.goto(base_url + path)
        scroll = page.evaluate("document.documentElement.scrollWidth")
        if scroll > width:
            wide[path] = scroll
    assert wide == {}
    context.close()
