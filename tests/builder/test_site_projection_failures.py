"""A projection that fails on its data is a build warning naming the packet and arm (fatal under
--strict), and the family page shows its labelled gap; it is never silently "no projection"."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from builder.cli import run
from builder.views import projection
from catalog.errors import CatalogError
from tests.builder.factory import write_catalog


def _build(data: Path, packets: Path, out: Path, *extra: str) -> int:
    return run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out), *extra])


def _fail(*_args: object, **_kwargs: object) -> None:
    raise CatalogError("hidden size is negative", file=Path("data/models/fixture-7b.yaml"))


def _warnings(err: str) -> list[str]:
    return [line.removeprefix("warning: ") for line in err.splitlines() if line.startswith("warning: ")]


def test_a_failing_projection_warns_and_strict_fails(tmp_path, monkeypatch, capsys):
    catalog = write_catalog(tmp_path)
    assert _build(*catalog, tmp_path / "before", "--strict") == 1  # the fixture's own warnings
    before = _warnings(capsys.readouterr().err)
    assert not [w for w in before if "no projection" in w]

    monkeypatch.setattr(projection, "project_arm", _fail)
    monkeypatch.setenv(
        "XDG_CACHE_HOME", str(tmp_path / "patched-cache")
    )  # views are cached by code source, not patches
    out = tmp_path / "site"
    assert _build(*catalog, out) == 0
    failures = [w for w in _warnings(capsys.readouterr().err) if "no projection" in w]
    assert failures, "a failing projection must be reported"
    assert all(w.startswith("fixture-7b-") and ": arm " in w for w in failures)
    assert all(w.endswith("no projection: data/models/fixture-7b.yaml: hidden size is negative") for w in failures)
    page = BeautifulSoup((out / "models/fixture-7b/index.html").read_text(encoding="utf-8"), "html.parser")
    section = page.find(id="projection")
    assert section is not None
    assert projection.PROJECTION_GAP.split(":")[0] in section.get_text(" ", strip=True)

    assert _build(*catalog, tmp_path / "strict", "--strict") == 1


@pytest.mark.parametrize("error", [ZeroDivisionError("division by zero"), CatalogError("no bandwidth")])
def test_a_failing_estimate_warns(tmp_path, monkeypatch, capsys, error):
    def fail(*_args: object, **_kwargs: object) -> None:
        raise error

    catalog = write_catalog(tmp_path)
    monkeypatch.setattr(projection, "estimate_cell", fail)
    assert _build(*catalog, tmp_path / "site") == 0
    failures = [w for w in _warnings(capsys.readouterr().err) if "no estimate" in w]
    assert failures
    assert all(w.startswith("fixture-7b on ") and w.endswith(str(error)) for w in failures)
