"""Tampering with sealed packets: one digit, one token id, a renamed file, a copy under another
name, a suite edited under its packets. `make verify` and `make site` refuse each, naming the
file. A packet's bytes are its canonical form, so reordering keys or changing whitespace is
refused too, and re-encoding the content gives back the very bytes and digest that were sealed."""

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
from catalog.model.arrays import decode_uint32, encode_uint32
from catalog.packets.canonical import canonical_json
from catalog.packets.layout import signature_path
from catalog.packets.seal import write_packet
from catalog.packets.verify import read_packet
from catalog.store.repository import load_catalog
from tests.adversarial.support import REPO, Tally, run_main, snapshot, trusting_data
from tests.catalog.factories import measured_draft
from tests.catalog.factories import sealed as seal_draft

DIGIT = re.compile(rb"[0-9]")


@pytest.fixture
def sealed(tmp_path: Path) -> Path:
    """data/ (trusting the test keys too), the real small packets with their signatures and a
    factory-measured packet signed by the test key (rows, gates, token arrays)."""
    trusting_data(tmp_path / "data")
    (tmp_path / "packets").mkdir()
    for path in sorted((REPO / "packets").glob("qwen*.json")):  # the packets and their .dsse.json
        shutil.copy(path, tmp_path / "packets" / path.name)
    write_packet(seal_draft(measured_draft()), tmp_path / "packets")
    load_catalog(tmp_path / "data", tmp_path / "packets")
    return tmp_path


def packet_files(root: Path, pattern: str = "*.json") -> list[Path]:
    """The packet files matching `pattern`, without their signature envelopes."""
    return [p for p in sorted((root / "packets").glob(pattern)) if not p.name.endswith(".dsse.json")]


def canonical(data: dict[str, Any]) -> bytes:
    return canonical_json(data) + b"\n"


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
    """200 single-digit edits spread over every packet: each is refused by read_packet (a float
    spelled differently but equal is refused too: the bytes must be the canonical form)."""
    rng = random.Random(7)
    tried = 0
    for path in packet_files(sealed):
        original = path.read_bytes()
        positions = [m.start() for m in DIGIT.finditer(original)]
        for at in sorted(rng.sample(positions, 40)):
            other = rng.choice([d for d in b"0123456789" if d != original[at]]).to_bytes()
            edited = original[:at] + other + original[at + 1 :]
            path.write_bytes(edited)
            with pytest.raises(CatalogError) as caught:
                read_packet(path, None)
                pytest.fail(f"{path.name}: byte {at} changed and the packet still loads")
            assert caught.value.file == str(path) and "\n" not in str(caught.value)
            tried += 1
        path.write_bytes(original)
    tally.add("tampering", "one digit changed (read_packet)", tried)


def test_tampered_packet_is_refused_by_verify_and_site(sealed: Path, capsys, tally: Tally) -> None:
    path = packet_files(sealed, "qwen3.5-9b-bf16-*.json")[0]
    text = path.read_text()
    assert '"max_tokens":512' in text
    path.write_text(text.replace('"max_tokens":512', '"max_tokens":513', 1))
    refuses(sealed, capsys, path.name)
    tally.add("tampering", "one digit changed (verify and site)", 2)


def _edit_and_reseal(path: Path, edit: Any) -> Path:
    """An attacker who edits a packet and re-seals it: states, bytes, digest, id and a signature
    (here by a key the catalog trusts, so only the re-derived evidence can catch the edit)."""
    data = json.loads(path.read_text())
    edit(data)
    resealed = seal_draft(data)
    signature_path(path).unlink(missing_ok=True)
    path.unlink()
    return write_packet(resealed, path.parent)


def _set_token(data: dict[str, Any], value: int | None = None) -> None:
    """arms[1].servers[0].rows[3].token_ids[57]: set to `value`, or one more than it was."""
    row = data["arms"][1]["servers"][0]["rows"][3]
    ids = decode_uint32(row["token_ids"])
    ids[57] = ids[57] + 1 if value is None else value
    row["token_ids"] = encode_uint32(ids)


def test_one_token_id_changed(sealed: Path, capsys, tally: Tally) -> None:
    path = packet_files(sealed, "qwen3.5-9b-bf16-*.json")[0]
    original = path.read_bytes()
    data = json.loads(original)
    _set_token(data)
    path.write_bytes(canonical(data))  # canonical bytes: only the digest (and so the name) is off
    with pytest.raises(CatalogError, match="the file was edited or renamed") as caught:
        read_packet(path, None)
    assert caught.value.field == "id"
    refuses(sealed, capsys, path.name)

    path.write_bytes(original)  # now re-sealed: the gates no longer match the token arrays
    resealed = _edit_and_reseal(path, lambda d: _set_token(d, 1))
    refuses(sealed, capsys, resealed.name)
    with pytest.raises(CatalogError) as caught:
        load_catalog(sealed / "data", sealed / "packets")
    assert "does not match the token arrays re-compared" in str(caught.value)
    tally.add("tampering", "one token id changed (as edited, and re-sealed)", 2)


def test_resealed_rate_that_the_rows_do_not_give(sealed: Path, capsys, tally: Tally) -> None:
    path = packet_files(sealed, "qwen3.5-9b-bf16-*.json")[0]

    def faster(data: dict[str, Any]) -> None:
        data["arms"][0]["servers"][0]["decode_tok_s"] *= 1.5

    resealed = _edit_and_reseal(path, faster)
    refuses(sealed, capsys, resealed.name)
    with pytest.raises(CatalogError, match="does not match the rate re-computed from its rows"):
        load_catalog(sealed / "data", sealed / "packets")
    tally.add("tampering", "a published rate changed and re-sealed", 1)


def test_renamed_packet(sealed: Path, capsys, tally: Tally) -> None:
    path = packet_files(sealed, "qwen3.5-9b-fp8-*.json")[0]
    renamed = path.with_name("qwen3.5-9b-fp8-dynamic-00000000.json")
    path.rename(renamed)
    signature_path(path).rename(signature_path(renamed))  # its signature moved along
    with pytest.raises(CatalogError, match=f"file name should be {path.name}"):
        read_packet(renamed, None)
    refuses(sealed, capsys, renamed.name)
    tally.add("tampering", "packet file renamed", 1)


def test_copied_packet_under_another_name(sealed: Path, capsys, tally: Tally) -> None:
    path = packet_files(sealed, "qwen3.5-4b-w4a16-*.json")[0]
    copy = path.with_name("qwen3.5-4b-w4a16-ffffffff.json")
    shutil.copy(path, copy)
    shutil.copy(signature_path(path), signature_path(copy))
    refuses(sealed, capsys, copy.name)
    tally.add("tampering", "packet copied under another name", 1)


def test_suite_edited_under_its_packets(sealed: Path, capsys, tally: Tally) -> None:
    suite = sealed / "data" / "suites" / "strict-v1.json"
    data = json.loads(suite.read_text())
    data["prompts"][0]["prompt"] += " (edited)"
    suite.write_text(json.dumps(data, indent=2))
    packet = packet_files(sealed, "qwen3.5-9b-bf16-*.json")[0]
    refuses(sealed, capsys, packet.name)
    with pytest.raises(CatalogError, match="suite hash differs"):
        load_catalog(sealed / "data", sealed / "packets")
    tally.add("tampering", "suite edited under its packets", 1)


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(v) for v in value]
    return value


REFORMAT = {
    "compact, no final newline": lambda data: json.dumps(data, separators=(",", ":"), ensure_ascii=False),
    "indent 2": lambda data: json.dumps(data, indent=2, ensure_ascii=False),
    "indent 4": lambda data: json.dumps(data, indent=4, ensure_ascii=False),
    "keys reversed": lambda data: json.dumps(_reversed_keys(data), indent=1, ensure_ascii=False),
    "CRLF and trailing spaces": lambda data: json.dumps(data, indent=2, ensure_ascii=False).replace("\n", "  \r\n"),
    "escaped unicode": lambda data: json.dumps(data, indent=2, ensure_ascii=True),
    "leading blank lines": lambda data: "\n\n" + json.dumps(data, indent=2, ensure_ascii=False),
}


@pytest.mark.parametrize("form", list(REFORMAT))
def test_reformatting_is_refused_and_re_encodes_to_the_sealed_bytes(sealed: Path, form: str, tally: Tally) -> None:
    """The same content in another spelling is not the sealed file: refused as not canonical (so
    no value can be read one way and hashed another); its canonical encoding is the sealed file
    again, byte for byte, with the same digest."""
    for path in packet_files(sealed):
        original = path.read_bytes()
        before = read_packet(path, None).sha256
        path.write_text(REFORMAT[form](json.loads(original)), newline="")
        assert path.read_bytes() != original
        with pytest.raises(CatalogError, match="not in canonical form at byte") as caught:
            read_packet(path, None)
        assert caught.value.file == str(path) and "\n" not in str(caught.value)
        path.write_bytes(canonical(json.loads(path.read_bytes())))
        assert path.read_bytes() == original
        assert read_packet(path, None).sha256 == before
        tally.add("tampering", "reformatted without changing content (refused; re-encodes to the same hash)", 1)
    load_catalog(sealed / "data", sealed / "packets")
