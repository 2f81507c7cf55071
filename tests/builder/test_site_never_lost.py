"""The build never loses the site: missing inputs are errors, not an empty catalog; a build that
would drop most packets refuses; the swap into place survives SIGKILL at any instant; the no-op
fast path refuses what a full build refuses; an unwritable output is one line, no traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builder.factory import REPO, write_catalog


def _cli(*argv: str, module: str = "builder") -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", module, *argv]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)


def _build(data: Path, packets: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _cli("build", "--data", str(data), "--packets", str(packets), "--out", str(out), *extra)


def _one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.fixture
def catalog(tmp_path: Path) -> tuple[Path, Path]:
    return write_catalog(tmp_path)


# ---- 1. a missing input folder is an error naming it, never an empty catalog ----


@pytest.mark.parametrize("missing", ["packets", "data", "data/models", "data/suites", "data/hardware.yaml"])
def test_build_refuses_a_missing_input(tmp_path, catalog, missing):
    data, packets = catalog
    out = tmp_path / "site"
    assert _build(data, packets, out).returncode == 0
    before = (out / ".catalog-build.json").read_bytes()
    gone = tmp_path / missing
    shutil.rmtree(gone) if gone.is_dir() else gone.unlink()
    _one_line_error(_build(data, packets, out), str(gone))
    assert (out / ".catalog-build.json").read_bytes() == before


@pytest.mark.parametrize("option", ["--packets", "--data"])
def test_build_refuses_a_mistyped_folder(tmp_path, catalog, option):
    data, packets = catalog
    typo = tmp_path / "no-such-folder"
    args = {"--data": data, "--packets": packets, option: typo}
    _one_line_error(_build(args["--data"], args["--packets"], tmp_path / "site"), str(typo), "no such folder")
    assert not (tmp_path / "site").exists()


def test_an_input_that_is_a_file_not_a_folder_is_refused(tmp_path, catalog):
    data, _ = catalog
    (tmp_path / "packets.txt").write_text("not a folder")
    _one_line_error(_build(data, tmp_path / "packets.txt", tmp_path / "site"), "packets.txt", "not a folder")


def test_verify_refuses_a_missing_packets_folder(tmp_path, catalog):
    data, _ = catalog
    result = _cli("--data", str(data), "--packets", str(tmp_path / "gone"), module="catalog.verify")
    _one_line_error(result, str(tmp_path / "gone"))
    assert "verified" not in result.stdout


def test_an_empty_packets_folder_is_still_a_catalog(tmp_path):
    data, packets = write_catalog(tmp_path, packets=False)
    assert not any(packets.iterdir())
    result = _build(data, packets, tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
