"""`make verify`: every data file re-validated, every packet's bytes, name and signature checked
and its evidence re-derived, and each failure one plain line naming the file (and line where
known) and the field; nothing written."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from catalog.errors import CatalogError, CatalogErrors
from catalog.model.arrays import decode_uint32, encode_uint32
from catalog.model.metrics import compare_rows
from catalog.model.packet import PromptRow
from catalog.packets.canonical import canonical_json, pretty_json
from catalog.packets.keys import load_keys
from catalog.packets.layout import signature_path
from catalog.packets.seal import Sealed, write_packet
from catalog.packets.verify import read_packet
from catalog.store.repository import Catalog, load_catalog
from tests.catalog.factories import (
    REPO,
    SPEC_ARM,
    make_rows,
    make_server,
    measured_draft,
    published_arm,
    published_draft,
    sealed,
    strict_suite,
)

# --- helpers -------------------------------------------------------------------------------


def load(tree: Path) -> Catalog:
    return load_catalog(tree / "data", tree / "packets")


def problems(tree: Path) -> list[CatalogError]:
    with pytest.raises(CatalogError) as info:
        load(tree)
    error = info.value
    return error.errors if isinstance(error, CatalogErrors) else [error]


def only_problem(tree: Path) -> CatalogError:
    found = problems(tree)
    assert len(found) == 1, [str(e) for e in found]
    return found[0]


def put(tree: Path, packet: Sealed) -> Path:
    return write_packet(packet, tree / "packets")


def measured(**kw: Any) -> Sealed:
    """A measured packet sealed with the test measurer key (the tree's keys.yaml lists it)."""
    return sealed(measured_draft(**kw))


def set_token(row: dict[str, Any], index: int, value: int) -> None:
    """Change one token id of a row in JSON form (base64 uint32)."""
    ids = decode_uint32(row["token_ids"])
    ids[index] = value
    row["token_ids"] = encode_uint32(ids)


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing `needle`."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def edit_text(path: Path, change: Callable[[str], str]) -> str:
    before = path.read_text(encoding="utf-8")
    after = change(before)
    assert after != before
    path.write_text(after, encoding="utf-8")
    return after


def edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit a data file (suites are written pretty)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(pretty_json(data), encoding="utf-8")


def edit_packet(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit a packet as a careful forger would: written back in canonical form, so only the
    digest (the file name) and the signature can give the edit away."""
    data = json.loads(path.read_bytes())
    change(data)
    path.write_bytes(canonical_json(data) + b"\n")


def snapshot(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every file and folder under root with its content hash, size and mtime."""
    found: dict[str, tuple[str, int, int]] = {}
    for path in sorted(root.rglob("*")):
        stat = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        found[str(path.relative_to(root))] = (digest, stat.st_size if path.is_file() else 0, stat.st_mtime_ns)
    return found


def run_verify(tree: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "catalog.verify",
            "--data",
            str(tree / "data"),
            "--packets",
            str(tree / "packets"),
            *extra,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


RECIPE = Path("data/models/qwen3.5-9b.yaml")


# --- the good case -------------------------------------------------------------------------


def test_a_clean_tree_loads(tree: Path) -> None:
    files = [
        measured(),
        measured(g3_diverges=True),
        sealed(published_draft([published_arm("tp1-mtp0", [50.0, 50.2], gates=[("G1", 12, 12, True)])])),
    ]
    for item in files:
        put(tree, item)
    good, withheld, imported = (item.packet for item in files)
    catalog = load(tree)
    assert set(catalog.packets) == {good.id, withheld.id, imported.id}
    assert catalog.packets[good.id] == good
    assert all(p.signed for p in catalog.packets.values())
    assert catalog.packet_paths[good.id] == tree / "packets" / f"{good.id}.json"
    assert [p.id for p in catalog.packets_of("qwen3.5-9b")] == sorted([good.id, withheld.id, imported.id])
    assert catalog.packets_of("qwen3.5-4b") == []
    assert {"qwen3.5-9b", "qwen3.5-4b"} <= set(catalog.recipes)
    assert set(catalog.suites) == {"strict-v1"}
    assert set(catalog.canary_sets) == {"canaries-v1"}
    assert "arc_pro_b70" in catalog.hardware


def test_a_tree_without_packets_is_an_error(tree: Path) -> None:
    """A missing packets folder is a mistake (a mistyped --packets), never an empty catalog."""
    shutil.rmtree(tree / "packets")
    with pytest.raises(CatalogError) as caught:
        load(tree)
    assert str(caught.value) == f"{tree / 'packets'}: no such folder"


def test_an_empty_packets_folder_loads(tree: Path) -> None:
    for path in (tree / "packets").iterdir():
        path.unlink()
    assert load(tree).packets == {}


def test_the_repository_itself_verifies() -> None:
    catalog = load_catalog(REPO / "data", REPO / "packets")
    assert catalog.packets
    assert catalog.warnings == []  # `make check` builds with --strict
    for packet_id, path in catalog.packet_paths.items():
        assert path.name == f"{packet_id}.json"
        assert catalog.packets[packet_id].signed  # every committed packet is signed by a listed key


def test_written_packet_reads_back_identically(tree: Path) -> None:
    item = measured()
    path = put(tree, item)
    assert path.read_bytes() == item.data
    assert read_packet(path, load_keys(tree / "data" / "keys.yaml")) == item.packet


# --- tampering -----------------------------------------------------------------------------


def test_one_digit_of_a_decode_rate_changed(tree: Path) -> None:
    item = measured()
    path = put(tree, item)
    value = item.packet.arms[0].servers[0].decode_tok_s
    assert value is not None
    old = f'"decode_tok_s":{value!r}'
    digits = repr(value)
    # another digit at position 4 that is still the shortest spelling of its float: a canonical edit
    new_digits = next(
        changed
        for digit in "7890123456"
        if (changed := digits[:4] + digit + digits[5:]) != digits and repr(float(changed)) == changed
    )
    edit_text(path, lambda text: text.replace(old, f'"decode_tok_s":{new_digits}', 1))
    error = only_problem(tree)
    # the bytes now hash to another digest than the one the file name (and signature) carries
    assert (error.file, error.field) == (str(path), "id")
    assert "file name should be" in error.message
    assert "the file was edited or renamed" in error.message
    assert str(error).startswith(f"{path}: id: ")


def test_a_decode_rate_spelled_another_way(tree: Path) -> None:
    # the same float with a trailing zero: read as the same value, but not the bytes sealing wrote
    item = measured()
    path = put(tree, item)
    value = item.packet.arms[0].servers[0].decode_tok_s
    edit_text(path, lambda text: text.replace(f'"decode_tok_s":{value!r}', f'"decode_tok_s":{value!r}0', 1))
    error = only_problem(tree)
    assert error.file == str(path)
    assert error.message.startswith("not in canonical form at byte ")


def test_one_token_id_changed(tree: Path) -> None:
    path = put(tree, measured())
    edit_packet(path, lambda d: set_token(d["arms"][1]["servers"][0]["rows"][5], 9, 4242))
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "id")


def test_a_token_array_spelled_with_a_line_break_is_refused_naming_it(tree: Path) -> None:
    """An array has one spelling. Base64 with a line break in it decodes to the same integers (a
    lenient decoder skips it); the reader, which writes an array back as the text it read, refuses
    that spelling itself and names the array, before the digest could give the edit away.
    (A set unused bit, the other same-integers spelling, is refused alike: test_packet_format.py.)"""
    path = put(tree, measured())

    def misspell(d: dict[str, Any]) -> None:
        row = d["arms"][1]["servers"][0]["rows"][5]
        row["token_ids"] = row["token_ids"][:76] + "\n" + row["token_ids"][76:]

    edit_packet(path, misspell)
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "arms[1].servers[0].rows[5].token_ids"), str(error)
    assert "is not base64" in error.message


def test_a_hash_stored_inside_the_file_is_refused(tree: Path) -> None:
    # the digest is a fact about the bytes, never a field a file could claim
    path = put(tree, measured(spec=False))
    edit_packet(path, lambda d: d.update(sha256="f" * 64))
    error = only_problem(tree)
    assert (error.file, error.field, error.message) == (str(path), "sha256", "unknown key")


def test_an_id_stored_inside_the_file_is_refused(tree: Path) -> None:
    item = measured(spec=False)
    path = put(tree, item)
    edit_packet(path, lambda d: d.update(id=item.packet.id))
    error = only_problem(tree)
    assert (error.file, error.field, error.message) == (str(path), "id", "unknown key")


def test_renamed_file(tree: Path) -> None:
    packet = measured(spec=False).packet
    path = put(tree, packet_sealed := measured(spec=False))
    assert packet_sealed.packet.id == packet.id
    renamed = path.with_name("qwen3.5-9b-bf16-deadbeef.json")
    path.rename(renamed)
    orphan, error = problems(tree)  # the signature left behind names a packet that is not here
    assert (orphan.file, orphan.field) == (str(signature_path(path)), "subject")
    assert orphan.message == "a signature for a packet that is not here"
    assert (error.file, error.field) == (str(renamed), "id")
    assert error.message.startswith(f"file name should be {packet.id}.json (the id its bytes hash to)")
    assert str(error).startswith(f"{renamed}: id: file name should be {packet.id}.json")


def test_copy_under_another_name(tree: Path) -> None:
    path = put(tree, measured(spec=False))
    copy = tree / "packets" / "copy-of-the-campaign.json"
    shutil.copy(path, copy)
    error = only_problem(tree)  # the original is fine; the copy is the one problem
    assert (error.file, error.field) == (str(copy), "id")


def test_resealed_under_the_same_content_is_the_same_packet(tree: Path) -> None:
    first = put(tree, measured(spec=False))
    first_bytes = first.read_bytes()
    second = put(tree, measured(spec=False))
    assert first == second  # same content, same bytes, same file: sealing is idempotent
    assert second.read_bytes() == first_bytes
    assert len(load(tree).packets) == 1


# --- malformed files -----------------------------------------------------------------------


def test_malformed_packet_json_names_the_line(tree: Path) -> None:
    item = measured(spec=False)
    path = put(tree, item)
    title = json.dumps(item.packet.title)
    edit_text(path, lambda t: t.replace(f'"title":{title},', f'"title":{title} ', 1))
    error = only_problem(tree)
    assert error.file == str(path)
    assert error.line == 1  # a packet is one line of canonical JSON
    assert error.message.startswith("invalid JSON: Expecting ',' delimiter")
    assert str(error).startswith(f"{path}:1: invalid JSON")


def test_truncated_packet(tree: Path) -> None:
    path = put(tree, measured(spec=False))
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    error = only_problem(tree)
    assert error.file == str(path)
    assert error.line == 1
    assert error.message.startswith("invalid JSON")


@pytest.mark.parametrize("content", ["", "[]", "null", '"packet"'])
def test_packet_that_is_not_an_object(tree: Path, content: str) -> None:
    path = tree / "packets" / "odd.json"
    path.write_text(content, encoding="utf-8")
    error = only_problem(tree)
    assert error.file == str(path)


def test_duplicate_json_key(tree: Path) -> None:
    path = put(tree, measured(spec=False))
    edit_text(path, lambda t: t.replace("{", '{"title":"first",', 1))
    error = only_problem(tree)
    assert error.file == str(path)
    # whichever value a parser keeps, the bytes are not what sealing writes
    assert error.message.startswith("not in canonical form at byte 2 ")  # '{"t' where '{"a' belongs


def test_nan_in_a_packet(tree: Path) -> None:
    item = measured(spec=False)
    path = put(tree, item)
    value = item.packet.arms[0].servers[0].decode_tok_s
    edit_text(path, lambda t: t.replace(f'"decode_tok_s":{value!r}', '"decode_tok_s":NaN', 1))
    error = only_problem(tree)
    assert error.file == str(path)
    assert "NaN is not a number JSON allows" in error.message


def test_malformed_recipe_yaml_names_the_line(tree: Path) -> None:
    path = tree / RECIPE
    text = edit_text(path, lambda t: t.replace('  provider: "Qwen"\n', '  provider: "Qwen": [\n', 1))
    error = only_problem(tree)
    assert error.file == str(path)
    assert error.line == line_of(text, '  provider: "Qwen": [')
    assert error.message.startswith("invalid YAML")


def test_tab_indented_yaml(tree: Path) -> None:
    path = tree / RECIPE
    text = edit_text(path, lambda t: t.replace("  provider:", "\tprovider:", 1))
    error = only_problem(tree)
    assert error.file == str(path)
    assert error.line == line_of(text, "\tprovider:")


def test_duplicate_yaml_key(tree: Path) -> None:
    path = tree / RECIPE
    text = edit_text(path, lambda t: t.replace('  provider: "Qwen"\n', '  provider: "Qwen"\n  provider: "Other"\n', 1))
    error = only_problem(tree)
    assert error.file == str(path)
    assert "duplicate key 'provider'" in error.message
    assert error.line == line_of(text, 'provider: "Other"')


def test_recipe_that_is_not_utf8(tree: Path) -> None:
    path = tree / RECIPE
    path.write_bytes(path.read_bytes().replace(b"Qwen3.5 dense", b"Qwen3.5 \xff dense", 1))
    error = only_problem(tree)
    assert error.file == str(path)
    assert error.message.startswith("not UTF-8 text")


def test_missing_hardware_file(tree: Path) -> None:
    (tree / "data" / "hardware.yaml").unlink()
    found = problems(tree)
    assert str(found[0]) == f"{tree / 'data' / 'hardware.yaml'}: no such file"


# --- unknown keys and wrong types ----------------------------------------------------------


def test_unknown_key_in_a_packet(tree: Path) -> None:
    path = put(tree, measured(spec=False))
    edit_text(path, lambda t: t.replace("{", '{"colour":"red",', 1))
    error = only_problem(tree)
    assert (error.file, error.field, error.line, error.message) == (str(path), "colour", 1, "unknown key")
    assert str(error) == f"{path}:1: colour: unknown key"


def test_unknown_nested_key_in_a_packet(tree: Path) -> None:
    path = put(tree, measured(spec=False))
    text = edit_text(path, lambda t: t.replace('"host":{', '"host":{"rack":"r7",', 1))
    error = only_problem(tree)
    assert error.field == "identity.host.rack"
    assert error.line == line_of(text, '"rack":"r7"') == 1


def test_unknown_key_in_a_recipe(tree: Path) -> None:
    path = tree / RECIPE
    text = edit_text(path, lambda t: t.replace("meta:\n", "meta:\n  colour: red\n", 1))
    error = only_problem(tree)
    assert (error.file, error.field, error.message) == (str(path), "meta.colour", "unknown key")
    assert error.line == line_of(text, "colour: red") == 2


def test_unknown_key_deep_in_a_recipe(tree: Path) -> None:
    path = tree / RECIPE
    text = edit_text(path, lambda t: t.replace("  reasoning:\n", "  reasoning:\n    colour: red\n", 1))
    error = only_problem(tree)
    assert error.field == "features.reasoning.colour"
    assert error.line == line_of(text, "colour: red")


def test_wrong_type_in_a_recipe(tree: Path) -> None:
    path = tree / RECIPE
    text = edit_text(path, lambda t: t.replace("context_length: 262144", "context_length: lots", 1))
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "model.context_length")
    assert error.line == line_of(text, "context_length: lots")
    assert "valid integer" in error.message


def test_wrong_type_in_a_packet(tree: Path) -> None:
    path = put(tree, measured(spec=False))
    text = edit_text(path, lambda t: t.replace('"card_count":1', '"card_count":"one"', 1))
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "identity.host.card_count")
    assert error.line == line_of(text, '"card_count":"one"') == 1


def test_wrong_type_in_hardware(tree: Path) -> None:
    path = tree / "data" / "hardware.yaml"
    text = edit_text(path, lambda t: t.replace("memory_gb: {value: 24,", "memory_gb: {value: lots,", 1))
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "hardware[1].memory_gb.value")
    assert error.line == line_of(text, "memory_gb: {value: lots,")


def test_wrong_type_in_a_suite(tree: Path) -> None:
    path = tree / "data" / "suites" / "strict-v1.json"
    edit_json(path, lambda d: d["prompts"][3].update(prompt=["not", "a", "string"]))
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "prompts[3].prompt")
    assert error.line is not None


def test_several_problems_in_one_pass(tree: Path) -> None:
    good = measured(spec=False)
    bad_path = put(tree, measured(spec=False, title="tampered"))
    put(tree, good)
    edit_packet(bad_path, lambda d: d.update(title="changed"))
    edit_text(tree / RECIPE, lambda t: t.replace("meta:\n", "meta:\n  colour: red\n", 1))
    found = problems(tree)
    assert {(Path(e.file or "").name, e.field) for e in found} == {
        ("qwen3.5-9b.yaml", "meta.colour"),
        (bad_path.name, "id"),
    }
    assert len(found) == 2


@pytest.mark.parametrize(
    ("data_file", "field"),
    [
        (RECIPE, "meta.colour"),
        (Path("data/hardware.yaml"), "colour"),
        (Path("data/suites/strict-v1.json"), "colour"),
        (Path("data/suites/canaries-v1.json"), "colour"),
    ],
)
def test_a_broken_data_file_is_reported_once_not_through_every_packet(tree: Path, data_file: Path, field: str) -> None:
    for title in ("one", "two", "three"):
        put(tree, measured(title=title))
    path = tree / data_file
    if path.suffix == ".json":
        edit_text(path, lambda t: t.replace("{\n", '{\n  "colour": "red",\n', 1))
    else:
        edit_text(
            path, lambda t: t.replace("meta:\n", "meta:\n  colour: red\n", 1) if "meta:" in t else "colour: red\n" + t
        )
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), field)


# --- slugs and cross-references -------------------------------------------------------------


def test_duplicate_recipe_slug(tree: Path) -> None:
    copy = tree / "data" / "models" / "qwen3.5-9b-again.yaml"
    shutil.copy(tree / RECIPE, copy)
    error = only_problem(tree)
    assert (error.file, error.field) == (str(copy), "meta.slug")
    assert "qwen3.5-9b" in error.message


def test_duplicate_hardware_id(tree: Path) -> None:
    path = tree / "data" / "hardware.yaml"
    text = edit_text(path, lambda t: t.replace("  - id: arc_pro_b60\n", "  - id: arc_pro_b70\n", 1))
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "hardware")
    assert error.line == line_of(text, "hardware:")
    assert "duplicate hardware id 'arc_pro_b70'" in error.message


@pytest.mark.parametrize("slug", ["../qwen3.5-9b", "qwen/../../etc", "qwën3.5-9b", "qwen3.5-9b\u200b", "Qwen3.5-9B"])
def test_recipe_slug_with_path_characters_or_non_ascii(tree: Path, slug: str) -> None:
    path = tree / RECIPE
    text = edit_text(path, lambda t: t.replace('slug: "qwen3.5-9b"', f"slug: {json.dumps(slug)}", 1))
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "meta.slug")
    assert error.line == line_of(text, "  slug: ")
    assert "should match pattern" in error.message


def test_recipe_slug_must_match_its_file_name(tree: Path) -> None:
    path = tree / RECIPE
    edit_text(path, lambda t: t.replace('slug: "qwen3.5-9b"', 'slug: "qwen-nine"', 1))
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "meta.slug")
    assert "must match the file name" in error.message


def test_packet_whose_model_has_no_recipe(tree: Path) -> None:
    path = put(tree, measured(spec=False, slug="qwen9-nowhere"))
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "identity.model.slug")
    assert "'qwen9-nowhere' has no recipe in data/models" in error.message


def test_packet_whose_recipe_was_removed(tree: Path) -> None:
    path = put(tree, measured(spec=False))
    (tree / RECIPE).unlink()
    overlay = tree / "data" / "overlays" / Path(RECIPE).name
    found = [(str(e.file), e.field) for e in problems(tree)]
    if overlay.exists():
        # The recipe's overlay now lays over nothing, which names the missing recipe; the slug is
        # then reported once, not again through every packet that names it.
        assert found == [(str(overlay), "recipe")]
        overlay.unlink()
    assert only_problem(tree).field == "identity.model.slug"
    assert only_problem(tree).file == str(path)


def test_packet_with_unknown_variant_or_hardware(tree: Path) -> None:
    path = put(tree, measured(spec=False, variant="int2", hardware="tpu_v9"))
    found = problems(tree)
    assert sorted((e.file, e.field) for e in found) == [
        (str(path), "identity.host.hardware"),
        (str(path), "identity.model.variant"),
    ]


@pytest.mark.parametrize("slug", ["../etc", "qwën", "a/b"])
def test_packet_slug_with_path_characters_or_non_ascii(tree: Path, slug: str) -> None:
    path = put(tree, measured(spec=False))
    edit_packet(path, lambda d: d["identity"]["model"].update(slug=slug))
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "identity.model.slug")


def test_reproduces_an_unknown_packet(tree: Path) -> None:
    draft = measured_draft(spec=False)
    draft["reproduces"] = "qwen3.5-9b-bf16-00000000"
    path = put(tree, sealed(draft))
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "reproduces")


def test_reproduces_a_known_packet(tree: Path) -> None:
    original = measured(spec=False)
    # an independent run: another boot, its own timings (catalog.checks.consistency refuses a copy)
    draft = measured_draft(spec=False, title="again", ms_per_token=20.5)
    draft["identity"]["host"]["boot_id"] = "another-boot"
    draft["reproduces"] = original.packet.id
    put(tree, original)
    put(tree, sealed(draft))
    assert len(load(tree).packets) == 2


def test_suite_changed_since_the_packet(tree: Path) -> None:
    path = put(tree, measured(spec=False))
    edit_json(tree / "data" / "suites" / "strict-v1.json", lambda d: d["prompts"][0].update(title="Edited"))
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "workload.suite_sha256")


def test_canary_set_changed_or_missing(tree: Path) -> None:
    path = put(tree, measured(spec=False))
    canaries = tree / "data" / "suites" / "canaries-v1.json"
    edit_json(canaries, lambda d: d["canaries"][1].update(expect=["1592"]))
    assert (only_problem(tree).file, only_problem(tree).field) == (str(path), "workload.canary_set_sha256")
    canaries.unlink()
    assert only_problem(tree).field == "workload.canary_set_id"


def test_unknown_suite(tree: Path) -> None:
    draft = measured_draft(spec=False)
    draft["workload"]["suite_id"] = "strict-v9"
    path = put(tree, sealed(draft))
    assert (only_problem(tree).file, only_problem(tree).field) == (str(path), "workload.suite_id")


def test_suite_file_named_by_its_id(tree: Path) -> None:
    suites = tree / "data" / "suites"
    (suites / "strict-v1.json").rename(suites / "strict-v2.json")
    error = only_problem(tree)
    assert (error.file, error.field) == (str(suites / "strict-v2.json"), "id")


# --- evidence re-derivation (sealed and signed, wrong numbers) -----------------------------


def sealed_with(tree: Path, change: Callable[[dict[str, Any]], None], **kw: Any) -> Path:
    """Edit the draft, then seal and sign it with a listed key: a forger with a key, so only
    re-deriving the evidence can catch it."""
    draft = measured_draft(**kw)
    change(draft)
    return put(tree, sealed(draft))


def test_server_rate_whose_rows_were_read_in_bursts(tree: Path) -> None:
    """A rate sealed from a window the delivery timed (a loaded host, or a packet sealed before the
    burst rule): the refusal names the prompt and why its rows give no rate."""

    def bursts(draft: dict[str, Any]) -> None:
        row = draft["arms"][0]["servers"][0]["rows"][0]
        times = decode_uint32(row["token_times_us"])
        for i in range(1, 101):  # tokens 1..100 in two reads
            times[i] = times[1] if i <= 50 else times[100]
        row["token_times_us"] = encode_uint32(times)

    path = sealed_with(tree, bursts)
    error = only_problem(tree)
    prompt = read_packet(path, None, allow_unsigned=True).arms[0].servers[0].rows[0].prompt_id
    assert (error.file, error.field) == (str(path), "arms[0].servers[0].decode_tok_s")
    assert f"its rows give no rate: prompt {prompt!r} has tokens 1..100 read in bursts" in error.message


def test_server_rate_that_does_not_match_its_rows(tree: Path) -> None:
    path = sealed_with(
        tree,
        lambda d: d["arms"][0]["servers"][0].update(decode_tok_s=d["arms"][0]["servers"][0]["decode_tok_s"] * 1.01),
    )
    error = only_problem(tree)
    assert (error.file, error.field) == (str(path), "arms[0].servers[0].decode_tok_s")
    assert "does not match the rate re-computed from its rows" in error.message


def test_server_rate_off_in_the_last_digit_is_caught(tree: Path) -> None:
    def nudge(d: dict[str, Any]) -> None:
        server = d["arms"][1]["servers"][1]
        server["decode_tok_s"] = server["decode_tok_s"] * (1 + 1e-6)

    sealed_with(tree, nudge)
    assert only_problem(tree).field == "arms[1].servers[1].decode_tok_s"


def test_server_ttft_that_does_not_match_its_rows(tree: Path) -> None:
    sealed_with(tree, lambda d: d["arms"][0]["servers"][1].update(ttft_ms=1.0))
    assert only_problem(tree).field == "arms[0].servers[1].ttft_ms"


def test_cache_zero_that_disagrees_with_the_rows(tree: Path) -> None:
    sealed_with(tree, lambda d: d["arms"][0]["servers"][0]["rows"][2].update(cached_tokens=16))
    assert only_problem(tree).field == "arms[0].servers[0].cache_zero"


def test_failed_server_that_publishes_a_rate(tree: Path) -> None:
    sealed_with(tree, lambda d: d["arms"][0]["servers"][1].update(status="failed", error="OOM"), spec=False)
    found = {e.field: e.message for e in problems(tree)}
    assert "a failed server cannot publish a rate" in found["arms[0].servers[1].decode_tok_s"]
    assert "1 ok server(s) with prompt rows" in found["arms[0].servers"]  # catalog.checks.consistency
    assert len(found) == 2


def test_gate_that_does_not_match_the_token_arrays(tree: Path) -> None:
    # server A of the speculative arm drifts at token 30 of prompt 2, but its gates still say 12/12
    path = sealed_with(tree, lambda d: set_token(d["arms"][1]["servers"][0]["rows"][2], 30, 1))
    found = problems(tree)
    assert sorted((e.file, e.field) for e in found) == [
        (str(path), "arms[1].gates[0]"),  # G2 A vs B
        (str(path), "arms[1].gates[1]"),  # G3 A vs oracle
    ]
    assert all("does not match the token arrays re-compared" in e.message for e in found)


def test_g3_against_an_unknown_arm(tree: Path) -> None:
    sealed_with(tree, lambda d: d["arms"][1]["gates"][1].update(against="tp9-oracle"))
    error = only_problem(tree)
    assert error.field == "arms[1].gates[1].against"
    assert "'tp9-oracle'" in error.message


def test_g1_on_an_arm_with_one_server(tree: Path) -> None:
    sealed_with(tree, lambda d: d["arms"][0]["servers"].pop(), spec=False)
    assert sorted(e.field or "" for e in problems(tree)) == ["arms[0].gates[0].against", "arms[0].servers"]


def test_gate_on_servers_without_rows(tree: Path) -> None:
    # A gate claims 12/12 but there are no token arrays to re-compare: an evidence error, not a crash.
    def no_rows(d: dict[str, Any]) -> None:
        for server in d["arms"][0]["servers"]:
            server.update(rows=[], decode_tok_s=None, ttft_ms=None, cache_zero=None)

    path = sealed_with(tree, no_rows, spec=False)
    found = {(e.file, e.field): e.message for e in problems(tree)}
    assert found.pop((str(path), "arms[0].gates[0]")) == "has no prompt rows to re-compare"
    assert list(found) == [(str(path), "arms[0].servers")]  # catalog.checks.consistency: no rows on either server


def test_withheld_packet_evidence_re_derives(tree: Path) -> None:
    item = measured(g3_diverges=True)
    put(tree, item)
    assert load(tree).packets[item.packet.id].arm(SPEC_ARM).gates[1].first_divergence[4] == 57


# --- nothing is written ---------------------------------------------------------------------


def test_loading_writes_nothing(tree: Path) -> None:
    put(tree, measured())
    before = snapshot(tree)
    load(tree)
    assert snapshot(tree) == before


def test_failing_load_writes_nothing(tree: Path) -> None:
    path = put(tree, measured())
    edit_packet(path, lambda d: d.update(title="changed"))
    edit_text(tree / RECIPE, lambda t: t.replace("meta:\n", "meta:\n  colour: red\n", 1))
    before = snapshot(tree)
    problems(tree)
    assert snapshot(tree) == before


# --- the command line -----------------------------------------------------------------------


@pytest.mark.slow
def test_cli_success(tree: Path) -> None:
    put(tree, measured())
    before = snapshot(tree)
    result = run_verify(tree)
    assert result.returncode == 0, result.stderr
    catalog = load(tree)
    assert "qwen3.5-4b: no packets; the family page shows labelled gaps" in catalog.warnings
    assert result.stderr == "".join(f"warning: {w}\n" for w in catalog.warnings)  # data warnings, never errors
    assert result.stdout.startswith(
        f"verified 1 packet, {len(catalog.recipes)} recipes, {len(catalog.hardware)} hardware entries, 1 suite:"
    )
    assert snapshot(tree) == before


@pytest.mark.slow
def test_cli_strict_fails_on_data_warnings(tree: Path) -> None:
    put(tree, sealed(published_draft([published_arm("tp1-mtp0", [50.0], gates=[("G1", 12, 12, True)])])))
    catalog = load(tree)
    [packet_id] = catalog.packets
    assert f"{packet_id}: arm tp1-mtp0 is published without a fresh-server pair" in catalog.warnings
    result = run_verify(tree, "--strict")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines == [f"warning: {w}" for w in catalog.warnings] + [
        f"error: {len(catalog.warnings)} warning(s) and --strict"
    ]


@pytest.mark.slow
def test_cli_failure_is_one_plain_line_per_problem(tree: Path) -> None:
    tampered = put(tree, measured(title="tampered"))
    edit_packet(tampered, lambda d: d.update(title="changed"))
    renamed = put(tree, measured(title="renamed", spec=False))
    renamed.rename(renamed.with_name("renamed.json"))
    no_rows = sealed_with(
        tree,
        lambda d: [  # type: ignore[arg-type]
            s.update(rows=[], decode_tok_s=None, ttft_ms=None, cache_zero=None) for s in d["arms"][0]["servers"]
        ],
        spec=False,
        title="no rows",
    )
    broken_json = tree / "packets" / "broken.json"
    broken_json.write_text('{\n  "title": "x"\n  "id": 1\n}\n', encoding="utf-8")
    edit_text(tree / RECIPE, lambda t: t.replace("meta:\n", "meta:\n  colour: red\n", 1))
    before = snapshot(tree)

    result = run_verify(tree)

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 7, result.stderr
    assert all(line.startswith("error: ") for line in lines)
    expected = {
        f"{tree / RECIPE}:2: meta.colour: unknown key",
        f"{broken_json}:3: invalid JSON: Expecting ',' delimiter",
        f"{tampered}: id: file name should be",
        f"{renamed.with_name('renamed.json')}: id: file name should be",
        f"{signature_path(renamed)}: subject: a signature for a packet that is not here",
        f"{no_rows}: arms[0].gates[0]",
        f"{no_rows}: arms[0].servers: arm 'tp1-mtp0' has 0 ok server(s) with prompt rows",
    }
    for start in expected:
        assert sum(line.startswith(f"error: {start}") for line in lines) == 1, (start, lines)
    assert snapshot(tree) == before


@pytest.mark.slow
def test_cli_without_any_data(tmp_path: Path) -> None:
    result = run_verify(tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines == [f"error: {tmp_path / 'data'}: no such folder"]


# --- suite coverage: a measured server ran the whole suite, each prompt once ----------------


def oracle_only_with(tree: Path, change_rows: Callable[[list[PromptRow]], list[PromptRow]]) -> Path:
    """A one-arm packet whose every figure and gate is re-derived from the changed rows, so the
    coverage check is the only thing that can object."""
    draft = measured_draft(spec=False)
    a, b = change_rows(make_rows(ms_per_token=20.0)), change_rows(make_rows(ms_per_token=20.05))
    arm = draft["arms"][0]
    arm["servers"] = [make_server("A", a).model_dump(mode="json"), make_server("B", b).model_dump(mode="json")]
    arm["gates"] = [compare_rows("G1", "B", a, b).model_dump(mode="json")]
    return put(tree, sealed(draft))


def test_a_server_that_skipped_a_suite_prompt(tree: Path) -> None:
    path = oracle_only_with(tree, lambda rows: rows[:-1])
    found = problems(tree)
    assert [(e.file, e.field) for e in found] == [
        (str(path), "arms[0].servers[0].rows"),
        (str(path), "arms[0].servers[1].rows"),
    ]
    assert "misses prompts of suite 'strict-v1'" in found[0].message
    assert strict_suite().prompts[-1].id in found[0].message


def test_a_prompt_run_twice_or_filed_under_another_class(tree: Path) -> None:
    def twice_and_misfiled(rows: list[PromptRow]) -> list[PromptRow]:
        other_class = next(r.class_id for r in rows if r.class_id != rows[0].class_id)
        return [rows[0].model_copy(update={"class_id": other_class}), *rows[1:], rows[1]]

    oracle_only_with(tree, twice_and_misfiled)
    messages = [e.message for e in problems(tree) if e.field == "arms[0].servers[0].rows"]
    assert any(m.startswith("has prompts more than once") for m in messages)
    assert any(m.startswith("files prompts under another class") for m in messages)
