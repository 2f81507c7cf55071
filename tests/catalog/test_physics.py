"""catalog.checks.physics, the floors: no token sooner than the card can make it. One test per
refusal (a factory packet, edited, refused naming the field, the time and the bound), and what an
honest stream can look like (bursts, chunks) accepted. The ceiling's tests are in test_consistency."""

from __future__ import annotations

from catalog.checks.physics import CEILING_MARGIN, FLOOR_MARGIN, arm_limits, physics_problems
from catalog.model.arrays import decode_uint32, encode_uint32, to_uint32
from catalog.model.packet import Packet
from tests.catalog.factories import (
    ORACLE_ARM,
    catalog_recipe,
    measured_packet,
    published_arm,
    published_draft,
    seal_draft,
)
from tests.catalog.test_consistency import B70, Draft, edited

RECIPE_9B = catalog_recipe("qwen3.5-9b")


def physics(packet: Packet) -> dict[str, str]:
    return dict(physics_problems(packet, RECIPE_9B, B70))


def limits(packet: Packet, arm: int = 0):  # type: ignore[no-untyped-def]
    found = arm_limits(packet, packet.arms[arm], B70, RECIPE_9B)
    assert found is not None
    return found


def retime(row: Draft, times: list[int]) -> None:
    row["token_times_us"] = encode_uint32(to_uint32(times))


def test_the_factory_packet_keeps_every_floor() -> None:
    assert physics(measured_packet()) == {}


def test_a_first_token_one_microsecond_after_sending() -> None:
    def instant(d: Draft) -> None:
        row = d["arms"][0]["servers"][0]["rows"][3]
        times = decode_uint32(row["token_times_us"])
        retime(row, [1, *times[1:]])

    packet = edited(instant, spec=False)
    least = limits(packet).prefill_ms(packet.arms[0].servers[0].rows[3].prompt_tokens) / FLOOR_MARGIN
    problems = physics(packet)
    assert set(problems) == {"arms[0].servers[0].rows[3].token_times_us[0]"}
    assert problems["arms[0].servers[0].rows[3].token_times_us[0]"] == (
        f"first token 0.001 ms after sending, but a prefill of 230 prompt token(s) on 1 × arc_pro_b70 takes at least"
        f" {least:,.3f} ms (÷ margin {FLOOR_MARGIN:g})"
    )


def test_a_row_whose_tokens_all_arrive_at_once() -> None:
    """Every token 40 ms after sending: 119 decode steps in no time at all."""

    def at_once(d: Draft) -> None:
        row = d["arms"][0]["servers"][1]["rows"][0]
        retime(row, [40_000] * len(decode_uint32(row["token_times_us"])))

    problems = physics(edited(at_once, spec=False))
    assert set(problems) == {"arms[0].servers[1].rows[0].token_times_us[119]"}
    message = problems["arms[0].servers[1].rows[0].token_times_us[119]"]
    assert message.startswith("last token 40.000 ms after sending, but a prefill of 200 prompt token(s) and 119 more")
    assert f"1 token(s) per step at most, ÷ margin {CEILING_MARGIN:g}" in message


def test_a_stream_read_in_bursts_keeps_its_floor() -> None:
    """The client may get a stream's tokens in bursts (merged deltas): only the last token's time,
    which no burst can bring forward, is held to the decode steps."""

    def bursts(d: Draft) -> None:
        row = d["arms"][0]["servers"][0]["rows"][0]
        times = decode_uint32(row["token_times_us"])
        retime(row, [times[min(len(times) - 1, (i // 30 + 1) * 30 - 1)] for i in range(len(times))])

    assert physics(edited(bursts, spec=False)) == {}


def test_a_speculative_arm_may_yield_depth_plus_one_tokens_per_step() -> None:
    packet = measured_packet()
    spec = limits(packet, 1)
    assert spec.tokens_per_step == 3.0  # depth 2
    rows = packet.arms[1].servers[0].rows
    fastest = min(r.token_times_us[-1] / 1000 - spec.last_token_ms(r.prompt_tokens, len(r.token_ids)) for r in rows)
    assert fastest > 0


def test_an_imported_ttft_below_any_prefill() -> None:
    honest = published_arm("tp1-mtp0", [50.0, 50.2], gates=[("G1", 12, 12, True)])
    fast = {**honest, "published_ttft_ms": [0.5, 30.2]}
    assert physics(seal_draft(published_draft([{**honest, "published_ttft_ms": [30.2]}]))) == {}
    problems = physics(seal_draft(published_draft([fast])))
    assert set(problems) == {"arms[0].published_ttft_ms[0]"}
    assert problems["arms[0].published_ttft_ms[0]"].startswith(
        "TTFT 0.500 ms after sending, but a prefill of 1 prompt token(s) on 1 × arc_pro_b70 takes at least"
    )


def test_a_context_point_faster_than_its_prefill() -> None:
    """32,768 prompt tokens of a 9B model in 50 ms: the FLOPs alone take seconds."""
    point = {"depth_tokens": 32768, "content_class": "code", "ttft_ms": 50.0}
    packet = edited(lambda d: d.update(ladders=[{"arm": ORACLE_ARM, "kind": "context", "context": [point]}]))
    problems = physics(packet)
    assert set(problems) == {"ladders[0].context[0].ttft_ms"}
    least = limits(packet).prefill_ms(32768) / FLOOR_MARGIN
    assert least > 1000
    assert (
        f"a prefill of 32,768 prompt token(s) on 1 × arc_pro_b70 takes at least {least:,.3f} ms"
        in (problems["ladders[0].context[0].ttft_ms"])
    )


def test_a_concurrency_point_whose_users_finished_too_soon() -> None:
    point = {"users": 4, "completion_tokens": 2048, "wall_s": 0.5}
    packet = edited(lambda d: d.update(ladders=[{"arm": ORACLE_ARM, "kind": "concurrency", "concurrency": [point]}]))
    problems = physics(packet)
    assert set(problems) == {"ladders[0].concurrency[0].wall_s"}
    assert problems["ladders[0].concurrency[0].wall_s"].startswith(
        "is 500.000 ms, but 4 users' 2,048 tokens (512 each) take at least"
    )
    slower = edited(
        lambda d: d.update(
            ladders=[{"arm": ORACLE_ARM, "kind": "concurrency", "concurrency": [{**point, "wall_s": 15.0}]}]
        )
    )
    assert physics(slower) == {}


def test_many_users_are_held_to_the_card_s_arithmetic() -> None:
    """Batching shares one read of the weights among users, never the FLOPs: 512 users × 512 tokens
    of a 9B model (16 GFLOPs a token) cannot all arrive within the single-stream floor of one user's
    512 tokens, which is all the per-user bound asks."""
    users, tokens = 512, 512
    per_user = limits(measured_packet()).last_token_ms(1, tokens)
    point = {"users": users, "completion_tokens": users * tokens, "wall_s": round(per_user * 1.05 / 1000, 3)}
    packet = edited(lambda d: d.update(ladders=[{"arm": ORACLE_ARM, "kind": "concurrency", "concurrency": [point]}]))
    least = limits(packet).compute_ms(users * tokens)
    assert least > per_user * 1.05  # the per-user floor alone lets it through
    problems = physics(packet)
    assert set(problems) == {"ladders[0].concurrency[0].wall_s"}
    assert (
        f"its 262,144 tokens take at least {least:,.3f} ms of compute on 1 × arc_pro_b70"
        in (problems["ladders[0].concurrency[0].wall_s"])
    )
    enough = {**point, "wall_s": round(least * 1.01 / 1000, 3)}
    packet = edited(lambda d: d.update(ladders=[{"arm": ORACLE_ARM, "kind": "concurrency", "concurrency": [enough]}]))
    assert physics(packet) == {}


def test_a_token_costs_at_least_a_one_token_prefill_of_compute() -> None:
    """The compute floor's unit: 2 FLOPs a weight (9B BF16: about 16 GFLOPs) at the B70's 183.5
    TFLOPS is about 0.09 ms; the margin halves it, as it does a prefill's."""
    found = limits(measured_packet())
    assert 0.05 < found.token_compute_ms < 0.15
    assert found.compute_ms(1000) == 1000 * found.token_compute_ms / FLOOR_MARGIN
    assert found.token_compute_ms <= found.prefill_ms(1)  # a one-token prefill: its compute, or a read of the weights


def test_a_deep_context_point_is_held_to_the_ceiling_at_its_depth() -> None:
    """Every step reads the whole KV cache: at 262,144 tokens of context a 9B model's ceiling on
    one B70 is about two thirds of its short-prompt one, so a rate within the short ceiling's margin
    can still be beyond the deep one's."""
    found = limits(measured_packet())
    deep = found.ceiling_at(262_144)
    assert deep < found.plain_tok_s * 0.75
    rate = round((deep * CEILING_MARGIN + found.plain_tok_s * CEILING_MARGIN) / 2, 2)  # between the two bounds
    point = {"depth_tokens": 262_144, "content_class": "prose", "decode_tok_s": rate, "ttft_ms": 200_000.0}
    packet = edited(lambda d: d.update(ladders=[{"arm": ORACLE_ARM, "kind": "context", "context": [point]}]))
    problems = physics(packet)
    assert set(problems) == {"ladders[0].context[0].decode_tok_s"}
    assert problems["ladders[0].context[0].decode_tok_s"] == (
        f"decode rate {rate:.3g} tok/s exceeds the physical ceiling {deep:.3g} tok/s with 262,144 tokens of"
        f" context × margin 1.5 (= {deep * 1.5:.3g} tok/s)"
    )
    shallow = {**point, "depth_tokens": 2048, "ttft_ms": 2_000.0}
    packet = edited(lambda d: d.update(ladders=[{"arm": ORACLE_ARM, "kind": "context", "context": [shallow]}]))
    assert physics(packet) == {}
