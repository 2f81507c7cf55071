"""catalog.checks.independence: a second fresh server, or a reproduction, that is another's timing
shifted, with gaps shifted or scaled, is refused; honest servers (their own jitter) pass."""

from __future__ import annotations

from array import array

import pytest

from catalog.checks.consistency import reproduction_problems
from catalog.checks.independence import COPY_TOLERANCE_US, MIN_DISTINCT_TIMES, copied, copy_problems
from catalog.model.arrays import decode_uint32, encode_uint32, to_uint32
from catalog.model.metrics import server_decode_rate, server_ttft_ms
from catalog.model.packet import PromptRow
from tests.catalog.factories import make_rows, measured_draft, measured_packet, seal_draft

ROW = make_rows(ms_per_token=20.0)[0].token_times_us
OTHER = make_rows(ms_per_token=20.05)[0].token_times_us


@pytest.mark.parametrize(
    ("name", "forged"),
    [
        ("the same times", list(ROW)),
        ("every time a microsecond later", [t + 1 for t in ROW]),
        ("every time 3 ms later", [t + 3000 for t in ROW]),
        ("every gap a microsecond longer", [t + k for k, t in enumerate(ROW)]),
        ("every time 1 % later", [round(t * 1.01) for t in ROW]),
        ("scaled and shifted", [round(t * 0.97) + 500 for t in ROW]),
    ],
)
def test_a_copy_of_a_rows_timing(name: str, forged: list[int]) -> None:
    assert copied(array("I", forged), ROW), name


def test_two_honest_servers_keep_their_own_time() -> None:
    """Two servers of one arm agree on every token, never on when each one came."""
    assert not copied(OTHER, ROW)
    assert not copy_problems(measured_packet())


def test_jitter_beyond_rounding_is_not_a_copy() -> None:
    wobbly = [t + 1 + (COPY_TOLERANCE_US + 2) * (k % 2) for k, t in enumerate(ROW)]
    assert not copied(array("I", wobbly), ROW)


def test_a_row_too_short_or_too_bursty_to_tell() -> None:
    short = ROW[: MIN_DISTINCT_TIMES - 1]
    assert not copied(short, short)
    bursts = array("I", [ROW[(k // 10) * 10] for k in range(len(ROW))])  # 12 distinct times
    assert not copied(bursts, bursts)


def test_a_second_server_that_is_the_first_a_microsecond_later() -> None:
    """G1 still passes (the same tokens); the timing says it is one server, not two fresh ones."""
    draft = measured_draft(spec=False)
    first, second = draft["arms"][0]["servers"]
    for mine, theirs in zip(second["rows"], first["rows"], strict=True):
        mine["token_times_us"] = encode_uint32(to_uint32(t + 1 for t in decode_uint32(theirs["token_times_us"])))
    rows = [PromptRow.model_validate(r) for r in second["rows"]]
    second.update(decode_tok_s=server_decode_rate(rows), ttft_ms=server_ttft_ms(rows))
    problems = dict(copy_problems(seal_draft(draft)))
    assert problems == {
        "arms[0].servers[1].rows[0].token_times_us": "server B of arm 'tp1-mtp0': its token times for prompt"
        " 'ops-incident-retro' are those of server A of arm 'tp1-mtp0' (arms[0].servers[0]) shifted or scaled to"
        " within 2 µs at every token: two fresh servers never share their timing"
    }


def test_a_reproduction_shifted_by_a_microsecond() -> None:
    original = measured_packet()
    draft = measured_draft(title="reproduction", identity_overrides={"host": {"boot_id": "another-boot"}})
    for arm in draft["arms"]:
        for server in arm["servers"]:
            for row in server["rows"]:
                row["token_times_us"] = encode_uint32(to_uint32(t + 1 for t in decode_uint32(row["token_times_us"])))
    problems = dict(reproduction_problems(seal_draft(draft), original))
    assert set(problems) == {f"arms[{i}].servers[{j}].rows[0].token_times_us" for i in (0, 1) for j in (0, 1)}
    assert all(m.endswith("a copy, not a reproduction") for m in problems.values())
    honest = measured_draft(title="reproduction", ms_per_token=20.3, identity_overrides={"host": {"boot_id": "b"}})
    assert reproduction_problems(seal_draft(honest), original) == []
