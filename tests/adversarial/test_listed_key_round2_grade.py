"""A listed key cannot publish a lie, round 2: a lab whose keys are listed the documented way
(tests/adversarial/test_listed_key.py `lab`) tries what the evidence grade and the badges say.

- 3 independence: the lab lists a second measurer key under its own owner text (or that text in
  another case and spacing) and signs its own re-run as the "independent reproduction" of its
  campaign. Both packets are honest, so both commands accept them; what must not happen is the
  grade: the original's page keeps grade B, "not independently reproduced" (catalog/checks/grade.py
  `one_voice`). The control, the same re-run signed by another owner's key, lifts it to grade A.
- 8 bounds: a title or an arm label that impersonates what the site derives (a grade, or a state
  the packet or arm does not have: measured, imported, screened, withheld, verified) is refused by
  both commands naming the field (catalog/checks/bounds.py `claim_problems`); titles and labels
  that say what is true are accepted.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup

from catalog.checks.grade import NOT_REPRODUCED
from catalog.model.metrics import compare_rows
from catalog.model.packet import PacketParts
from catalog.packets.seal import seal, write_packet
from catalog.packets.signing import HostKey, host_key
from testkit.samples import SAME_SERVER, make_rows, make_server, measured_parts
from tests.adversarial.support import Tally
from tests.adversarial.test_forgery import MODES, refused
from tests.adversarial.test_listed_key import (  # noqa: F401 - fixtures
    IMPORTED_4B,
    LAB_VALID_FROM,
    accepted,
    base,
    campaign,
    lab,
    lab_seal,
)
from tests.catalog.factories import draft_of

Document = dict[str, Any]
LAB_OWNER = "a lab (measurer)"  # the owner text test_listed_key.list_lab gives the lab's measurer key


# ---- 3 independence: the same lab under a second key ----


def extra_key(root: Path, tag: str, owner: str) -> HostKey:
    """Another measurer key, listed the documented way under `owner`."""
    key = host_key("measurer", config_dir=root.parent / f"{root.name}-{tag}-keys")
    keys = root / "data" / "keys.yaml"
    entry = key.keys_yaml_entry(owner).replace(
        f"valid_from: {date.today().isoformat()}", f"valid_from: {LAB_VALID_FROM}"
    )
    keys.write_text(keys.read_text(encoding="utf-8") + entry, encoding="utf-8")
    return key


def seal_with(root: Path, document: Document, key: HostKey) -> Path:
    return write_packet(seal(PacketParts.model_validate(draft_of(document)), key), root / "packets")


def reproduction_of(original: Path) -> Document:
    """The campaign run again on another boot, with its own times: an honest reproduction."""
    document = measured_parts(ms_per_token=20.3, title="Qwen3.5-9B BF16 on one Arc Pro B70, reproduced").model_dump(
        mode="json"
    )
    document["reproduces"] = original.stem
    document["identity"]["host"]["boot_id"] = "9a9a9a9a-second-boot"
    document["created"] = "2026-12-01T10:15:00Z"
    return document


def shown_grade(root: Path, packet: Path) -> tuple[str, str]:
    """The grade letter the packet page shows, and its "Grade X because: ..." line ("" if none)."""
    page = BeautifulSoup((root / "site" / "packets" / packet.stem / "index.html").read_text(encoding="utf-8"), "lxml")
    head = page.select_one(".packet-head")
    assert head is not None
    badge = head.select_one("abbr.grade")
    assert badge is not None
    [letter] = [c.removeprefix("grade-") for c in badge["class"] if c.startswith("grade-")]
    why = head.select_one(".limitations")
    return letter, why.get_text(" ", strip=True) if why else ""


@pytest.mark.parametrize(
    "owner",
    [pytest.param(LAB_OWNER, id="same-owner"), pytest.param("  A Lab\t(MEASURER) ", id="same-owner-recased")],
)
@pytest.mark.parametrize("options", MODES)
def test_a_reproduction_by_the_same_owner_under_a_second_key_is_not_independent(
    lab: Path,  # noqa: F811
    owner: str,
    options: tuple[str, ...],
    tally: Tally,
) -> None:
    original = lab_seal(lab, campaign())
    repro = seal_with(lab, reproduction_of(original), extra_key(lab, "second", owner))
    accepted(lab, options)  # both packets are honest: a lab may re-run its own campaign
    letter, why = shown_grade(lab, original)
    assert letter == "B", f"{original.stem} shows grade {letter} from its own lab's re-run {repro.stem}"
    assert NOT_REPRODUCED in why
    tally.add("listed key", "3 independence: the same owner's second key reproduces its own campaign", 2)


@pytest.mark.parametrize("options", MODES)
def test_a_reproduction_by_another_owner_lifts_the_grade(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    """The control: the same re-run signed by another lab's key is independent, so grade A."""
    original = lab_seal(lab, campaign())
    seal_with(lab, reproduction_of(original), extra_key(lab, "other", "another lab (measurer)"))
    accepted(lab, options)
    assert shown_grade(lab, original) == ("A", "")


def withheld_mtp_reproduction(original: Path) -> Document:
    """The reproduction as it comes out when its MTP server B drifts on one prompt: G2 and G3-B fail
    there (re-compared from the rows, as verification does), so that arm is withheld; the oracle arm,
    its own servers at 20.3 ms/token, repeats the original."""
    document = reproduction_of(original)
    arm = document["arms"][1]
    depth = arm["config"]["spec_depth"]
    oracle = make_rows(ms_per_token=20.3)
    spec_a = make_rows(ms_per_token=20.3 * 0.6, chunk=depth + 1)
    spec_b = make_rows(ms_per_token=20.3 * 0.6 + 0.05, chunk=depth + 1, diverge={4: 57})
    arm["servers"] = [
        make_server(label, rows).model_dump(mode="json") for label, rows in (("A", spec_a), ("B", spec_b))
    ]
    gates = (
        compare_rows("G2", SAME_SERVER, spec_a, spec_b),
        compare_rows("G3", document["arms"][0]["id"], spec_a, oracle, server="A"),
        compare_rows("G3", document["arms"][0]["id"], spec_b, oracle, server="B"),
    )
    arm["gates"] = [g.model_dump(mode="json") for g in gates]
    arm["withheld_reason"] = "G2 11/12 and G3 B 11/12: not identical to the oracle"
    return document


@pytest.mark.parametrize("options", MODES)
def test_another_owners_reproduction_that_withheld_an_arm_does_not_lift_it(
    lab: Path,  # noqa: F811
    options: tuple[str, ...],
    tally: Tally,
) -> None:
    """Another owner's key, the same stack, its own times, the oracle repeated: but its MTP arm was
    withheld, so the original's MTP result was not repeated and its page keeps grade B, naming the arm
    (catalog/checks/grade.py `arm_not_reproduced`)."""
    original = lab_seal(lab, campaign())
    repro = seal_with(lab, withheld_mtp_reproduction(original), extra_key(lab, "other", "another lab (measurer)"))
    withheld = json.loads(repro.read_bytes())["arms"][1]
    assert withheld["state"] == "withheld"
    accepted(lab, options)  # an honest failed reproduction: published as such
    letter, why = shown_grade(lab, original)
    assert letter == "B", f"{original.stem} shows grade {letter} from {repro.stem}, which withheld an arm"
    assert f"{NOT_REPRODUCED}: arm '{withheld['id']}' withheld in {repro.stem}" in why
    tally.add("listed key", "3 independence: another owner's reproduction withheld the MTP arm", 2)


# ---- 8 bounds: titles and labels that impersonate a grade or a state ----


def imported_as_measured(document: Document) -> None:
    """The sceptic's: an imported packet titled as a measured, graded, verified one."""
    document["title"] = "Qwen3.5-9B BF16 measured on fresh servers: grade A, verified"
    for arm in document["arms"]:
        arm["label"] = "Measured ✓ · Grade A · identical 12/12"


def imported_labels_measured(document: Document) -> None:
    for arm in document["arms"]:
        arm["label"] = "Measured ✓ · identical 12/12"


def imported_title_verified(document: Document) -> None:
    document["title"] = "Qwen3.5 4B W4A16 · one B70 · verified"


def imported_title_evidence_grade(document: Document) -> None:
    document["title"] = "Qwen3.5 4B W4A16 · Evidence A"


def measured_label_grade(document: Document) -> None:
    document["arms"][1]["label"] = "1 card, MTP depth 2 · GRADE-A"


def withheld_arm_labelled_measured(document: Document) -> None:
    """The MTP arm failed G3 (withheld); its label says it was measured and verified."""
    document["arms"][1]["label"] = "1 card, MTP depth 2 (measured, verified)"


def imported_title_full_width(document: Document) -> None:
    document["title"] = "Qwen3.5 4B W4A16 · ｍｅａｓｕｒｅｄ"


FORGERIES = [
    ("imported, titled measured, grade A, verified", IMPORTED_4B, imported_as_measured, "title"),
    ("imported, arm labels 'Measured ✓'", IMPORTED_4B, imported_labels_measured, "arms[0].label"),
    ("imported, title 'verified'", IMPORTED_4B, imported_title_verified, "title"),
    ("imported, title 'Evidence A' (the grade badge's words)", IMPORTED_4B, imported_title_evidence_grade, "title"),
    ("imported, title 'measured' in full-width letters", IMPORTED_4B, imported_title_full_width, "title"),
    ("measured, an arm label 'GRADE-A'", None, measured_label_grade, "arms[1].label"),
    ("measured, a withheld arm labelled 'measured, verified'", None, withheld_arm_labelled_measured, "arms[1].label"),
]


def _document(root: Path, name: str | None, attack: str) -> Document:
    if name is not None:
        return base(root, name)
    withheld = "withheld" in attack
    return measured_parts(g3_diverges=True).model_dump(mode="json") if withheld else campaign()


@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize(("attack", "name", "forge", "field"), [pytest.param(*f, id=f[0]) for f in FORGERIES])
def test_a_title_or_label_cannot_claim_a_grade_or_a_state(
    lab: Path,  # noqa: F811
    attack: str,
    name: str | None,
    forge: Any,
    field: str,
    options: tuple[str, ...],
    tally: Tally,
) -> None:
    document = _document(lab, name, attack)
    forge(document)
    refused(lab, lab_seal(lab, document), options, because=f"{field}: claims ")
    tally.add("listed key", f"8 bounds: {attack}", 2)


def honest_imported(document: Document) -> None:
    document["title"] = "Qwen3.5 4B W4A16 · one B70 · imported from a published benchmark (graded by this site)"


def honest_measured(document: Document) -> None:
    document["title"] = "Qwen3.5-9B BF16 measured on one Arc Pro B70, outputs verified against the oracle"
    document["arms"][0]["label"] = "1 card, no speculative decoding (oracle, measured)"


def honest_withheld(document: Document) -> None:
    document["title"] = "Qwen3.5-9B BF16 measured on one B70; MTP depth 2 withheld by G3"
    document["arms"][1]["label"] = "1 card, MTP depth 2 (withheld: G3 failed)"


@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize(
    ("name", "edit", "withheld"),
    [
        pytest.param(IMPORTED_4B, honest_imported, False, id="imported-says-imported"),
        pytest.param(None, honest_measured, False, id="measured-says-measured-verified"),
        pytest.param(None, honest_withheld, True, id="withheld-arm-says-withheld"),
    ],
)
def test_titles_and_labels_that_say_what_is_true_are_accepted(
    lab: Path,  # noqa: F811
    name: str | None,
    edit: Any,
    withheld: bool,
    options: tuple[str, ...],
) -> None:
    if name is not None:
        document = base(lab, name)
    else:
        document = measured_parts(g3_diverges=True).model_dump(mode="json") if withheld else campaign()
    edit(document)
    lab_seal(lab, document)
    accepted(lab, options)
