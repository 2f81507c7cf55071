"""The sceptic's second round, one rule each (catalog/checks/consistency.py, catalog/checks/evidence.py):
a reproduction on another card, speculative counters beyond the tokens their window produced, a
server that records only the canaries it passed, times no server takes (a day, or less than one read
of the weights), and an import carrying per-prompt rows. Each refusal names its field and values;
each honest neighbour passes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from catalog.checks.consistency import MAX_TIME_S, consistency_problems, reproduction_problems
from catalog.checks.evidence import canary_problems
from catalog.model.packet import Packet
from catalog.recipes.hardware import HardwareFile
from catalog.store.documents import load_file
from tests.catalog.factories import (
    DATA,
    canary_set,
    catalog_recipe,
    make_rows,
    measured_draft,
    measured_packet,
    published_arm,
    published_draft,
    seal_draft,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)  # the factories' packets are created 2026-11-30T10:15Z
B70 = load_file(HardwareFile, DATA / "hardware.yaml").by_id()["arc_pro_b70"]
RECIPE_9B = catalog_recipe("qwen3.5-9b")
Draft = dict[str, Any]


def found(packet: Packet) -> dict[str, str]:
    return dict(consistency_problems(packet, RECIPE_9B, B70, NOW))


def with_servers(change: Any) -> Packet:
    """The factory campaign with `change(server)` applied to every server of every arm."""
    draft = measured_draft()
    for arm in draft["arms"]:
        for server in arm["servers"]:
            change(server)
    return seal_draft(draft)


# --- 1. a reproduction runs on its original's card -------------------------------------------


def _reproduction(**kw: Any) -> Draft:
    draft = measured_draft(title="again", **kw)
    draft["identity"]["host"]["boot_id"] = "another-boot"
    return draft


def test_a_reproduction_on_another_card_is_refused() -> None:
    original = measured_packet()
    other_card = seal_draft(_reproduction(ms_per_token=30.0, hardware="arc_pro_b60"))
    assert dict(reproduction_problems(other_card, original)) == {
        "identity.host.hardware": (
            f"is 'arc_pro_b60', but the packet it reproduces ({original.id}) ran on 'arc_pro_b70': a reproduction"
            " runs on the same card (another card has another ceiling; its numbers are another campaign)"
        )
    }


def test_a_reproduction_on_more_cards_of_the_same_kind_passes() -> None:
    draft = _reproduction(ms_per_token=20.5)
    draft["identity"]["host"]["card_count"] = 4  # the same arms (TP 1) on a host with more cards
    assert reproduction_problems(seal_draft(draft), measured_packet()) == []


# --- 2. speculative counters within the tokens of their window --------------------------------


def _counters(drafts: int, drafted: int, accepted: int) -> Packet:
    draft = measured_draft()
    for server in draft["arms"][1]["servers"]:
        server["spec_metrics"] = {
            "drafts": drafts,
            "draft_tokens": drafted,
            "accepted_tokens": accepted,
            "accepted_per_position": [accepted // 2, accepted - accepted // 2],
        }
    return seal_draft(draft)


def test_counters_beyond_the_rows_tokens_are_refused() -> None:
    problems = found(_counters(5000, 10000, 10000))
    assert set(problems) == {f"arms[1].servers[{j}].spec_metrics.drafts" for j in (0, 1)}
    assert problems["arms[1].servers[0].spec_metrics.drafts"] == (
        "drafts + accepted_tokens = 5,000 + 10,000 = 15,000 tokens (each verify step yields one token plus its"
        " accepted draft tokens), more than the 1,440 completion tokens the server's 12 rows produced over the"
        " strict suite the counters cover (+ depth 2 a row that its last step may count past the row's end)"
    )


def test_counters_that_fit_the_rows_pass() -> None:
    assert found(_counters(480, 960, 960)) == {}  # 480 steps of 3 tokens: the 1,440 the rows hold
    assert found(_counters(504, 1008, 960)) == {}  # + depth 2 a row (12 × 2 = 24) counted past the end


def test_one_token_past_the_window_is_refused() -> None:
    assert set(found(_counters(505, 1010, 960))) == {f"arms[1].servers[{j}].spec_metrics.drafts" for j in (0, 1)}


# --- 3. a server that records canaries records its whole set ----------------------------------


def test_canaries_left_out_are_refused() -> None:
    packet = with_servers(lambda s: s.update(canaries=[c for c in s["canaries"] if c["id"] == "multiply"]))
    problems = dict(canary_problems(packet, canary_set()))
    assert set(problems) == {f"arms[{i}].servers[{j}].canaries" for i in (0, 1) for j in (0, 1)}
    assert problems["arms[0].servers[0].canaries"] == (
        "records 1 of the 4 canaries of canaries-v1; missing 'repeat-8', 'copy-phrase', 'json-keys': a server that"
        " records canaries records every one of its set"
    )


def test_a_canary_recorded_twice_is_refused() -> None:
    draft = measured_draft()
    server = draft["arms"][0]["servers"][1]
    server["canaries"] = [*server["canaries"], server["canaries"][1]]
    problems = dict(canary_problems(seal_draft(draft), canary_set()))
    assert problems == {
        "arms[0].servers[1].canaries": "records canary 'multiply' more than once; each is asked once",
    }


def test_every_canary_recorded_once_passes_and_none_is_a_limitation() -> None:
    assert canary_problems(measured_packet(), canary_set()) == []
    assert canary_problems(with_servers(lambda s: s.update(canaries=[])), canary_set()) == []


# --- 4. times no server takes -----------------------------------------------------------------


def test_a_time_over_a_day_is_refused() -> None:
    draft = measured_draft()
    draft["arms"][0]["servers"][0]["startup_s"] = 1.7e308
    draft["arms"][0]["servers"][1]["startup_s"] = MAX_TIME_S + 1
    draft["ladders"] = [
        {
            "arm": "tp1-mtp0",
            "kind": "context",
            "context": [{"depth_tokens": 4096, "content_class": "prose", "decode_tok_s": 20.0, "ttft_ms": 1.7e308}],
        }
    ]
    problems = found(seal_draft(draft))
    assert problems["arms[0].servers[0].startup_s"] == (
        "is 1.7e+308 s, over the 86,400 s (one day) any time a packet records may hold: no server takes a day"
        " to start or to answer one request"
    )
    assert problems["arms[0].servers[1].startup_s"].startswith("is 8.64e+04 s, over the 86,400 s")
    assert problems["ladders[0].context[0].ttft_ms"].startswith("is 1.7e+308 ms, over the 86,400,000 ms (one day)")


def test_a_day_exactly_passes() -> None:
    assert found(with_servers(lambda s: s.update(startup_s=MAX_TIME_S))) == {}


def test_a_startup_faster_than_one_read_of_the_weights_is_refused() -> None:
    problems = found(with_servers(lambda s: s.update(startup_s=0.000001)))
    assert set(problems) == {f"arms[{i}].servers[{j}].startup_s" for i in (0, 1) for j in (0, 1)}
    message = problems["arms[0].servers[0].startup_s"]
    assert message.startswith("1e-06 s is less than the 0.0175 s one read of the arm's weights takes at arc_pro_b70")
    assert "(608 GB/s a card, ÷ 1.5): a server answers only once its weights are in the cards' memory" in message


def test_a_startup_of_a_second_passes() -> None:
    assert found(with_servers(lambda s: s.update(startup_s=1.0))) == {}


# --- 5. an import carries no rows -------------------------------------------------------------


@pytest.mark.parametrize("provenance", ["imported", "screened"])
def test_an_import_with_rows_is_refused(provenance: str) -> None:
    gates = [("G1", 12, 12, True)] if provenance == "imported" else []
    draft = published_draft([published_arm("tp1-mtp0", [50.0, 50.2], gates=gates)], provenance=provenance)
    draft["arms"][0]["servers"][1]["rows"] = [r.model_dump(mode="json") for r in make_rows(ms_per_token=20.0)]
    assert found(seal_draft(draft))["arms[0].servers[1].rows"] == (
        f"server 'B' of arm 'tp1-mtp0' carries 12 per-prompt row(s), but the packet is {provenance}: rows and"
        " their token arrays come only from this repository's runner (a measured packet); an import carries"
        " the published values alone"
    )


def test_an_import_without_rows_passes() -> None:
    draft = published_draft([published_arm("tp1-mtp0", [50.0, 50.2], gates=[("G1", 12, 12, True)])])
    assert "arms[0].servers[1].rows" not in found(seal_draft(draft))
