"""Hand-made hostile files, each planted into a copy of data/ and packets/: alias bombs, deep
nesting, huge numbers, non-finite values, bad encodings, special files. tests/adversarial/
test_bad_files.py checks each is refused cleanly; bench/refusal_bench.py times the refusals."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

RECIPE = "data/models/qwen3.5-9b.yaml"
HARDWARE = "data/hardware.yaml"
PACKET = "packets/qwen3.5-9b-fp8-dynamic-c48f580e.json"  # compact canonical JSON, one line

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
