"""A title or an arm label cannot impersonate what the site derives (catalog/checks/bounds.py
`claim_problems`): no grade ("grade A".."grade D", "Evidence A", any case, full-width letters too),
and no state word (measured, imported, screened, withheld, verified) its packet or arm does not
have; "verified" only of a measured arm, "imported" also of a screened or withheld transcription;
and no arm label that names another card count, speculative depth or method than the arm's config.
Each refused by its field and the word; the truth passes, and so does every committed packet."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from catalog.checks.bounds import claim_problems, text_bound_problems
from catalog.model.packet import Packet
from catalog.packets.verify import read_packet
from tests.catalog.factories import published_arm, published_draft, seal_draft
from tests.catalog.test_consistency import edited

REPO = Path(__file__).resolve().parents[2]
G1_OK = ("G1", 12, 12, True)
Draft = dict[str, Any]


def imported(title: str = "Qwen3.5 4B W4A16 · one B70", label: str = "1 card, no speculative decoding") -> Packet:
    arm = {**published_arm("tp1-mtp0", [50.0, 50.2], gates=[G1_OK]), "label": label}
    return seal_draft(published_draft([arm], title=title))


def screened(title: str) -> Packet:
    return seal_draft(published_draft([published_arm("tp1-mtp0", [50.0, 50.2])], provenance="screened", title=title))


def titled(title: str) -> Callable[[Draft], None]:
    return lambda d: d.update(title=title)


def labelled(index: int, label: str) -> Callable[[Draft], None]:
    return lambda d: d["arms"][index].update(label=label)


REFUSED = [
    ("the sceptic's title", lambda: imported(title="Qwen3.5-9B BF16 measured on fresh servers: grade A, verified"),
     "title", "grade A"),
    ("the sceptic's label", lambda: imported(label="Measured ✓ · Grade A · identical 12/12"), "arms[0].label",
     "Grade A"),
    ("an imported arm labelled measured", lambda: imported(label="Measured ✓ · identical 12/12"), "arms[0].label",
     "Measured"),
    ("an imported title verified", lambda: imported(title="Qwen3.5 4B, verified"), "title", "verified"),
    ("grade in words, lower case", lambda: edited(labelled(1, "MTP depth 2, grade b")), "arms[1].label", "grade b"),
    ("grade with a dash", lambda: edited(titled("Qwen3.5-9B BF16 · GRADE-A")), "title", "GRADE-A"),
    ("the grade badge's words", lambda: edited(titled("Qwen3.5-9B BF16 · Evidence A")), "title", "Evidence A"),
    ("full-width letters", lambda: edited(titled("Qwen3.5-9B BF16 · ｇｒａｄｅ Ａ")), "title", "grade A"),
    ("a measured packet titled imported", lambda: edited(titled("Qwen3.5-9B BF16, imported")), "title", "imported"),
    ("a measured packet titled withheld", lambda: edited(titled("Qwen3.5-9B BF16 withheld")), "title", "withheld"),
    ("a screened packet titled measured", lambda: screened("a curve measured on one B70"), "title", "measured"),
    ("a screened packet titled verified", lambda: screened("a verified curve"), "title", "verified"),
    ("a withheld arm labelled measured",
     lambda: edited(labelled(1, "1 card, MTP depth 2 (measured)"), g3_diverges=True), "arms[1].label", "measured"),
    ("a withheld arm labelled verified",
     lambda: edited(labelled(1, "1 card, MTP depth 2, verified"), g3_diverges=True), "arms[1].label", "verified"),
    ("an oracle labelled screened", lambda: edited(labelled(0, "oracle (screened)")), "arms[0].label", "screened"),
    ("one card labelled two", lambda: edited(labelled(0, "2 cards, no speculative decoding")), "arms[0].label",
     "2 cards"),
    ("one card labelled TP4", lambda: edited(labelled(1, "TP4 · MTP depth 2")), "arms[1].label", "TP4"),
    ("cards in words", lambda: edited(labelled(1, "eight GPUs, MTP depth 2")), "arms[1].label", "eight GPUs"),
    ("another depth", lambda: edited(labelled(1, "1 card, MTP depth 5")), "arms[1].label", "depth 5"),
    ("a depth range without it", lambda: edited(labelled(1, "1 card, MTP depths 3-6")), "arms[1].label",
     "depths 3-6"),
    ("a speculative arm labelled plain", lambda: edited(labelled(1, "1 card, no speculative decoding")),
     "arms[1].label", "no speculative"),
    ("a speculative arm labelled the oracle", lambda: edited(labelled(1, "1 card (oracle)")), "arms[1].label",
     "oracle"),
    ("another method", lambda: edited(labelled(1, "1 card, EAGLE-3 depth 2")), "arms[1].label", "EAGLE-3"),
    ("a method on the oracle", lambda: edited(labelled(0, "1 card, n-gram")), "arms[0].label", "n-gram"),
]  # fmt: skip


def drafted(index: int, head: str, env: dict[str, str] | None = None) -> Callable[[Draft], None]:
    return lambda d: d["arms"][index]["config"].update(draft_head=head, env=env or {})


INT4_SWITCH = {"VLLM_XPU_DRAFT_LM_HEAD_INT4": "1"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (labelled(1, "1 card, MTP depth 2 with the draft INT4 head"), "label"),
        (drafted(1, "draft INT4 head"), "config.draft_head"),
    ],
)
def test_the_int4_head_named_without_its_switch_is_refused(change: Callable[[Draft], None], field: str) -> None:
    """Physics and projections read VLLM_XPU_DRAFT_LM_HEAD_INT4; the headline quotes the draft head."""
    problems = dict(claim_problems(edited(change)))
    assert problems == {
        "arms[1].config.env": f"sets no VLLM_XPU_DRAFT_LM_HEAD_INT4=1, but the arm's {field} names 'INT4 head'"
    }


def test_a_draft_head_belongs_to_a_speculative_arm() -> None:
    problems = dict(claim_problems(edited(drafted(0, "draft FP8 head"))))
    assert problems == {
        "arms[0].config.draft_head": "names a draft head; the arm decodes without speculation (config.spec_depth 0)"
    }


@pytest.mark.parametrize(("make", "field", "word"), [pytest.param(*r[1:], id=r[0]) for r in REFUSED])
def test_a_claim_is_refused_by_field_and_word(make: Callable[[], Packet], field: str, word: str) -> None:
    problems = dict(claim_problems(make()))
    assert field in problems, problems
    assert f"claims {word!r}" in problems[field]
    assert dict(text_bound_problems(make()))[field] == problems[field]  # verify and the builder report it


ACCEPTED = [
    ("an imported title imported", lambda: imported(title="Qwen3.5 4B W4A16 · imported from a published run")),
    ("graded, upgrade: no grade", lambda: imported(title="Qwen3.5 4B, graded here after an upgrade")),
    ("a measured title measured, verified", lambda: edited(titled("Qwen3.5-9B BF16 measured and verified"))),
    ("a measured arm verified", lambda: edited(labelled(0, "oracle, measured, verified"))),
    ("a withheld arm labelled withheld",
     lambda: edited(labelled(1, "1 card, MTP depth 2 (withheld by G3)"), g3_diverges=True)),
    ("a packet with a withheld arm titled withheld",
     lambda: edited(titled("Qwen3.5-9B BF16, MTP withheld"), g3_diverges=True)),
    ("a screened title screened", lambda: screened("a screened curve: speed only")),
    ("a screened transcription titled imported", lambda: screened("imported campaign")),
    ("unverified is not verified", lambda: imported(title="Qwen3.5 4B, unverified by this runner")),
    ("its own cards, method and depth", lambda: edited(labelled(1, "one card · TP1 · mtp decoding, depth 2"))),
    ("a depth range holding it", lambda: edited(labelled(1, "1 card, MTP depths 0-6"))),
    ("an MTP model type", lambda: edited(lambda d: d["arms"][1]["config"].update(spec_method="qwen3_5_mtp"))),
    ("the INT4 head with its switch", lambda: edited(drafted(1, "draft INT4 head", INT4_SWITCH))),
]  # fmt: skip


@pytest.mark.parametrize("make", [pytest.param(a[1], id=a[0]) for a in ACCEPTED])
def test_the_truth_passes(make: Callable[[], Packet]) -> None:
    assert claim_problems(make()) == []


def test_every_committed_packet_passes() -> None:
    paths = [p for p in sorted((REPO / "packets").glob("*.json")) if not p.name.endswith(".dsse.json")]
    assert paths
    for path in paths:
        assert claim_problems(read_packet(path, None)) == [], path.name
