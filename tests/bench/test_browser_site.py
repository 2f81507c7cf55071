"""The browser group builds the site it measures when no builder run left one, as the builder
group builds it (bench/builder_bench.py ensure_browser_site): `python -m bench --only browser` on
a fresh checkout failed with 'no built site at bench/out/site-browser'."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import builder_bench, catalog_gen


@pytest.mark.slow
def test_a_missing_browser_site_is_built_the_builder_way_then_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site-browser"
    for module in (builder_bench, catalog_gen):
        monkeypatch.setattr(module, "OUT", tmp_path)
    monkeypatch.setattr(builder_bench, "BROWSER_SITE", site)
    monkeypatch.setattr(builder_bench, "BROWSER_SIZE", (1, 2))  # one family of two packets: seconds
    said: list[str] = []

    assert builder_bench.ensure_browser_site(said.append) == site
    assert (site / "models" / "bench-0000" / "index.html").exists()
    assert len(list((site / "packets").glob("*.dsse.json"))) == 3  # the two, and the one the builder adds
    assert said[0].startswith(f"browser: no site at {site}")
    assert not (tmp_path / "site-browser-building").exists() and not (tmp_path / "cache-browser").exists()

    def no_build(*args: object) -> None:
        raise AssertionError("a site that is there is not built again")

    monkeypatch.setattr(builder_bench, "_build", no_build)
    assert builder_bench.ensure_browser_site(said.append) == site
