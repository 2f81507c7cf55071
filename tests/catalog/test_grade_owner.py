"""Independence is another owner, not merely another key: a reproduction signed by a second key
that data/keys.yaml lists under the original's owner (compared without case or spacing) is one
voice vouching twice, so the original keeps "not independently reproduced" and grade B
(catalog/checks/grade.py `one_voice`). Verification puts each signer's owner on the packet's seal
(catalog/packets/verify.py, PacketSeal.signed_owner); tests/adversarial/test_listed_key_round2_grade.py
holds the whole path, keys.yaml to the built page."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from catalog.checks.grade import NOT_REPRODUCED, evidence_grade, independent, limitations
from catalog.model.packet import Packet
from catalog.packets.keys import load_keys, owner_key
from catalog.packets.seal import write_packet
from catalog.packets.verify import read_packet
from tests.catalog.factories import measured_packet, other_lab_key, sealed
from tests.catalog.factories import test_key as session_key
from tests.catalog.test_grade_selection import reproduction_of


def owned(packet: Packet, owner: str | None) -> Packet:
    """The packet as verification leaves it when data/keys.yaml lists its signer under `owner`."""
    packet._seal = replace(packet.seal, signed_owner=None if owner is None else owner_key(owner))
    return packet


@pytest.mark.parametrize("second_owner", ["Ann's lab", "  ANN'S   lab ", "ANN'S LAB"])
def test_a_second_key_of_the_same_owner_is_not_independent(second_owner: str) -> None:
    packet = owned(measured_packet(), "Ann's lab")
    repro = owned(reproduction_of(packet), second_owner)  # signed by the second key
    assert repro.seal.signed_by != packet.seal.signed_by
    assert not independent(packet, repro)
    assert NOT_REPRODUCED in limitations(packet, [repro])
    assert evidence_grade(packet, [repro]) == "B"


def test_another_owner_is_independent() -> None:
    packet = owned(measured_packet(), "Ann's lab")
    assert evidence_grade(packet, [owned(reproduction_of(packet), "Bo's lab")]) == "A"


def test_without_owners_only_the_key_ids_are_compared() -> None:
    """Packets sealed in memory carry no owner: two keys are two voices, one key one."""
    packet = measured_packet()
    assert packet.seal.signed_owner is None
    assert evidence_grade(packet, [reproduction_of(packet)]) == "A"


def test_owner_normalised() -> None:
    assert owner_key("  A Lab\t(MEASURER) ") == owner_key("a lab (measurer)") == "a lab (measurer)"
    assert owner_key("ｌａｂ") == "lab"  # full-width letters are the same letters
    assert owner_key("a lab") != owner_key("another lab")


def test_verification_names_the_signer_s_owner(tmp_path: Path) -> None:
    entries = session_key().keys_yaml_entry("Ann's lab", dated=False)
    entries += other_lab_key().keys_yaml_entry("Bo's lab", dated=False)
    keys_file = tmp_path / "keys.yaml"
    keys_file.write_text("schema_version: 1\ntest_catalog: true\nkeys:\n" + entries, encoding="utf-8")
    path = write_packet(sealed(measured_packet().model_dump(mode="json")), tmp_path)
    read = read_packet(path, load_keys(keys_file))
    assert read.seal.signed_owner == "ann's lab"
    assert read_packet(path, None).seal.signed_owner is None  # no key ring: no signature checked
