"""Paths: every identifier that becomes a file or folder name (recipe slug, hardware id, packet
slug and quantization, arm id, suite id, the runner's --model/--variant/--hardware) refuses
`../`, absolute paths and unicode look-alikes; and the builder writes nothing outside --out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from builder import cli as builder_cli
from builder.output import Targets, check_output_folder
from catalog.errors import CatalogError, UserError
from catalog.packets.canonical import canonical_json
from catalog.store.repository import load_catalog
from runner import cli as runner_cli
from tests.adversarial.support import REPO, Tally, snapshot
from tests.catalog.factories import sealed

HOSTILE_IDS = [
    "../escape",
    "../../../../tmp/escape",
    "/etc/passwd",
    "a/b",
    "a\\b",
    "..",
    ".",
    ".hidden",
    "demo/",
    "demo\n",
    "demo\x00",
    "~root",
    "%2e%2e%2fescape",
    "ｄemo",  # fullwidth d
    "dеmo",  # Cyrillic e
    "demo／x",  # fullwidth solidus
    "demo∕x",  # division slash
    "demo\u2024\u2024x",  # one dot leader, twice
    "DEMO",
    "a" * 81,
    "",
]


@pytest.fixture
def small_tree(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "data", tmp_path / "data")
    (tmp_path / "packets").mkdir()
    for path in sorted((REPO / "packets").glob("qwen*.json")):  # the packets and their .dsse.json
        shutil.copy(path, tmp_path / "packets" / path.name)
    return tmp_path


def _refused(root: Path, field: str) -> None:
    with pytest.raises(CatalogError) as caught:
        load_catalog(root / "data", root / "packets")
    text = str(caught.value)
    assert field in text, text
    assert "Traceback" not in text


def _edit_yaml(path: Path, edit: Any) -> None:
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))


def test_hostile_recipe_slug(small_tree: Path, tally: Tally) -> None:
    path = small_tree / "data" / "models" / "demo.yaml"
    original = path.read_text()
    for bad in HOSTILE_IDS:
        _edit_yaml(path, lambda d, bad=bad: d["meta"].__setitem__("slug", bad))
        _refused(small_tree, "meta.slug")
        path.write_text(original)
    tally.add("paths", "hostile recipe slugs", len(HOSTILE_IDS))


def test_look_alike_file_names(small_tree: Path, tally: Tally) -> None:
    """A recipe file whose name only looks like its slug is refused (slug must match the name)."""
    models = small_tree / "data" / "models"
    names = ["ｄemo.yaml", "dеmo.yaml", "demo .yaml", "Demo.yaml", "demo.yaml.yaml"]
    for name in names:
        (models / "demo.yaml").rename(models / name)
        _refused(small_tree, name)
        (models / name).rename(models / "demo.yaml")
    tally.add("paths", "recipe files named with look-alikes", len(names))


def test_hostile_hardware_id(small_tree: Path, tally: Tally) -> None:
    path = small_tree / "data" / "hardware.yaml"
    original = path.read_text()
    for bad in HOSTILE_IDS:
        _edit_yaml(path, lambda d, bad=bad: d["hardware"][0].__setitem__("id", bad))
        _refused(small_tree, "hardware[0].id")
        path.write_text(original)
    tally.add("paths", "hostile hardware ids", len(HOSTILE_IDS))


def test_hostile_suite_id(small_tree: Path, tally: Tally) -> None:
    path = small_tree / "data" / "suites" / "strict-v1.json"
    original = path.read_text()
    for bad in HOSTILE_IDS:
        data = json.loads(original)
        data["id"] = bad
        path.write_text(json.dumps(data))
        _refused(small_tree, "strict-v1.json")
        path.write_text(original)
    tally.add("paths", "hostile suite ids", len(HOSTILE_IDS))


@pytest.mark.parametrize("where", ["identity.model.slug", "identity.model.quantization", "arms[0].id"])
def test_hostile_ids_in_a_packet(small_tree: Path, where: str, tally: Tally) -> None:
    """Even re-sealed (hash and file name recomputed), a packet whose slug, quantization or arm id
    is not a slug never loads, so it never names a page."""
    source = next(p for p in (small_tree / "packets").glob("qwen3.5-9b-fp8-*.json") if "dsse" not in p.name)
    original = json.loads(source.read_text())
    for bad in HOSTILE_IDS:
        data = json.loads(json.dumps(original))
        if where == "arms[0].id":
            data["arms"][0]["id"] = bad
        else:
            data["identity"]["model"][where.rsplit(".", 1)[1]] = bad
        with pytest.raises(ValueError, match=r"should match pattern|should have at most|ladder|state"):
            sealed(data)  # the forger's path: states dropped and derived again, sealed with a key
        target = small_tree / "packets" / "hostile.json"
        target.write_bytes(canonical_json(data) + b"\n")
        _refused(small_tree, where)
        target.unlink()
    tally.add("paths", f"hostile {where} in a packet", len(HOSTILE_IDS))


@pytest.mark.parametrize("option", ["--model", "--variant", "--hardware"])
def test_runner_refuses_hostile_names(small_tree: Path, option: str, monkeypatch, tally: Tally) -> None:
    monkeypatch.chdir(small_tree)
    for bad in HOSTILE_IDS:
        argv = ["--runs", "runs", "measure", "--model", "demo", "--vllm-python", "/nonexistent/python"]
        if option == "--model":
            argv[argv.index("demo")] = bad
        else:
            argv += [option, bad]
        with pytest.raises(UserError) as caught:
            runner_cli.run(argv)
        assert not (small_tree / "runs").exists(), f"{option} {bad!r} created a folder"
        assert caught.value.field in (option, option.lstrip("-").upper()[:2], "MODEL", "HW"), str(caught.value)
    tally.add("paths", f"runner {option} with hostile names", len(HOSTILE_IDS))


@pytest.mark.parametrize(
    "relative",
    ["../x", "/etc/x", "a/../../x", "a//b", "", ".", "a\\b", "a/./b", "../site2/index.html", "a/..", "/"],
)
def test_output_paths_outside_the_folder_are_refused(tmp_path: Path, relative: str, tally: Tally) -> None:
    with pytest.raises(CatalogError):
        Targets(tmp_path / "site").of(relative)
    tally.add("paths", "output paths escaping the site folder", 1)


def test_build_of_a_hostile_catalog_writes_only_inside_out(tmp_path: Path, hostile: Path, tally: Tally) -> None:
    """Around the output folder sit a sibling site, a file, the inputs; after two builds (one
    fresh, one replacing) only the output folder differs."""
    shutil.copytree(hostile / "data", tmp_path / "in" / "data")
    shutil.copytree(hostile / "packets", tmp_path / "in" / "packets")
    data, packets = tmp_path / "in" / "data", tmp_path / "in" / "packets"
    (tmp_path / "site2").mkdir()
    (tmp_path / "site2" / "index.html").write_text("a sibling site")
    (tmp_path / "notes.txt").write_text("a neighbour")
    out = tmp_path / "nested" / "site"
    argv = ["build", "--data", str(data), "--packets", str(packets), "--out", str(out)]
    before = snapshot(tmp_path)
    assert builder_cli.run(argv) == 0
    recipe = data / "models" / "demo.yaml"
    recipe.write_text(recipe.read_text().replace("beginner", "advanced"))
    before["in/data/models/demo.yaml"] = snapshot(tmp_path)["in/data/models/demo.yaml"]
    assert builder_cli.run(argv) == 0
    after = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("nested/")}
    assert after == before
    assert sorted(p.name for p in (tmp_path / "nested").iterdir()) == ["site"]
    tally.add("paths", "hostile catalog built twice beside other folders", 2)


def test_dangerous_output_folders_are_refused(small_tree: Path, capsys, tally: Tally) -> None:
    other = small_tree / "documents"
    other.mkdir()
    (other / "thesis.txt").write_text("irreplaceable")
    inputs = [small_tree / "data", small_tree / "packets", Path.cwd()]
    for out in (small_tree, small_tree / "data", Path("/"), Path.home(), other, small_tree / "data" / "hardware.yaml"):
        with pytest.raises(CatalogError, match=r"refusing|not a folder"):
            check_output_folder(out, inputs)
        tally.add("paths", "dangerous --out folders", 1)
    before = snapshot(small_tree)
    argv = ["build", "--data", str(small_tree / "data"), "--packets", str(small_tree / "packets"), "--out", str(other)]
    with pytest.raises(CatalogError, match="refusing to replace"):
        builder_cli.run(argv)
    assert snapshot(small_tree) == before
