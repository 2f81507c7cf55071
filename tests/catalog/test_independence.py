"""catalog.checks.independence: a second fresh server, or a reproduction, that is another's timing
shifted, with gaps shifted or scaled, is refused; honest servers (their own jitter) pass."""

from __future__ import annotations

import random
from array import array
from collections.abc import Callable

import pytest

from catalog.checks.consistency import reproduction_problems
from catalog.checks.independence import (
    COPY_TOLERANCE_US,
    MIN_DISTINCT_TIMES,
    CopyIndex,
    copied,
    copy_problems,
    first_copy,
)
from catalog.model.arrays import decode_uint32, encode_uint32, to_uint32
from catalog.model.metrics import server_decode_rate, server_ttft_ms
from catalog.model.packet import PromptRow, ServerRun
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


def _server(rows: dict[str, list[int]]) -> ServerRun:
    """A server of just what the copy rule reads: each prompt's token times."""
    made = [
        PromptRow.model_construct(
            prompt_id=p,
            class_id="c",
            token_ids=array("I", range(len(t))),
            token_times_us=array("I", t),
            prompt_tokens=1,
            completion_tokens=len(t),
        )
        for p, t in rows.items()
    ]
    return ServerRun.model_construct(label="A", rows=made)


def _honest(draw: random.Random, n: int) -> list[int]:
    times, now = [], draw.randrange(10**6)
    for _ in range(n):
        now += draw.choice([0, 0, 1, 2, 5]) if draw.random() < 0.2 else draw.randrange(5_000, 30_000)
        times.append(now)
    return times


def _forgeries(draw: random.Random) -> list[Callable[[list[int]], list[int]]]:
    """Ways to make a row from another: copies the rule catches, near misses it must not."""
    shift, gap, scale = draw.randrange(-5000, 5000), draw.randrange(-30, 30), draw.uniform(0.5, 2.0)
    wobble = COPY_TOLERANCE_US + draw.choice([-1, 0, 1, 2])
    return [
        lambda t: [x + shift for x in t],
        lambda t: [x + shift + gap * k for k, x in enumerate(t)],
        lambda t: [round(x * scale) + shift for x in t],
        lambda t: [x + draw.choice([0, 1, -1]) for x in t],
        lambda t: [x + wobble * (k % 2) for k, x in enumerate(t)],
        lambda t: [x + wobble * (k == len(t) // 2) for k, x in enumerate(t)],
        lambda t: [t[0]] * len(t),
        lambda t: t[:-1],
    ]


def test_the_copy_index_leaves_out_no_copy() -> None:
    """CopyIndex.suspects names every indexed server that first_copy finds a copy of: servers made
    honest, copied, nearly copied, flat, short and of every length, in the order they were indexed."""
    draw = random.Random(30)
    index, indexed, caught = CopyIndex(), list[ServerRun](), 0
    for _ in range(400):
        prompts = ("p0", "p1", "p2")
        if indexed and draw.random() < 0.6:
            source = draw.choice(indexed)
            forge = draw.choice(_forgeries(draw))
            rows = {r.prompt_id: r.token_times_us for r in source.rows}
            made = {p: [min(max(x, 0), 2**32 - 1) for x in forge(list(rows[p]))] for p in rows if draw.random() < 0.7}
            made |= {p: _honest(draw, len(rows.get(p, [0] * 40))) for p in prompts if p not in made}
        else:
            made = {p: _honest(draw, draw.choice([8, 16, 17, 40, 40])) for p in prompts}
        server = _server(made)
        copies = [k for k, earlier in enumerate(indexed) if first_copy(server, earlier) is not None]
        suspects = index.suspects(server)
        assert suspects == sorted(suspects) and set(copies) <= set(suspects)
        caught += len(copies)
        assert index.add(server) == len(indexed)
        indexed.append(server)
    assert caught > 100  # the copies were there to be found


def test_the_copy_index_passes_over_honest_servers() -> None:
    """Servers with their own jitter are not even suspected of copying each other."""
    index = CopyIndex()
    for ms in (20.0, 20.05, 20.1, 20.2, 19.9):
        server = _server({r.prompt_id: list(r.token_times_us) for r in make_rows(ms_per_token=ms)})
        assert index.suspects(server) == []
        index.add(server)
