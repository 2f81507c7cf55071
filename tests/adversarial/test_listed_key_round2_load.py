"""A listed key cannot publish a lie about a load sweep (tests/adversarial/test_listed_key.py's
harness): a lab seals, with its listed key, a campaign carrying a load sweep no measurement gives,
and `python -m catalog.verify` and `python -m builder build` refuse each, published and with
`--allow-unsigned`, by an error line naming the packet and the field; the same lab's honest sweep
is accepted by both (the control).

- every request's tpot_ms cut to 0.6 x what its own ttft_ms and e2e_ms give (the site showed
  "1 user: aggregate 30.87 tok/s, 51.44 tok/s per user", goodput 0 % -> 62.5 % under a TPOT SLO):
  refused at the request's tpot_ms (catalog/checks/load_sweep.py, STREAM_TAIL_SHARE/STREAM_TAIL_MS);
- every request 100 tokens long and identical_to_oracle, while the oracle arm's rows for those
  prompts hold 120 tokens: refused at the request's identical_to_oracle;
- an imported packet (the lab's importer key) whose load sweep claims every request identical to
  the oracle (the site printed "24 of 24 outputs identical" under a speed-only curve): no importer
  compares outputs, so refused at each level's first identical_to_oracle
  (catalog/checks/workload.py `_unmeasured_identity_problems`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from catalog.model.packet import PacketParts
from testkit.samples import make_load_sweep, with_load
from tests.adversarial.test_forgery import MODES, refused
from tests.adversarial.test_listed_key import accepted, base, campaign, lab, lab_seal  # noqa: F401 (lab: fixture)

Document = dict[str, Any]
ARM = "tp1-mtp0"  # the campaign's oracle arm
FIRST = "ladders[0].load.levels[0].requests[0]"
IMPORTED = "qwen3.5-9b-w4a16-8c08b0d2"  # a committed imported packet; its oracle arm tp1-mtp0


def with_sweep(document: Document, sweep: Document) -> Document:
    document["ladders"] = [{"arm": ARM, "kind": "load", "load": sweep}]
    return document


def tpot_below_its_own_times() -> Document:
    """Every request's tpot_ms 0.6 x (e2e - ttft) / (tokens - 1); ttft_ms and e2e_ms unchanged."""
    sweep = make_load_sweep().model_dump(mode="json")
    for level in sweep["levels"]:
        for r in level["requests"]:
            r["tpot_ms"] = round(r["tpot_ms"] * 0.6, 3)
    return with_sweep(campaign(), sweep)


def identical_with_another_length() -> Document:
    """Every request 100 tokens (its e2e_ms made to fit), still identical_to_oracle; the oracle's
    rows for those prompts hold 120."""
    sweep = make_load_sweep().model_dump(mode="json")
    for level in sweep["levels"]:
        for r in level["requests"]:
            r["output_tokens"] = 100
            r["e2e_ms"] = round(r["ttft_ms"] + 99 * r["tpot_ms"], 3)
    return with_sweep(campaign(), sweep)


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_tpot_below_its_own_ttft_and_e2e_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    refused(lab, lab_seal(lab, tpot_below_its_own_times()), options, because=f"{FIRST}.tpot_ms")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_identical_to_the_oracle_with_another_length_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    refused(lab, lab_seal(lab, identical_with_another_length()), options, because=f"{FIRST}.identical_to_oracle")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_an_imported_sweep_claiming_identity_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    """The red team's forgery: an importer-signed packet whose sweep says what only the runner
    measures; the same sweep with identity unknown, as runner/import_load_sweep.py writes it, is
    within every other check (tests/catalog/test_oracle_identity_claims.py)."""
    document = with_sweep(base(lab, IMPORTED), make_load_sweep(checked=True).model_dump(mode="json"))
    refused(lab, lab_seal(lab, document), options, because=f"{FIRST}.identical_to_oracle")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_an_honest_sweep_is_accepted(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    """The control: the same campaign with testkit's honest sweep on its oracle arm."""
    parts = with_load(PacketParts.model_validate(campaign()), {ARM: make_load_sweep()})
    lab_seal(lab, parts.model_dump(mode="json"))
    accepted(lab, options)
