"""Packet signatures and data/keys.yaml: every way a signature can be wrong is refused with one line
naming the file and the field. Keys are throwaway ones in tmp_path, never the real ~/.config."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog.errors import CatalogError
from catalog.packets.keys import KeyEntry, KeyRing, load_keys
from catalog.packets.signing import ENV_KEY, HostKey, host_key, sign_packet, verify_packet_signature
from catalog.store.documents import validate_as

DIGEST = hashlib.sha256(b"packet bytes").hexdigest()
OTHER_DIGEST = hashlib.sha256(b"another packet").hexdigest()
NAME = "demo-q4-" + DIGEST[:8]
SIG_FILE = Path("packets/signatures/x.json")
TODAY = datetime.now(UTC).date()


@pytest.fixture(autouse=True)
def _no_key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_KEY, raising=False)


@pytest.fixture
def measurer(tmp_path: Path) -> HostKey:
    return host_key("measurer", config_dir=tmp_path / "measurer-config")


def ring(*keys: HostKey, **overrides: Any) -> KeyRing:
    entries = [{**entry_of(key), **overrides} for key in keys]
    return KeyRing.model_validate({"schema_version": 1, "test_catalog": True, "keys": entries})


def entry_of(key: HostKey) -> dict[str, Any]:
    return {"id": key.key_id, "public_key": key.public_hex, "owner": "test host", "role": key.role}


def refusal(
    envelope: bytes, keys: KeyRing, *, digest: str = DIGEST, name: str = NAME, role: str = "measurer"
) -> CatalogError:
    with pytest.raises(CatalogError) as caught:
        verify_packet_signature(envelope, digest, name, keys, role=role, file=SIG_FILE)
    assert caught.value.file == str(SIG_FILE)
    assert "\n" not in str(caught.value)
    return caught.value


def edited(envelope: bytes, change: Any) -> bytes:
    document = json.loads(envelope)
    change(document)
    return json.dumps(document).encode()


def test_round_trip_returns_the_signing_key(measurer: HostKey) -> None:
    keys = ring(measurer)
    entry = verify_packet_signature(
        sign_packet(DIGEST, NAME, measurer), DIGEST, NAME, keys, role="measurer", file=SIG_FILE
    )
    assert entry == keys.keys[0]


def test_envelope_is_a_dsse_in_toto_statement(measurer: HostKey) -> None:
    envelope = json.loads(sign_packet(DIGEST, NAME, measurer))
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert [s["keyid"] for s in envelope["signatures"]] == [measurer.key_id]
    payload = base64.b64decode(envelope["payload"])
    statement = json.loads(payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"] == [{"name": NAME, "digest": {"sha256": DIGEST}}]
    assert statement["predicate"] == {"role": "measurer"}
    assert payload == json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()


def test_signing_is_deterministic_and_canonical(measurer: HostKey, tmp_path: Path) -> None:
    first = sign_packet(DIGEST, NAME, measurer)
    reloaded = host_key("measurer", config_dir=tmp_path / "measurer-config")
    assert sign_packet(DIGEST, NAME, reloaded) == first
    assert first.endswith(b"}\n")
    assert first == json.dumps(json.loads(first), sort_keys=True, separators=(",", ":")).encode() + b"\n"


def test_key_file_is_private_and_reused(measurer: HostKey, tmp_path: Path) -> None:
    folder = tmp_path / "measurer-config"
    assert measurer.path == folder / "measurer.pem"
    assert os.stat(folder).st_mode & 0o777 == 0o700
    assert os.stat(measurer.path).st_mode & 0o777 == 0o600
    assert host_key("measurer", config_dir=folder).key_id == measurer.key_id
    assert host_key("importer", config_dir=folder).key_id != measurer.key_id


def test_key_file_open_to_others_is_refused(measurer: HostKey) -> None:
    measurer.path.chmod(0o644)
    with pytest.raises(CatalogError, match="open to group or others \\(mode 644\\)") as caught:
        host_key("measurer", config_dir=measurer.path.parent)
    assert caught.value.file == str(measurer.path)


def test_unparsable_key_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "measurer.pem"
    path.write_text("not a key\n")
    path.chmod(0o600)
    with pytest.raises(CatalogError, match="not an unencrypted PEM private key") as caught:
        host_key("measurer", config_dir=tmp_path)
    assert caught.value.file == str(path)


def test_environment_variable_names_the_key_file(measurer: HostKey, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_KEY, str(measurer.path))
    assert host_key("measurer").key_id == measurer.key_id
    monkeypatch.setenv(ENV_KEY, str(measurer.path.with_name("missing.pem")))
    with pytest.raises(CatalogError, match="no such signing key file"):
        host_key("measurer")


def test_key_inside_the_repository_is_refused() -> None:
    with pytest.raises(CatalogError, match="must not live inside the repository"):
        HostKey.load(Path(__file__).resolve().parents[2] / "measurer.pem")


def test_keys_yaml_entry_pastes_into_keys_yaml(measurer: HostKey, tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text("schema_version: 1\nkeys:\n" + measurer.keys_yaml_entry('Ann "lab" <ann@example.org>'))
    [entry] = load_keys(path).keys
    assert (entry.id, entry.owner, entry.role, entry.valid_from) == (
        measurer.key_id,
        'Ann "lab" <ann@example.org>',
        "measurer",
        TODAY,
    )


def test_repository_keys_yaml_loads() -> None:
    load_keys(Path(__file__).resolve().parents[2] / "data" / "keys.yaml")


def test_wrong_key_signature_is_refused(measurer: HostKey, tmp_path: Path) -> None:
    impostor = host_key("measurer", config_dir=tmp_path / "impostor")
    keys = ring(measurer)
    forged = edited(sign_packet(DIGEST, NAME, impostor), lambda d: d["signatures"][0].update(keyid=measurer.key_id))
    error = refusal(forged, keys)
    assert error.message.startswith(f"bad signature by key {measurer.key_id}")
    assert error.field == "signatures[0].sig"


def test_unknown_key_is_refused(measurer: HostKey, tmp_path: Path) -> None:
    stranger = host_key("measurer", config_dir=tmp_path / "stranger")
    error = refusal(sign_packet(DIGEST, NAME, stranger), ring(measurer))
    assert error.message == f"unknown key {stranger.key_id}: add its line to data/keys.yaml"
    assert error.field == "signatures[0].keyid"


def test_revoked_key_is_refused(measurer: HostKey) -> None:
    keys = ring(measurer, revoked=TODAY - timedelta(days=30), note="laptop stolen")
    error = refusal(sign_packet(DIGEST, NAME, measurer), keys)
    assert error.message == f"key {measurer.key_id} (test host) was revoked on {TODAY - timedelta(days=30)}"
    assert error.field == "signatures[0].keyid"


def test_expired_key_is_refused(measurer: HostKey) -> None:
    yesterday = TODAY - timedelta(days=1)
    error = refusal(sign_packet(DIGEST, NAME, measurer), ring(measurer, valid_until=yesterday))
    assert error.message == f"key {measurer.key_id} (test host) expired on {yesterday}"
    assert error.field == "signatures[0].keyid"


def test_key_not_yet_valid_is_refused(measurer: HostKey) -> None:
    tomorrow = TODAY + timedelta(days=1)
    error = refusal(sign_packet(DIGEST, NAME, measurer), ring(measurer, valid_from=tomorrow))
    assert error.message == f"key {measurer.key_id} (test host) is not valid before {tomorrow}"


def test_key_valid_today_is_accepted(measurer: HostKey) -> None:
    keys = ring(measurer, valid_from=TODAY, valid_until=TODAY)
    verify_packet_signature(sign_packet(DIGEST, NAME, measurer), DIGEST, NAME, keys, role="measurer", file=SIG_FILE)


def test_importer_key_cannot_sign_a_measured_packet(tmp_path: Path) -> None:
    importer = host_key("importer", config_dir=tmp_path)
    error = refusal(sign_packet(DIGEST, NAME, importer), ring(importer), role="measurer")
    expected = f"key {importer.key_id} (test host) has role importer; this packet needs a key with role measurer"
    assert error.message == expected
    assert error.field == "signatures[0].keyid"


def test_statement_role_must_match_the_listed_role(measurer: HostKey) -> None:
    listed_as_importer = ring(measurer, role="importer")
    error = refusal(sign_packet(DIGEST, NAME, measurer), listed_as_importer, role="importer")
    assert error.field == "payload"
    assert "not a importer packet-signature statement" in error.message


def flip_base64(text: str, index: int) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[index] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def test_tampered_signature_byte_is_refused(measurer: HostKey) -> None:
    envelope = edited(
        sign_packet(DIGEST, NAME, measurer),
        lambda d: d["signatures"][0].update(sig=flip_base64(d["signatures"][0]["sig"], 5)),
    )
    error = refusal(envelope, ring(measurer))
    assert error.message.startswith("bad signature")
    assert error.field == "signatures[0].sig"


def test_tampered_payload_byte_is_refused(measurer: HostKey) -> None:
    envelope = edited(sign_packet(DIGEST, NAME, measurer), lambda d: d.update(payload=flip_base64(d["payload"], 40)))
    error = refusal(envelope, ring(measurer))
    assert error.message.startswith("bad signature")


def test_tampered_envelope_file_byte_is_refused(measurer: HostKey) -> None:
    envelope = bytearray(sign_packet(DIGEST, NAME, measurer))
    at = envelope.index(b'"sig":"') + len(b'"sig":"') + 3
    envelope[at] = ord("A") if envelope[at] != ord("A") else ord("B")
    assert refusal(bytes(envelope), ring(measurer)).message.startswith("bad signature")


def test_signature_of_another_packet_is_refused(measurer: HostKey) -> None:
    error = refusal(sign_packet(OTHER_DIGEST, NAME, measurer), ring(measurer))
    assert error.message == f"signs sha256 {OTHER_DIGEST}, not this packet's {DIGEST}: the packet changed after signing"
    assert error.field == "payload.subject[0].digest.sha256"


def test_signature_moved_to_another_packet_name_is_refused(measurer: HostKey) -> None:
    other_name = "demo-q4-" + OTHER_DIGEST[:8]
    error = refusal(sign_packet(OTHER_DIGEST, other_name, measurer), ring(measurer))
    assert error.message.startswith(f"signs packet {other_name!r}, not {NAME!r}")
    assert error.field == "payload.subject[0].name"


def test_empty_signatures_are_refused(measurer: HostKey) -> None:
    envelope = edited(sign_packet(DIGEST, NAME, measurer), lambda d: d.update(signatures=[]))
    error = refusal(envelope, ring(measurer))
    assert error.message == "unsigned: the envelope holds no signature"
    assert error.field == "signatures"


def test_missing_signatures_are_refused(measurer: HostKey) -> None:
    envelope = edited(sign_packet(DIGEST, NAME, measurer), lambda d: d.pop("signatures"))
    error = refusal(envelope, ring(measurer))
    assert (error.message, error.field) == ("required key is missing", "signatures")


def test_two_signatures_are_refused(measurer: HostKey, tmp_path: Path) -> None:
    second = host_key("measurer", config_dir=tmp_path / "second")
    other_sig = json.loads(sign_packet(DIGEST, NAME, second))["signatures"][0]
    envelope = edited(sign_packet(DIGEST, NAME, measurer), lambda d: d["signatures"].append(other_sig))
    error = refusal(envelope, ring(measurer, second))
    assert error.message == "2 signatures: a packet is signed by exactly one key"


def test_wrong_payload_type_is_refused(measurer: HostKey) -> None:
    envelope = edited(sign_packet(DIGEST, NAME, measurer), lambda d: d.update(payloadType="text/plain"))
    error = refusal(envelope, ring(measurer))
    assert (error.message, error.field) == (
        "payloadType is 'text/plain', not 'application/vnd.in-toto+json'",
        "payloadType",
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe", "not UTF-8 text"),
        (b"{not json", "invalid JSON"),
        (b"[]", "not a DSSE envelope"),
        (b'{"schema_version": 2}', "not a DSSE envelope"),
    ],
)
def test_not_an_envelope_is_refused(measurer: HostKey, content: bytes, message: str) -> None:
    assert refusal(content, ring(measurer)).message.startswith(message)


def test_bad_base64_is_refused(measurer: HostKey) -> None:
    envelope = edited(sign_packet(DIGEST, NAME, measurer), lambda d: d.update(payload="not base64!"))
    assert refusal(envelope, ring(measurer)).field == "payload"


def keys_error(tmp_path: Path, entries: list[dict[str, Any]]) -> CatalogError:
    path = tmp_path / "keys.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, "keys": entries}))
    with pytest.raises(CatalogError) as caught:
        load_keys(path)
    assert caught.value.file == str(path)
    return caught.value


def test_keys_yaml_id_must_match_its_public_key(measurer: HostKey, tmp_path: Path) -> None:
    other = host_key("measurer", config_dir=tmp_path / "other")
    error = keys_error(tmp_path, [{**entry_of(measurer), "public_key": other.public_hex}])
    assert error.message == f"does not match public_key, whose keyid is {other.key_id}"
    assert (error.field, error.line) == ("keys[0].id", 2)


def test_keys_yaml_duplicate_ids_are_refused(measurer: HostKey, tmp_path: Path) -> None:
    error = keys_error(tmp_path, [entry_of(measurer), {**entry_of(measurer), "owner": "again"}])
    assert error.message == f"key {measurer.key_id} is listed twice"
    assert error.field == "keys[1].id"


def test_keys_yaml_dates_in_order(measurer: HostKey, tmp_path: Path) -> None:
    entry = {**entry_of(measurer), "valid_from": date(2027, 1, 2), "valid_until": date(2027, 1, 1)}
    error = keys_error(tmp_path, [entry])
    assert (error.message, error.field) == (
        "valid_from 2027-01-02 is after valid_until 2027-01-01",
        "keys[0].valid_from",
    )


def test_keys_yaml_role_is_measurer_or_importer(measurer: HostKey) -> None:
    with pytest.raises(CatalogError) as caught:
        validate_as(KeyEntry, {**entry_of(measurer), "role": "admin"}, SIG_FILE)
    assert caught.value.field == "role"


def test_an_expired_key_still_vouches_for_packets_made_while_it_was_valid(measurer: HostKey) -> None:
    last_day = TODAY - timedelta(days=10)
    keys = ring(measurer, valid_until=last_day)
    envelope = sign_packet(DIGEST, NAME, measurer)
    entry = verify_packet_signature(
        envelope, DIGEST, NAME, keys, role="measurer", file=Path("p.dsse.json"), made_on=last_day
    )
    assert entry.id == measurer.key_id
    with pytest.raises(CatalogError) as caught:
        verify_packet_signature(
            envelope, DIGEST, NAME, keys, role="measurer", file=Path("p.dsse.json"), made_on=last_day + timedelta(1)
        )
    assert caught.value.message == f"key {measurer.key_id} (test host) expired on {last_day}"
