"""A configuration's history and the changes flagged between runs, worked by hand.

Image A repeats 100, 102, 104 (mean 102, s² = 4); image B repeats 94, 96, 98 (mean 96, s² = 4).
Welch: standard error √(4/3 + 4/3) = 1.633; degrees of freedom (8/3)² / ((4/3)²/2 + (4/3)²/2) = 4;
t(0.975, 4) = 2.776; half-width 4.534. The change is −6 ± 4.534 tok/s, as a share of 102:
−5.88 % ± 4.45 %: slower beyond the interval, so flagged, naming the image.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from catalog.checks.history import history_of, setup_of, welch_difference
from catalog.model.packet import Arm, Packet, ServerRun
from testkit.samples import measured_parts
from tests.catalog.factories import seal_parts

IMAGE_A = "sha256:" + "a" * 64
IMAGE_B = "sha256:" + "b" * 64


def packet(value: float, *, day: int, image: str, version: str = "0.17.1", driver: str | None = None) -> Packet:
    """A measured oracle arm whose two servers publish value ± 1 (distinct timings per packet)."""
    runtime = {"image": "vllm/vllm-openai-xpu:latest", "image_digest": image, "version": version}
    parts = measured_parts(
        spec=False, ms_per_token=20.0 + day, identity_overrides={"runtime": runtime, "host": {"driver": driver}}
    )
    arm = parts.arms[0]
    servers = [
        ServerRun.model_validate({**s.model_dump(), "decode_tok_s": v})
        for s, v in zip(arm.servers, (value - 1, value + 1), strict=True)
    ]
    created = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(days=day)
    return seal_parts(
        parts.model_copy(update={"arms": [arm.model_copy(update={"servers": servers})], "created": created})
    ).packet


def candidates(packets: Sequence[Packet]) -> list[tuple[Packet, Arm]]:
    return [(p, p.arms[0]) for p in packets]


def test_welch_difference_worked_by_hand() -> None:
    interval = welch_difference([100.0, 102.0, 104.0], [94.0, 96.0, 98.0])
    assert interval is not None
    assert interval.centre == pytest.approx(-6.0)
    assert interval.half_width == pytest.approx(4.534, abs=1e-3)
    assert welch_difference([100.0], [94.0, 96.0]) is None


def test_a_new_image_slower_beyond_the_interval_is_flagged_naming_it() -> None:
    old = [packet(v, day=d, image=IMAGE_A) for d, v in enumerate((100.0, 102.0, 104.0))]
    new = [packet(v, day=10 + d, image=IMAGE_B) for d, v in enumerate((94.0, 96.0, 98.0))]
    history = history_of(candidates([*new, *old]))  # order given does not matter: runs sort by date
    assert [run.setup.image for run in history.runs] == [IMAGE_A, IMAGE_B]
    assert [run.combined.n for run in history.runs] == [3, 3]
    (change,) = history.changes
    assert change.percent == pytest.approx(-5.882, abs=1e-3)
    assert change.plus_minus == pytest.approx(4.445, abs=1e-3)
    assert change.flagged
    assert change.words() == "slower by 5.9 % ± 4.4 % since image sha256:bbbbbbbbbbbb…"


def test_a_move_within_the_interval_is_not_a_change() -> None:
    old = [packet(v, day=d, image=IMAGE_A) for d, v in enumerate((100.0, 102.0, 104.0))]
    new = [packet(v, day=10 + d, image=IMAGE_B, version="0.18.0") for d, v in enumerate((101.0, 103.0, 105.0))]
    (change,) = history_of(candidates([*old, *new])).changes
    assert not change.flagged
    assert change.what_changed == ["image sha256:bbbbbbbbbbbb…", "vLLM 0.17.1 → 0.18.0"]
    assert change.words().endswith(": within the interval, not a change")


def test_a_run_measured_once_claims_no_change() -> None:
    old = [packet(100.0, day=0, image=IMAGE_A)]
    new = [packet(v, day=10 + d, image=IMAGE_A, driver="1.2.3") for d, v in enumerate((80.0, 81.0))]
    history = history_of(candidates([*old, *new]))
    (change,) = history.changes
    assert change.plus_minus is None and not change.flagged
    assert change.words() == (
        "-19.5 % since driver none → 1.2.3: a run measured once has no interval, so no change is claimed"
    )


def test_the_same_setup_is_one_run_and_its_identity_names_what_it_was_measured_with() -> None:
    packets = [packet(v, day=d, image=IMAGE_A) for d, v in enumerate((100.0, 102.0))]
    history = history_of(candidates(packets))
    assert len(history.runs) == 1 and history.changes == []
    setup = setup_of(packets[0])
    assert (setup.image, setup.vllm, setup.workload) == (IMAGE_A, "0.17.1", "strict-v1 512 tokens")
    assert setup.weights == "0123456789abcdef0123456789abcdef01234567"  # the checkpoint's revision
