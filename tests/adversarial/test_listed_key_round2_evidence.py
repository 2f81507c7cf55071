"""A listed key cannot publish a lie, round 2 (tests/adversarial/test_listed_key.py's harness): what
a sceptic sealed with a lab key listed the documented way, each accepted until the rule named beside
it, and each now refused by `python -m catalog.verify` and `python -m builder build`, published and
with `--allow-unsigned`, by an error naming the packet and the field.

- 3 independence: a "reproduction" by another lab on another card (an Arc Pro B60 for a B70 packet),
  which would lift the original to grade A: a reproduction runs on its original's hardware id
  (catalog/checks/consistency.py `reproduction_problems`);
- 5 workload: speculative counters implying 15,000 tokens on servers whose rows hold 1,440 (each
  verify step yields one token plus its accepted ones; the counters cover the strict suite), and
  servers that record only the canary they passed (catalog/checks/consistency.py
  `spec_metric_problems`, catalog/checks/evidence.py `canary_problems`);
- 2 physics: a server started in 1 µs (less than one read of its 19.3 GB of weights), and a startup
  and a context TTFT of 1.7e308 (over a day; catalog/checks/consistency.py `figure_problems`,
  catalog/checks/physics.py `_startup_problems`);
- 4 imports: an imported arm carrying per-prompt rows and token arrays, as if measured here
  (catalog/checks/consistency.py `server_problems`).

Beside them, honest packets sealed by the same keys are accepted: counters that fit the rows, a
reproduction by another lab on the same card, the committed import as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from catalog.model.metrics import compare_rows, server_decode_rate, server_ttft_ms
from catalog.model.packet import PacketParts, PromptRow
from catalog.packets.seal import seal, write_packet
from catalog.packets.signing import HostKey, host_key
from testkit.samples import make_rows, measured_parts, strict_suite
from tests.adversarial.test_forgery import MODES, refused
from tests.adversarial.test_listed_key import (  # noqa: F401 (lab: a fixture)
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


# ---- a second lab, listed the documented way, and its seal ----


def other_lab(root: Path) -> HostKey:
    """Another lab's measurer key, its keys.yaml lines appended as printed and dated."""
    key = host_key("measurer", config_dir=root.parent / f"{root.name}-other-lab-keys")
    keys = root / "data" / "keys.yaml"
    entry = key.keys_yaml_entry("another lab (measurer)")
    entry = entry.replace(f"valid_from: {date.today().isoformat()}", f"valid_from: {LAB_VALID_FROM}")
    keys.write_text(keys.read_text(encoding="utf-8") + entry, encoding="utf-8")
    return key


def seal_with(root: Path, document: Document, key: HostKey) -> Path:
    return write_packet(seal(PacketParts.model_validate(draft_of(document)), key), root / "packets")


def reproduction(*, ms_per_token: float = 20.3, hardware: str = "arc_pro_b70") -> Document:
    """Another lab's run of the lab's campaign (`reproduced` names it): its own boot, its own timings."""
    document = measured_parts(
        ms_per_token=ms_per_token, title=f"Qwen3.5-9B BF16 on one {hardware}, reproduced", hardware=hardware
    ).model_dump(mode="json")  # a title naming the card it ran on (catalog/checks/identity.py card_claim_problems)
    document["identity"]["host"]["boot_id"] = "9a9a9a9a-second-boot"
    document["created"] = "2026-12-01T10:15:00Z"
    return document


def reproduced(root: Path, document: Document) -> Path:
    """The lab's campaign sealed, and `document` (naming it) sealed by another lab's listed key."""
    original = lab_seal(root, campaign())
    document["reproduces"] = original.stem
    return seal_with(root, document, other_lab(root))


# ---- 3 independence: a reproduction on another card ----


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_reproduction_on_another_card_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    """A second lab "reproduces" a B70 packet on an Arc Pro B60 (another card, another ceiling) at
    a speed the B60 can reach (33 tok/s; at the B70's 50 its physics refuses it already)."""
    forged = reproduced(lab, reproduction(ms_per_token=30.0, hardware="arc_pro_b60"))
    refused(lab, forged, options, because="identity.host.hardware")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_reproduction_on_the_same_card_is_accepted(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    """The control: another lab on the same card, on a host of 4 of them (TP 1 arms, as the original's)."""
    document = reproduction()
    document["identity"]["host"]["card_count"] = 4
    reproduced(lab, document)
    accepted(lab, options)


# ---- 5 workload: speculative counters and canaries ----


def spec_metrics(drafts: int, drafted: int, accepted_tokens: int) -> Callable[[Document], None]:
    def edit(document: Document) -> None:
        for server in document["arms"][1]["servers"]:
            server["spec_metrics"] = {
                "drafts": drafts,
                "draft_tokens": drafted,
                "accepted_tokens": accepted_tokens,
                "accepted_per_position": [accepted_tokens // 2, accepted_tokens - accepted_tokens // 2],
            }

    return edit


def only_the_passed_canary(document: Document) -> None:
    """Every server keeps the canary it passed ('multiply'); the other three of the set are left out."""
    for arm in document["arms"]:
        for server in arm["servers"]:
            server["canaries"] = [c for c in server["canaries"] if c["id"] == "multiply"]


# ---- 2 physics: startup and times no server takes ----


def startup_in_a_microsecond(document: Document) -> None:
    """19.3 GB of weights on the card in 1 µs."""
    for arm in document["arms"]:
        for server in arm["servers"]:
            server["startup_s"] = 0.000001


def times_of_1e308(document: Document) -> None:
    """A startup and a context TTFT of 1.7e308: finite, positive, printed as 309 digits."""
    for arm in document["arms"]:
        for server in arm["servers"]:
            server["startup_s"] = 1.7e308
    document["ladders"] = [
        {
            "arm": "tp1-mtp0",
            "kind": "context",
            "context": [{"depth_tokens": 4096, "content_class": "prose", "decode_tok_s": 20.0, "ttft_ms": 1.7e308}],
        }
    ]


# ---- 4 imports: rows in an imported packet ----


def import_with_rows(document: Document) -> None:
    """The imported 4B oracle arm given per-prompt rows and token arrays, its figures and G1 derived
    from them as the runner derives a measured arm's."""
    document["workload"].update(suite_id="strict-v1", suite_sha256=strict_suite().sha256)
    arm = document["arms"][0]
    rows: list[list[PromptRow]] = []
    for server, pace in zip(arm["servers"], (9.75, 9.8), strict=True):
        made = make_rows(ms_per_token=pace)
        rows.append(made)
        server["rows"] = [r.model_dump(mode="json") for r in made]
        server["decode_tok_s"] = server_decode_rate(made)
        server["ttft_ms"] = server_ttft_ms(made)
    arm["gates"] = [compare_rows("G1", "the arm's second fresh server", rows[0], rows[1]).model_dump(mode="json")]
    arm["published_figure"] = round((arm["servers"][0]["decode_tok_s"] + arm["servers"][1]["decode_tok_s"]) / 2, 2)


# (what is forged, the committed packet it starts from or None for a campaign, the edit, the field)
FORGERIES: list[tuple[str, str | None, Callable[[Document], None], str]] = [
    (
        "counters imply 15,000 tokens for 1,440",
        None,
        spec_metrics(5000, 10000, 10000),
        "servers[0].spec_metrics.drafts",
    ),
    ("3 of 4 canaries left out", None, only_the_passed_canary, "arms[0].servers[0].canaries"),
    ("a startup of 1 µs", None, startup_in_a_microsecond, "arms[0].servers[0].startup_s"),
    ("times of 1.7e308", None, times_of_1e308, "ladders[0].context[0].ttft_ms"),
    ("an import with rows", IMPORTED_4B, import_with_rows, "arms[0].servers[0].rows"),
]


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize(("what", "start", "edit", "field"), FORGERIES, ids=[f[0] for f in FORGERIES])
def test_a_listed_key_cannot_publish_these(
    lab: Path,  # noqa: F811
    what: str,
    start: str | None,
    edit: Callable[[Document], None],
    field: str,
    options: tuple[str, ...],
) -> None:
    document = base(lab, start) if start else campaign()
    edit(document)
    refused(lab, lab_seal(lab, document), options, because=field)


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_the_same_key_publishes_honest_counters_and_the_import(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    """The controls: counters that fit the rows (480 drafts of 2, 960 accepted: 480 steps of 3 tokens,
    the 1,440 the rows hold), the committed import as it is."""
    document = campaign()
    spec_metrics(480, 960, 960)(document)
    lab_seal(lab, document)
    lab_seal(lab, base(lab, IMPORTED_4B))
    accepted(lab, options)
