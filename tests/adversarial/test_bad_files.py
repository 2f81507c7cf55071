"""Hand-made hostile files through the two command lines, `python -m catalog.verify` and
`python -m builder build`: each is refused with `error:` lines naming the file, exit 1, no
traceback, no hang (alias bombs, deep nesting, a FIFO), and nothing written anywhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from builder import cli as builder_cli
from catalog import verify
from catalog.packets.canonical import canonical_json
from testkit.hostile_files import CASES, PACKET, plant
from tests.adversarial.support import REPO, Tally, run_main, snapshot


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """data/ and the small real packets with their signatures (the larger measured demo packet
    only slows the loads)."""
    shutil.copytree(REPO / "data", tmp_path / "data")
    (tmp_path / "packets").mkdir()
    for path in sorted((REPO / "packets").glob("qwen*.json")):  # the packets and their .dsse.json
        shutil.copy(path, tmp_path / "packets" / path.name)
    return tmp_path


def assert_clean_refusal(code: int, err: str, planted: Path) -> None:
    assert code == 1, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines and all(line.startswith(("error: ", "warning: ")) for line in lines), err
    assert any(str(planted) in line for line in lines if line.startswith("error: ")), err


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(CASES))
def test_hostile_file_is_refused_by_verify_and_build(
    tree: Path, name: str, capsys: pytest.CaptureFixture[str], tally: Tally
) -> None:
    target, how = CASES[name]
    planted = plant(tree, target, how)
    site = tree / "site"
    site.mkdir()
    (site / "index.html").write_text("the previous site")
    before = snapshot(tree)
    data, packets = str(tree / "data"), str(tree / "packets")

    memory_bound = any(word in name for word in ("laughs", "bomb", "nested", "digit", "huge"))
    if memory_bound:
        tracemalloc.start()
    code, err = run_main(verify.main, ["catalog.verify", "--data", data, "--packets", packets], capsys)
    if memory_bound:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 400 * 2**20, f"{name}: verify peaked at {peak / 2**20:.0f} MB"
    assert_clean_refusal(code, err, planted)  # how fast: bench/refusal_bench.py

    argv = ["builder", "build", "--data", data, "--packets", packets, "--out", str(site)]
    code, err = run_main(builder_cli.main, argv, capsys)
    assert_clean_refusal(code, err, planted)
    assert (site / "index.html").read_text() == "the previous site"
    assert snapshot(tree) == before, "a refused input still wrote a file"
    tally.add("fuzzing", "hand-made hostile files (verify and build)", 2)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_real_command_lines_print_error_lines_only(tree: Path, tally: Tally) -> None:
    """The same through `python -m`: several broken files at once, one `error:` line for each."""
    planted = [
        plant(tree, *CASES[name]) for name in ("billion laughs (YAML aliases)", "NaN in a JSON packet", "NUL byte")
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for command in (
        [sys.executable, "-m", "catalog.verify", "--data", "data", "--packets", "packets"],
        [sys.executable, "-m", "builder", "build", "--data", "data", "--packets", "packets", "--out", "site"],
    ):
        out = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 1, out.stderr
        assert "Traceback" not in out.stderr
        lines = out.stderr.strip().splitlines()
        assert all(line.startswith(("error: ", "warning: ")) for line in lines), out.stderr
        for path in planted:
            assert any(path.relative_to(tree).as_posix() in line for line in lines), (path, out.stderr)
        assert not (tree / "site").exists()
        tally.add("fuzzing", "hostile files through python -m (verify and build)", len(planted))


def test_valid_json_re_encoded_still_verifies(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The clean baseline the cases above start from loads; its bytes are the canonical encoding
    of its content (any other spelling is refused: tests/adversarial/test_tampering.py)."""
    path = tree / PACKET
    original = path.read_bytes()
    path.write_bytes(canonical_json(json.loads(original)) + b"\n")
    assert path.read_bytes() == original
    code, err = run_main(
        verify.main, ["catalog.verify", "--data", str(tree / "data"), "--packets", str(tree / "packets")], capsys
    )
    assert code == 0, err
