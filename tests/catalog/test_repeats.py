"""Repeats combined into a centre with a t-interval, worked by hand; forged repeats refused.

Hand-worked values (Student's t quantiles from any t table, e.g. NIST/SEMATECH e-Handbook
1.3.6.7.2: t(0.975, 1) = 12.706, t(0.975, 2) = 4.303, t(0.975, 4) = 2.776, t(0.975, 10) = 2.228,
t(0.975, 30) = 2.042):

- repeats 100, 102, 104: mean 102; s = 2; s/√3 = 1.1547; half-width 4.303 x 1.1547 = 4.968;
  95 % CI 97.03-106.97.
- repeats 50, 52: mean 51; s = √2; s/√2 = 1; half-width 12.706; CI 38.29-63.71.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from catalog.checks.repeats import combine, student_t_cdf, t_interval, t_quantile
from catalog.model.arrays import to_uint32
from catalog.model.packet import CampaignRef, Packet, PromptRow, ServerRun
from testkit.samples import measured_parts
from tests.catalog.factories import seal_parts


@pytest.mark.parametrize(
    ("df", "quantile"), [(1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281), (30, 2.0423), (1000, 1.9623)]
)
def test_t_quantiles_match_the_table(df: int, quantile: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(quantile, abs=1e-4)
    assert student_t_cdf(quantile, df) == pytest.approx(0.975, abs=1e-5)


def test_the_t_distribution_is_symmetric_and_fractional_degrees_lie_between() -> None:
    assert student_t_cdf(-1.5, 3) == pytest.approx(1 - student_t_cdf(1.5, 3), abs=1e-12)
    assert t_quantile(0.975, 2) > t_quantile(0.975, 2.5) > t_quantile(0.975, 3)


def test_a_t_interval_worked_by_hand() -> None:
    interval = t_interval([100.0, 102.0, 104.0])
    assert interval is not None
    assert interval.centre == pytest.approx(102.0)
    assert interval.low == pytest.approx(97.032, abs=1e-3)
    assert interval.high == pytest.approx(106.968, abs=1e-3)
    pair = t_interval([50.0, 52.0])
    assert pair is not None
    assert pair.low == pytest.approx(38.294, abs=1e-3) and pair.high == pytest.approx(63.706, abs=1e-3)
    assert t_interval([100.0]) is None  # one repeat: no interval


def repeat(
    values: tuple[float, float],
    *,
    day: int = 0,
    ms_per_token: float = 20.0,
    shift_us: int = 0,
    scale: float = 1.0,
    copy_of: Packet | None = None,
    campaign: CampaignRef | None = None,
    boot: str = "boot-1",
) -> Packet:
    """A measured packet of one oracle arm whose two servers publish `values` (its rows' timings
    are real; their figures stand in so the arithmetic is by hand). `copy_of` re-seals another
    packet's servers, every time scaled by `scale` and shifted by `shift_us`: a forged repeat."""
    parts = measured_parts(spec=False, ms_per_token=ms_per_token, identity_overrides={"host": {"boot_id": boot}})
    arm = parts.arms[0]
    source = copy_of.arms[0].servers if copy_of is not None else arm.servers
    servers = [
        ServerRun.model_validate(
            {**server.model_dump(), "decode_tok_s": value, "rows": [_shifted(r, shift_us, scale) for r in server.rows]}
        )
        for server, value in zip(source, values, strict=True)
    ]
    created = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(days=day)
    changed: dict[str, Any] = {"arms": [arm.model_copy(update={"servers": servers})], "created": created}
    if campaign is not None:
        changed["campaign"] = campaign
    return seal_parts(parts.model_copy(update=changed)).packet


def _shifted(row: PromptRow, shift_us: int, scale: float = 1.0) -> PromptRow:
    times = [round(t * scale) + shift_us for t in row.token_times_us]
    return row.model_copy(update={"token_times_us": to_uint32(times)})


def test_repeats_combine_to_their_mean_with_the_t_interval() -> None:
    packets = [repeat((99.0, 101.0), day=0), repeat((101.0, 103.0), day=1, ms_per_token=21.0)]
    packets.append(repeat((103.0, 105.0), day=2, ms_per_token=22.0, boot="boot-2"))
    combined = combine((p, p.arms[0]) for p in packets)
    assert [r.value for r in combined.repeats] == [100.0, 102.0, 104.0]
    assert combined.centre == pytest.approx(102.0)
    interval = combined.interval
    assert interval is not None and interval.low == pytest.approx(97.032, abs=1e-3)
    assert combined.hosts == 2 and combined.keys == 1
    assert combined.words() == "3 repeats on 2 hosts: 102.00, 95% CI 97.03–106.97"


def test_one_repeat_says_it_was_measured_once() -> None:
    packet = repeat((99.0, 101.0))
    combined = combine([(packet, packet.arms[0])])
    assert combined.measured_once and combined.interval is None
    assert combined.words() == "measured once: no interval"


def _copy_reason(*others: Packet) -> str:
    return (
        f"its servers' token timings and those of {' and '.join(sorted(p.id for p in others))} are copies of one"
        " another, one measurement sealed twice: which came first cannot be told from the dates their signers wrote,"
        f" so {'neither' if len(others) == 1 else 'none of them'} counts as a repeat"
    )


@pytest.mark.parametrize(("shift_us", "scale"), [(0, 1.0), (1, 1.0), (250_000, 1.0), (0, 1.01), (7, 0.97)])
def test_the_same_servers_counted_twice_are_refused(shift_us: int, scale: float) -> None:
    """A forger re-seals an honest packet's servers (exactly, every time shifted by a constant, or
    slowed or sped up by a percent), with new figures: not an independent repeat, by the rule
    catalog/checks/independence.py holds every copy to. Which of the two is the copy cannot be told
    (each date is its signer's word), so neither counts, each naming the other; the real repeat does."""
    honest = repeat((99.0, 101.0), day=0)
    other = repeat((101.0, 103.0), day=1, ms_per_token=21.0)
    forged = repeat((150.0, 150.0), day=2, copy_of=honest, shift_us=shift_us, scale=scale, boot="boot-9")
    combined = combine((p, p.arms[0]) for p in (forged, other, honest))
    assert [r.packet.id for r in combined.repeats] == [other.id]
    assert [(r.packet.id, r.reason) for r in combined.refused] == [
        (honest.id, _copy_reason(forged)),
        (forged.id, _copy_reason(honest)),
    ]
    assert combined.centre == pytest.approx(102.0) and combined.measured_once


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
def test_a_backdated_copy_never_brands_the_original(order: tuple[int, int, int]) -> None:
    """The copy is dated a month before the packet it copies, by another signer's word: it neither
    leads nor pushes the original out alone. Both are refused alike, in any order they are read."""
    honest = repeat((99.0, 101.0), day=30)
    other = repeat((101.0, 103.0), day=31, ms_per_token=21.0)
    forged = repeat((150.0, 150.0), day=0, copy_of=honest, shift_us=3, boot="boot-9")
    packets = (honest, other, forged)
    combined = combine((packets[i], packets[i].arms[0]) for i in order)
    assert [r.packet.id for r in combined.repeats] == [other.id]
    assert {r.packet.id: r.reason for r in combined.refused} == {
        honest.id: _copy_reason(forged),
        forged.id: _copy_reason(honest),
    }


def test_every_copy_of_one_measurement_is_refused_naming_the_others() -> None:
    honest = repeat((99.0, 101.0), day=5)
    first = repeat((150.0, 150.0), day=0, copy_of=honest, shift_us=11, boot="boot-8")
    second = repeat((160.0, 160.0), day=1, copy_of=honest, scale=1.02, boot="boot-9")
    combined = combine((p, p.arms[0]) for p in (honest, first, second))
    assert combined.repeats == []
    assert {r.packet.id: r.reason for r in combined.refused} == {
        honest.id: _copy_reason(first, second),
        first.id: _copy_reason(honest, second),
        second.id: _copy_reason(honest, first),
    }


def _claim_reason(ref: CampaignRef, *others: Packet) -> str:
    round_words = f" round {ref.round}" if ref.round else ""
    return (
        f"claims campaign {ref.name}{round_words} cell {ref.cell} repeat {ref.repeat}, as"
        f" {' and '.join(sorted(p.id for p in others))} {'does' if len(others) == 1 else 'do'}: the runner issues"
        " each cell's repeat once, so the claims contradict each other and"
        f" {'neither' if len(others) == 1 else 'none of them'} counts as a repeat"
    )


@pytest.mark.parametrize("backdated", [False, True])
def test_two_packets_claiming_one_campaign_repeat_neither_counts(backdated: bool) -> None:
    """The runner issues a cell's repeat once (runner/fleet/cells.py): two packets claiming it
    contradict each other, and the earlier date (its signer's word) wins nothing."""
    ref = CampaignRef(name="nightly", round="2026-11", cell="0123456789ab", repeat=1, repeats=2)
    first = repeat((99.0, 101.0), day=10, campaign=ref)
    second = repeat((101.0, 103.0), day=0 if backdated else 11, ms_per_token=21.0, campaign=ref, boot="boot-2")
    combined = combine((p, p.arms[0]) for p in (second, first))
    assert combined.repeats == []
    assert {r.packet.id: r.reason for r in combined.refused} == {
        first.id: _claim_reason(ref, second),
        second.id: _claim_reason(ref, first),
    }


def test_a_cell_s_repeats_and_other_rounds_count() -> None:
    """Repeat 1 and 2 of one cell, and repeat 1 of another round, are three campaigns: all count."""
    ref = CampaignRef(name="nightly", round="2026-11", cell="0123456789ab", repeat=1, repeats=2)
    packets = [
        repeat((99.0, 101.0), day=0, campaign=ref),
        repeat((101.0, 103.0), day=1, ms_per_token=21.0, campaign=ref.model_copy(update={"repeat": 2})),
        repeat((103.0, 105.0), day=2, ms_per_token=22.0, campaign=ref.model_copy(update={"round": "2026-12"})),
    ]
    combined = combine((p, p.arms[0]) for p in packets)
    assert combined.refused == [] and combined.n == 3


def test_overlapping_intervals_are_not_distinguishable() -> None:
    a, b, c = t_interval([100.0, 102.0, 104.0]), t_interval([105.0, 106.0, 107.0]), t_interval([120.0, 121.0, 122.0])
    assert a is not None and b is not None and c is not None
    assert a.overlaps(b) and b.overlaps(a)  # 97.0-107.0 and 103.5-108.5
    assert not a.overlaps(c) and not c.overlaps(b)
