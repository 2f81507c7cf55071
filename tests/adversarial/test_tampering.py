"""Tampering with sealed packets: one digit, one token id, a renamed file, a copy under another
name, a suite edited under its packets. `make verify` and `make site` refuse each, naming the
file; reordering keys or changing whitespace changes nothing."""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from builder import cli as builder_cli
from catalog import verify
from catalog.errors import CatalogError
from catalog.packet import HASH_EXCLUDED
from catalog.packet_io import packet_json, read_packet, seal
from catalog.repository import load_catalog
from tests.adversarial.support import REPO, Tally, run_main, snapshot
from tests.catalog.factories import measured_packet

DIGIT = re.compile(rb"[0-9]")


@pytest.fixture
def sealed(tmp_path: Path) -> Path:
    """data/, the real small packets and a factory-measured packet (rows, gates, token arrays)."""
    shutil.copytree(REPO / "data", tmp_path / "data")
    (tmp_path / "packets").mkdir()
    for path in sorted((REPO / "packets").glob("qwen*.json")):
        shutil.copy(path, tmp_path / "packets" / path.name)
    packet = measured_packet()
    (tmp_path / "packets" / f"{packet.id}.json").write_text(packet_json(packet))
    load_catalog(tmp_path / "data", tmp_path / "packets")
    return tmp_path


def refuses(root: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    """Both command lines exit 1, name `name` in an `error:` line and write nothing."""
    data, packets = str(root / "data"), str(root / "packets")
    before = snapshot(root)
    for main, argv in (
        (verify.main, ["catalog.verify", "--data", data, "--packets", packets]),
        (builder_cli.main, ["builder", "build", "--data", data, "--packets", packets, "--out", str(root / "site")]),
    ):
        code, err = run_main(main, argv, capsys)
        assert code == 1, err
        assert "Traceback" not in err
        assert any(line.startswith("error: ") and name in line for line in err.splitlines()), err
    assert snapshot(root) == before and not (root / "site").exists()


def test_every_changed_digit_is_refused(sealed: Path, tally: Tally) -> None:
    """200 single-digit edits spread over every packet: each either leaves the content equal
    (a float spelled differently) or is refused by read_packet."""
    rng = random.Random(7)
    tried = 0
    for path in sorted((sealed / "packets").glob("*.json")):
        original = path.read_bytes()
        positions = [m.start() for m in DIGIT.finditer(original)]
        for at in sorted(rng.sample(positions, 40)):
            other = rng.choice([d for d in b"0123456789" if d != original[at]]).to_bytes()
            edited = original[:at] + other + original[at + 1 :]
            path.write_bytes(edited)
            try:
                same = json.loads(edited) == json.loads(original)
            except ValueError:
                same = False
            try:
                read_packet(path)
                assert same, f"{path.name}: byte {at} changed and the packet still loads"
            except CatalogError as error:
                assert not same, error
                assert error.file == str(path) and "\n" not in str(error)
            tried += 1
        path.write_bytes(original)
    tally.add("tampering", "one digit changed (read_packet)", tried)


def test_tampered_packet_is_refused_by_verify_and_site(sealed: Path, capsys, tally: Tally) -> None:
    path = next((sealed / "packets").glob("qwen3.5-9b-bf16-*.json"))
    text = path.read_text()
    path.write_text(text.replace('"max_tokens": 512', '"max_tokens": 513', 1))
    refuses(sealed, capsys, path.name)
    tally.add("tampering", "one digit changed (verify and site)", 2)


def _edit_and_reseal(path: Path, edit: Any) -> Path:
    """An attacker who edits a packet and re-computes its hash and id."""
    data = json.loads(path.read_text())
    edit(data)
    packet = seal({k: v for k, v in data.items() if k not in HASH_EXCLUDED})
    path.unlink()
    new = path.with_name(f"{packet.id}.json")
    new.write_text(packet_json(packet))
    return new


def test_one_token_id_changed(sealed: Path, capsys, tally: Tally) -> None:
    path = next((sealed / "packets").glob("qwen3.5-9b-bf16-*.json"))
    original = path.read_text()
    data = json.loads(original)
    data["arms"][1]["servers"][0]["rows"][3]["token_ids"][57] += 1
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    with pytest.raises(CatalogError, match="the file was edited after sealing") as caught:
        read_packet(path)
    assert caught.value.field == "sha256"
    refuses(sealed, capsys, path.name)

    path.write_text(original)  # now re-sealed: the gates no longer match the token arrays
    resealed = _edit_and_reseal(path, lambda d: d["arms"][1]["servers"][0]["rows"][3]["token_ids"].__setitem__(57, 1))
    refuses(sealed, capsys, resealed.name)
    with pytest.raises(CatalogError) as caught:
        load_catalog(sealed / "data", sealed / "packets")
    assert "does not match the token arrays re-compared" in str(caught.value)
    tally.add("tampering", "one token id changed (as edited, and re-sealed)", 2)


def test_resealed_rate_that_the_rows_do_not_give(sealed: Path, capsys, tally: Tally) -> None:
    path = next((sealed / "packets").glob("qwen3.5-9b-bf16-*.json"))

    def faster(data: dict[str, Any]) -> None:
        data["arms"][0]["servers"][0]["decode_tok_s"] *= 1.5

    resealed = _edit_and_reseal(path, faster)
    refuses(sealed, capsys, resealed.name)
    with pytest.raises(CatalogError, match="does not match the rate re-computed from its rows"):
        load_catalog(sealed / "data", sealed / "packets")
    tally.add("tampering", "a published rate changed and re-sealed", 1)


def test_renamed_packet(sealed: Path, capsys, tally: Tally) -> None:
    path = next((sealed / "packets").glob("qwen3.5-9b-fp8-*.json"))
    renamed = path.with_name("qwen3.5-9b-fp8-dynamic-00000000.json")
    path.rename(renamed)
    with pytest.raises(CatalogError, match=f"file name should be {path.name}"):
        read_packet(renamed)
    refuses(sealed, capsys, renamed.name)
    tally.add("tampering", "packet file renamed", 1)


def test_copied_packet_under_another_name(sealed: Path, capsys, tally: Tally) -> None:
    path = next((sealed / "packets").glob("qwen3.5-4b-w4a16-*.json"))
    copy = path.with_name("qwen3.5-4b-w4a16-ffffffff.json")
    shutil.copy(path, copy)
    refuses(sealed, capsys, copy.name)
    tally.add("tampering", "packet copied under another name", 1)


def test_suite_edited_under_its_packets(sealed: Path, capsys, tally: Tally) -> None:
    suite = sealed / "data" / "suites" / "strict-v1.json"
    data = json.loads(suite.read_text())
    data["prompts"][0]["prompt"] += " (edited)"
    suite.write_text(json.dumps(data, indent=2))
    packet = next((sealed / "packets").glob("qwen3.5-9b-bf16-*.json"))
    refuses(sealed, capsys, packet.name)
    with pytest.raises(CatalogError, match="suite hash differs"):
        load_catalog(sealed / "data", sealed / "packets")
    tally.add("tampering", "suite edited under its packets", 1)


@pytest.mark.parametrize(
    "form",
    ["compact", "indent 4", "keys reversed", "CRLF and trailing spaces", "escaped unicode", "leading blank lines"],
)
def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(v) for v in value]
    return value


REFORMAT = {
    "compact": lambda data: json.dumps(data, separators=(",", ":"), ensure_ascii=False),
    "indent 4": lambda data: json.dumps(data, indent=4, ensure_ascii=False),
    "keys reversed": lambda data: json.dumps(_reversed_keys(data), indent=1, ensure_ascii=False),
    "CRLF and trailing spaces": lambda data: json.dumps(data, indent=2, ensure_ascii=False).replace("\n", "  \r\n"),
    "escaped unicode": lambda data: json.dumps(data, indent=2, ensure_ascii=True),
    "leading blank lines": lambda data: "\n\n" + json.dumps(data, indent=2, ensure_ascii=False),
}


@pytest.mark.parametrize("form", list(REFORMAT))
def test_reformatting_does_not_change_the_hash(sealed: Path, form: str, tally: Tally) -> None:
    for path in sorted((sealed / "packets").glob("*.json")):
        before = read_packet(path).sha256
        path.write_text(REFORMAT[form](json.loads(path.read_text())), newline="")
        assert read_packet(path).sha256 == before
        tally.add("tampering", "reformatted without changing content (loads, same hash)", 1)
    load_catalog(sealed / "data", sealed / "packets")
