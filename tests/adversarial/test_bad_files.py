"""Hand-made hostile files through the two command lines, `python -m catalog.verify` and
`python -m builder build`: each is refused with `error:` lines naming the file, exit 1, no
traceback, no hang (alias bombs, deep nesting, a FIFO), and nothing written anywhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from builder import cli as builder_cli
from catalog import verify
from catalog.canonical import canonical_json
from tests.adversarial.support import REPO, Tally, run_main, snapshot

RECIPE = "data/models/qwen3.5-9b.yaml"
HARDWARE = "data/hardware.yaml"
PACKET = "packets/qwen3.5-9b-fp8-dynamic-c4b87b99.json"  # compact canonical JSON, one line

LAUGHS = ['lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
LAUGHS += [f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)]
BILLION_LAUGHS = "\n".join(LAUGHS) + "\n"


def _inside_a_field(text: str) -> str:
    """A bomb built where the schema accepts nested values: a variant's docker_image map of maps,
    under hardware_overrides. 10^12 values once expanded, from 4 KB of text."""
    inner = "{" + ", ".join(f"j{j}: x" for j in range(1000)) + "}"
    images = "{" + ", ".join((f"k0: &inner {inner}" if i == 0 else f"k{i}: *inner") for i in range(1000)) + "}"
    hardware = ", ".join(
        (f"h0: {{docker_image: &img {images}}}" if i == 0 else f"h{i}: {{docker_image: *img}}") for i in range(1000)
    )
    return text.replace(
        "variants:\n  default:\n", f"variants:\n  default:\n    hardware_overrides: {{{hardware}}}\n", 1
    )


CASES: dict[str, tuple[str, Callable[[str], str | bytes] | str]] = {
    "billion laughs (YAML aliases)": (RECIPE, lambda text: BILLION_LAUGHS + text),
    "alias bomb inside accepted fields": (RECIPE, _inside_a_field),
    "100,000 nested brackets in YAML": (RECIPE, lambda text: text + "\nextra: " + "[" * 100_000 + "]" * 100_000 + "\n"),
    "100,000 nested brackets in JSON": (PACKET, lambda text: '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    "100,000-digit integer in YAML": (
        HARDWARE,
        lambda text: text.replace("value: 608,", "value: " + "9" * 100_000 + ","),
    ),
    "100,000-digit integer in JSON": (
        PACKET,
        lambda text: text.replace('"max_tokens":512', '"max_tokens":' + "9" * 100_000),
    ),
    "NaN in a JSON packet": (PACKET, lambda text: text.replace('"max_tokens":512', '"max_tokens":NaN')),
    "Infinity in a JSON packet": (PACKET, lambda text: text.replace('"temperature":0.0', '"temperature":Infinity')),
    "1e999 in a JSON packet": (PACKET, lambda text: text.replace('"temperature":0.0', '"temperature":1e999')),
    ".inf in hardware": (HARDWARE, lambda text: text.replace("value: 608,", "value: .inf,")),
    ".nan in hardware": (HARDWARE, lambda text: text.replace("value: 608,", "value: .nan,")),
    "lone surrogate escape in JSON": (PACKET, lambda text: text.replace('"title":"', '"title":"\\ud800', 1)),
    "lone surrogate escape in YAML": (RECIPE, lambda text: text.replace('title: "', 'title: "\\udc00', 1)),
    "duplicate key in YAML": (RECIPE, lambda text: text.replace("meta:\n", "meta:\n  title: twice\n", 1)),
    "duplicate key in JSON": (PACKET, lambda text: text.replace("{", '{"title":"twice",', 1)),
    "binary garbage": (RECIPE, lambda text: bytes(range(256)) * 16),
    "UTF-16 with a byte order mark": (RECIPE, lambda text: text.encode("utf-16")),
    "NUL byte": (HARDWARE, lambda text: text.replace("schema_version", "schema\x00version", 1)),
    "empty file": (RECIPE, lambda text: ""),
    "a list instead of a mapping": (PACKET, lambda text: "[1, 2, 3]"),
    "truncated JSON": (PACKET, lambda text: text[: len(text) // 2]),
    "YAML python tag": (RECIPE, lambda text: "!!python/object/apply:os.system ['touch pwned']\n"),
    "two YAML documents": (RECIPE, lambda text: text + "\n---\nmeta: {}\n"),
    "unknown key": (RECIPE, lambda text: text.replace("meta:\n", "meta:\n  colour: red\n", 1)),
    "huge string (5 MB title)": (PACKET, lambda text: text.replace('"title":"', '"title":"' + "A" * 5_000_000, 1)),
    "directory named like a recipe": ("data/models/dir.yaml", "directory"),
    "symlink loop named like a packet": ("packets/loop.json", "symlink loop"),
    "named pipe (FIFO) named like a recipe": ("data/models/fifo.yaml", "fifo"),
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """data/ and the small real packets with their signatures (the larger measured demo packet
    only slows the loads)."""
    shutil.copytree(REPO / "data", tmp_path / "data")
    (tmp_path / "packets").mkdir()
    for path in sorted((REPO / "packets").glob("qwen*.json")):  # the packets and their .dsse.json
        shutil.copy(path, tmp_path / "packets" / path.name)
    return tmp_path


def plant(tree: Path, target: str, how: Callable[[str], str | bytes] | str) -> Path:
    path = tree / target
    if how == "directory":
        path.mkdir()
    elif how == "symlink loop":
        path.symlink_to(path.name)
    elif how == "fifo":
        os.mkfifo(path)
    else:
        assert callable(how)
        original = path.read_text()
        content = how(original)
        assert content != original, f"the edit of {target} changed nothing: it no longer matches the file"
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


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
    started = time.perf_counter()
    code, err = run_main(verify.main, ["catalog.verify", "--data", data, "--packets", packets], capsys)
    elapsed = time.perf_counter() - started
    if memory_bound:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 400 * 2**20, f"{name}: verify peaked at {peak / 2**20:.0f} MB"
    assert_clean_refusal(code, err, planted)
    assert elapsed < 30, f"{name}: verify took {elapsed:.1f} s"

    argv = ["builder", "build", "--data", data, "--packets", packets, "--out", str(site)]
    code, err = run_main(builder_cli.main, argv, capsys)
    assert_clean_refusal(code, err, planted)
    assert (site / "index.html").read_text() == "the previous site"
    assert snapshot(tree) == before, "a refused input still wrote a file"
    tally.add("fuzzing", "hand-made hostile files (verify and build)", 2)


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
