"""catalog.checks.consistency: one test per refusal (a factory packet, mutated, refused with its field and
the values involved), the factory and committed packets accepted, and `python -m catalog.verify`
refusing such packets end to end."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from catalog.checks.consistency import consistency_problems, reproduction_problems
from catalog.checks.physics import CEILING_MARGIN, arm_limits
from catalog.errors import CatalogError, CatalogErrors
from catalog.model.arrays import decode_uint32, encode_uint32, to_uint32
from catalog.model.packet import Packet, State
from catalog.packets.seal import Sealed, write_packet
from catalog.projection.precision import DRAFT_INT4_ENV
from catalog.recipes.hardware import Hardware, HardwareFile
from catalog.recipes.recipe import Recipe
from catalog.store.documents import load_file
from catalog.store.repository import load_catalog
from tests.catalog.factories import (
    DATA,
    ORACLE_ARM,
    REPO,
    SPEC_ARM,
    catalog_recipe,
    measured_draft,
    measured_packet,
    published_arm,
    published_draft,
    seal_draft,
    sealed,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)  # the factories' packets are created 2026-11-30T10:15Z
HARDWARE = load_file(HardwareFile, DATA / "hardware.yaml").by_id()
B70 = HARDWARE["arc_pro_b70"]
RECIPE_9B = catalog_recipe("qwen3.5-9b")
DEMO = catalog_recipe("demo")

Draft = dict[str, Any]
G1 = [("G1", 12, 12, True)]


# --- helpers -------------------------------------------------------------------------------


def found(
    packet: Packet, *, recipe: Recipe | None = RECIPE_9B, hardware: Hardware | None = B70, now: datetime = NOW
) -> dict[str, str]:
    """field -> message; a field reported twice would hide one, so that is an error too."""
    problems = consistency_problems(packet, recipe, hardware, now)
    fields = [field for field, _ in problems]
    assert len(set(fields)) == len(fields), problems
    return dict(problems)


def edited_draft(change: Callable[[Draft], object], **kw: Any) -> Draft:
    draft = measured_draft(**kw)
    change(draft)
    return draft


def edited(change: Callable[[Draft], object], **kw: Any) -> Packet:
    return seal_draft(edited_draft(change, **kw))


def serve(d: Draft, repo: str, **model: object) -> None:
    """The packet's model is `repo`, and so is the model each arm's command serves."""
    d["identity"]["model"].update(repo=repo, **model)
    for arm in d["arms"]:
        arm["config"]["argv"] = [repo if arg == "Qwen/Qwen3.5-9B" else arg for arg in arm["config"]["argv"]]


def set_array(row: Draft, key: str, index: int, value: int) -> None:
    """Change one value of a row's token array in JSON form (base64 uint32)."""
    values = decode_uint32(row[key])
    values[index] = value
    row[key] = encode_uint32(values)


def only(problems: dict[str, str]) -> tuple[str, str]:
    assert len(problems) == 1, problems
    return next(iter(problems.items()))


def plain_ceiling(packet: Packet, arm_index: int) -> float:
    limits = arm_limits(packet, packet.arms[arm_index], B70, RECIPE_9B)
    assert limits is not None
    return limits.plain_tok_s


def spec_metrics(drafts: int = 400, draft_tokens: int = 800, accepted: int = 400, **kw: Any) -> dict[str, Any]:
    """Counters over the factory's 12 rows of 120 tokens: drafts + accepted within their 1,440."""
    return {"drafts": drafts, "draft_tokens": draft_tokens, "accepted_tokens": accepted, **kw}


def independent(draft: Draft) -> Draft:
    """A reproduction as the runner makes one: another boot, its own timings."""
    draft["identity"]["host"]["boot_id"] = "another-boot"
    return draft


# --- what passes ---------------------------------------------------------------------------


def test_factory_packets_are_consistent() -> None:
    imported = seal_draft(
        published_draft(
            [
                published_arm("tp1-mtp0", [50.0, 50.2], gates=[("G1", 12, 12, True)]),
                published_arm("tp1-mtp2", [80.0], spec_depth=2, gates=[("G3", 12, 12, True)]),  # G3 only: as printed
            ]
        )
    )
    for packet in (measured_packet(), measured_packet(g3_diverges=True), measured_packet(spec=False), imported):
        assert found(packet) == {}


def test_committed_packets_are_consistent() -> None:
    catalog = load_catalog(DATA, REPO / "packets")
    now = datetime.now(UTC)
    for packet in catalog.packets.values():
        recipe = catalog.recipes.get(packet.identity.model.slug)
        assert consistency_problems(packet, recipe, catalog.hardware[packet.identity.host.hardware], now) == []
        if packet.reproduces:
            assert reproduction_problems(packet, catalog.packets[packet.reproduces]) == []


def test_draft_only_configuration_may_differ_from_the_oracle() -> None:
    def draft_config(d: Draft) -> None:
        spec = d["arms"][1]["config"]
        spec["env"] = {DRAFT_INT4_ENV: "1"}
        spec["argv"] = [*spec["argv"], "--speculative-config", '{"method":"mtp","num_speculative_tokens":2}']
        spec["draft_head"] = "draft INT4 head"

    assert found(edited(draft_config)) == {}


# --- gates ---------------------------------------------------------------------------------


def test_oracle_without_g1() -> None:
    field, message = only(found(edited(lambda d: d["arms"][0].update(gates=[]))))
    assert field == "arms[0].gates"
    assert message == f"arm {ORACLE_ARM!r} at depth 0 has no G1 gate"


def test_speculative_arm_without_g2() -> None:
    field, message = only(found(edited(lambda d: d["arms"][1]["gates"].pop(0))))
    assert field == "arms[1].gates"
    assert message == f"speculative arm {SPEC_ARM!r} (depth 2) has no G2 gate"


def test_speculative_arm_without_g3_for_one_server() -> None:
    field, message = only(found(edited(lambda d: d["arms"][1]["gates"].pop(2))))
    assert field == "arms[1].gates"
    assert message == f"speculative arm {SPEC_ARM!r} has no G3 gate for server 'B'"


def test_imported_arm_needs_only_the_outcome_its_source_published() -> None:
    """No G2, no G3 per server: one G3 as the source printed it is enough."""
    packet = seal_draft(
        published_draft([published_arm("tp1-mtp3", [80.0], spec_depth=3, gates=[("G3", 12, 12, True)])])
    )
    assert found(packet) == {}


@pytest.mark.parametrize(("depth", "gate"), [(3, "G3"), (0, "G1")])
def test_an_imported_arm_keeps_its_gates(depth: int, gate: str) -> None:
    """A failing G3 deleted from an imported arm would publish what its source withheld: an import
    carries the outcome its source printed, or its arm is screened."""
    packet = seal_draft(published_draft([published_arm("tp1-mtp3", [40.0], spec_depth=depth)]))
    assert only(found(packet)) == (
        "arms[0].gates",
        f"imported arm 'tp1-mtp3' (depth {depth}) carries no {gate} gate: an imported arm carries the gate outcome"
        " its source printed, or it is a screened result (speed only) in a screened packet",
    )
    screened = seal_draft(published_draft([published_arm("tp1-mtp3", [40.0], spec_depth=depth)], provenance="screened"))
    assert found(screened) == {}


def test_imported_g3_against_the_arm_itself_or_a_speculative_arm() -> None:
    arms = [
        published_arm("tp1-mtp0", [50.0, 50.2], gates=G1),
        published_arm("tp1-mtp3", [80.0, 80.4], spec_depth=3, gates=[("G3", 12, 12, True)]),
        published_arm("tp1-mtp4", [82.0, 82.4], spec_depth=4, gates=[("G3", 12, 12, True)]),
    ]
    arms[1]["gates"][0]["against"] = "tp1-mtp3"
    arms[2]["gates"][0]["against"] = "tp1-mtp3"
    problems = found(seal_draft(published_draft(arms)))
    assert problems == {
        "arms[1].gates[0].against": "G3 compares arm 'tp1-mtp3' with itself, not with its depth-0 oracle",
        "arms[2].gates[0].against": "G3 names arm 'tp1-mtp3' of depth 3: the oracle is a depth-0 arm",
    }


def test_g3_against_an_arm_of_no_packet() -> None:
    field, message = only(found(edited(lambda d: d["arms"][1]["gates"][1].update(against="tp9-oracle"))))
    assert field == "arms[1].gates[1].against"
    assert message == "G3 names 'tp9-oracle', which is no arm of this packet"


def test_g3_against_the_speculative_arm_itself() -> None:
    field, message = only(found(edited(lambda d: d["arms"][1]["gates"][2].update(against=SPEC_ARM))))
    assert field == "arms[1].gates[2].against"
    assert message == f"G3 compares arm {SPEC_ARM!r} with itself, not with its depth-0 oracle"


def test_g3_against_another_speculative_arm() -> None:
    def deeper(d: Draft) -> None:
        other = copy.deepcopy(d["arms"][1])
        other["id"] = "tp1-mtp3"
        other["label"] = "1 card, MTP depth 3"
        other["config"]["spec_depth"] = 3
        d["arms"].append(other)
        d["arms"][1]["gates"][1]["against"] = "tp1-mtp3"

    problems = found(edited(deeper))
    assert problems.pop("arms[1].gates[1].against") == "G3 names arm 'tp1-mtp3' of depth 3: the oracle is a depth-0 arm"
    # the deeper arm's servers are the other arm's, copied (catalog/checks/independence.py)
    assert set(problems) == {"arms[2].servers[0].rows[0].token_times_us", "arms[2].servers[1].rows[0].token_times_us"}


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("graph_capture", "full", "graph_capture 'full' differs from this arm's None"),
        ("kv_cache_dtype", "fp8", "kv_cache_dtype 'fp8' differs from this arm's None"),
        ("env", {"VLLM_USE_V2": "1"}, "env {'VLLM_USE_V2': '1'} differs from this arm's {}"),
    ],
)
def test_g3_against_an_oracle_of_another_target_configuration(key: str, value: object, shown: str) -> None:
    problems = found(edited(lambda d: d["arms"][0]["config"].update({key: value})))
    assert set(problems) == {"arms[1].gates[1].against", "arms[1].gates[2].against"}
    assert problems["arms[1].gates[1].against"] == f"G3 names arm {ORACLE_ARM!r} whose {shown}"


def test_g3_against_an_oracle_served_with_other_arguments() -> None:
    def other_dtype(d: Draft) -> None:
        d["arms"][0]["config"]["argv"].append("--dtype=float16")
        d["arms"][1]["config"]["argv"] += ["--speculative-config", "{}", "--dtype=bfloat16"]

    problems = found(edited(other_dtype))
    assert problems["arms[1].gates[1].against"] == (
        f"G3 names arm {ORACLE_ARM!r} whose argv (without its speculative options) differs from this arm's"
        " at argument 6: '--dtype=float16' there, '--dtype=bfloat16' here"
    )


@pytest.mark.parametrize(
    "spelled",
    [
        lambda value: ["-sc", value],
        lambda value: [f"-sc={value}"],
        lambda value: [f"--speculative_config={value}"],
        lambda value: ["--speculative-conf", value],  # argparse's abbreviation
        lambda value: [f"--speculative-config.{k}={json.dumps(v)}" for k, v in json.loads(value).items()],
        lambda value: [x for k, v in json.loads(value).items() for x in (f"-sc.{k}", json.dumps(v))],
    ],
)
def test_g3_against_its_oracle_holds_however_the_speculative_config_is_spelled(spelled) -> None:
    """The oracle and the speculative arm share their target configuration whichever spelling of
    the speculative config vLLM reads: an honest `-sc` arm was refused, the alias kept in the argv
    compared, and a dotted `--speculative-config.method=X` hid the argument after it."""

    def respelled(d: Draft) -> None:
        argv = d["arms"][1]["config"]["argv"]
        at = argv.index("--speculative-config")
        argv[at : at + 2] = spelled(argv[at + 1])

    assert found(edited(respelled)) == {}


def test_a_dotted_speculative_flag_hides_no_argument_from_g3() -> None:
    """`--speculative-config.method=X` holds its value: the argument after it is compared."""

    def hidden(d: Draft) -> None:
        argv = d["arms"][1]["config"]["argv"]
        at = argv.index("--speculative-config")
        config = json.loads(argv[at + 1])
        argv[at : at + 2] = ["-sc", json.dumps({k: v for k, v in config.items() if k != "method"})]
        argv += [f"--speculative-config.method={json.dumps(config['method'])}", "--dtype=float16"]

    assert "--dtype=float16" in found(edited(hidden))["arms[1].gates[1].against"]


def test_g3_against_an_oracle_of_another_tensor_parallel_size() -> None:
    def tp2(d: Draft) -> None:
        d["identity"]["host"]["card_count"] = 2
        d["arms"][0]["config"]["tensor_parallel_size"] = 2

    problems = found(edited(tp2))
    assert problems["arms[1].gates[1].against"] == (
        f"G3 names arm {ORACLE_ARM!r} whose tensor_parallel_size 2 differs from this arm's 1"
    )


# --- servers -------------------------------------------------------------------------------


def test_measured_arm_with_rows_on_one_server_only() -> None:
    field, message = only(found(edited(lambda d: d["arms"][0]["servers"][1].update(rows=[]), spec=False)))
    assert field == "arms[0].servers"
    assert message == f"arm {ORACLE_ARM!r} has 1 ok server(s) with prompt rows; a measured arm needs 2"


def test_measured_arm_with_a_failed_server() -> None:
    problems = found(edited(lambda d: d["arms"][0]["servers"][0].update(status="failed"), spec=False))
    assert "0 ok" not in problems["arms[0].servers"]
    assert "1 ok server(s)" in problems["arms[0].servers"]


def test_imported_packet_with_a_measured_arm() -> None:
    packet = seal_draft(published_draft([published_arm("tp1-mtp0", [50.0], gates=G1)]))
    # the packet model derives arm states; a format change must not let this through unnoticed
    forged = packet.model_copy(update={"arms": [packet.arms[0].model_copy(update={"state": State.MEASURED})]})
    field, message = only(found(forged))
    assert field == "arms[0].state"
    assert message == "arm 'tp1-mtp0' of an imported packet cannot be measured"


# --- identity ------------------------------------------------------------------------------


def test_model_repo_that_is_not_the_recipe_variants() -> None:
    packet = edited(lambda d: serve(d, "Qwen/Qwen3.5-4B"))
    field, message = only(found(packet))
    assert field == "identity.model.repo"
    assert message == "is 'Qwen/Qwen3.5-4B', but recipe 'qwen3.5-9b' variant 'default' serves 'Qwen/Qwen3.5-9B'"


def test_model_repo_of_a_variant_with_its_own_model_id() -> None:
    fp8 = "RedHatAI/Qwen3.5-9B-FP8-dynamic"
    precision = {"quantization": "fp8-dynamic", "quantization_label": "FP8-dynamic"}
    assert found(edited(lambda d: serve(d, fp8, **precision), variant="fp8")) == {}
    field, message = only(found(edited(lambda d: d["identity"]["model"].update(**precision), variant="fp8")))
    assert field == "identity.model.repo"
    assert message.endswith(f"variant 'fp8' serves {fp8!r}")


def test_synthetic_model_of_a_real_recipe() -> None:
    field, message = only(found(edited(lambda d: d["identity"]["model"].update(synthetic=True))))
    assert field == "identity.model.synthetic"
    assert message == "is true, but recipe 'qwen3.5-9b' model.synthetic is false"


def test_real_model_of_the_synthetic_recipe() -> None:
    assert DEMO.model.synthetic is True
    problems = found(measured_packet(), recipe=DEMO)
    assert problems["identity.model.synthetic"] == "is false, but recipe 'qwen3.5-9b' model.synthetic is true"


def test_runtime_platform_that_is_not_the_hardwares() -> None:
    packet = edited(lambda d: d["identity"]["runtime"].update(platform="cuda"))
    field, message = only(found(packet))
    assert field == "identity.runtime.platform"
    assert message == "is 'cuda', but hardware 'arc_pro_b70' is a 'xpu' platform"


def test_tensor_parallel_size_over_the_host_card_count() -> None:
    def tp2(d: Draft) -> None:
        for arm in d["arms"]:
            arm["config"]["tensor_parallel_size"] = 2
            arm["label"] = arm["label"].replace("1 card", "2 cards")

    problems = found(edited(tp2))
    assert problems == {
        f"arms[{i}].config.tensor_parallel_size": "tensor_parallel_size 2 exceeds the host's card_count 1"
        for i in (0, 1)
    }


# --- figures -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["arms"][0].update(published_figure=-5.0), "arms[0].published_figure"),
        (lambda d: d["arms"][1].update(oracle_decode_tok_s=[46.0, -46.0]), "arms[1].oracle_decode_tok_s[1]"),
        (lambda d: d["arms"][0].update(published_ttft_ms=[-1.0]), "arms[0].published_ttft_ms[0]"),
        (
            lambda d: [
                d["arms"][1]["gates"][0].update(exact=11, passed=False, first_divergence=[None] * 11 + [-5]),
                d["arms"][1].update(state="withheld", withheld_reason="G2 failed"),
            ],
            "arms[1].gates[0].first_divergence[11]",
        ),
    ],
)
def test_negative_figure(change: Callable[[Draft], object], field: str) -> None:
    problems = found(edited(change))
    assert problems[field] in ("is negative: -5", "is negative: -46", "is negative: -1")


def test_negative_figures_the_packet_model_already_refuses() -> None:
    """Server rates, TTFT, row counts, spec counters, ladder values and wall times: refused again
    here, so a change of the packet format cannot let a negative one through."""
    packet = measured_packet()
    server = packet.arms[0].servers[0]
    forged_server = server.model_copy(update={"ttft_ms": -3.0})
    forged = packet.model_copy(
        update={"arms": [packet.arms[0].model_copy(update={"servers": [forged_server, packet.arms[0].servers[1]]})]}
    )
    assert found(forged)["arms[0].servers[0].ttft_ms"] == "is negative: -3"
    # a row's figures (its rates are derived from its unsigned µs times, never stored)
    other = packet.arms[0].servers[1]
    rows = list(other.rows)
    rows[3] = rows[3].model_copy(update={"cached_tokens": -5})
    forged_rows = other.model_copy(update={"rows": rows})
    forged = packet.model_copy(
        update={"arms": [packet.arms[0].model_copy(update={"servers": [server, forged_rows]}), packet.arms[1]]}
    )
    assert found(forged)["arms[0].servers[1].rows[3].cached_tokens"] == "is negative: -5"


def test_negative_spec_counter_per_position() -> None:
    metrics = spec_metrics(accepted_per_position=[1100, -100])
    packet = edited(lambda d: d["arms"][1]["servers"][0].update(spec_metrics=metrics))
    assert found(packet)["arms[1].servers[0].spec_metrics.accepted_per_position[1]"] == "is negative: -100"


def test_negative_ladder_value() -> None:
    ladder = {"arm": ORACLE_ARM, "kind": "context", "context": [{"depth_tokens": 2048, "content_class": "code"}]}
    packet = edited(lambda d: d.update(ladders=[ladder]))
    point = packet.ladders[0].context[0].model_copy(update={"ttft_ms": -1.0})
    forged = packet.model_copy(update={"ladders": [packet.ladders[0].model_copy(update={"context": [point]})]})
    assert found(forged)["ladders[0].context[0].ttft_ms"] == "is negative: -1"


def test_server_rate_over_the_physical_ceiling() -> None:
    packet = edited(lambda d: d["arms"][0]["servers"][0].update(decode_tok_s=1_234_567.0), spec=False)
    plain = plain_ceiling(packet, 0)
    field, message = only(found(packet))
    assert field == "arms[0].servers[0].decode_tok_s"
    assert message == (
        f"decode rate 1,234,567 tok/s exceeds the physical ceiling {plain:.3g} tok/s × margin 1.5"
        f" (= {plain * 1.5:.3g} tok/s)"
    )


def test_rate_just_within_the_margin_passes() -> None:
    packet = measured_packet(spec=False)
    plain = plain_ceiling(packet, 0)
    ok = edited(lambda d: d["arms"][0]["servers"][0].update(decode_tok_s=plain * CEILING_MARGIN * 0.99), spec=False)
    over = edited(lambda d: d["arms"][0]["servers"][0].update(decode_tok_s=plain * CEILING_MARGIN * 1.01), spec=False)
    assert found(ok) == {}
    assert set(found(over)) == {"arms[0].servers[0].decode_tok_s"}


def test_speculative_rate_may_exceed_the_plain_ceiling_by_depth_plus_one() -> None:
    packet = measured_packet()
    plain = plain_ceiling(packet, 1)
    within = edited(lambda d: d["arms"][1]["servers"][1].update(decode_tok_s=plain * 3 * CEILING_MARGIN * 0.99))
    assert found(within) == {}
    over = edited(lambda d: d["arms"][1]["servers"][1].update(decode_tok_s=plain * 3 * CEILING_MARGIN * 1.01))
    field, message = only(found(over))
    assert field == "arms[1].servers[1].decode_tok_s"
    assert f"exceeds the physical ceiling {plain:.3g} tok/s × (depth + 1 = 3) × margin 1.5" in message


def test_speculative_rate_bounded_by_its_recorded_acceptance() -> None:
    plain = plain_ceiling(measured_packet(), 1)

    def rate(d: Draft) -> None:  # 2.5 × plain: within depth + 1 = 3, over the recorded L = 1.5
        for server in d["arms"][1]["servers"]:
            server["spec_metrics"] = spec_metrics(accepted=200)
        d["arms"][1]["servers"][0]["decode_tok_s"] = plain * 2.5 * CEILING_MARGIN

    field, message = only(found(edited(rate)))
    assert field == "arms[1].servers[0].decode_tok_s"
    assert f"× mean acceptance length 1.5 × margin 1.5 (= {plain * 1.5 * 1.5:.3g} tok/s)" in message


def test_published_figure_over_the_physical_ceiling() -> None:
    packet = seal_draft(published_draft([published_arm("tp1-mtp0", [50.0], gates=G1)]))
    plain = plain_ceiling(packet, 0)
    draft = published_draft([{**published_arm("tp1-mtp0", [50.0], gates=G1), "published_figure": plain * 2}])
    field, message = only(found(seal_draft(draft)))
    assert field == "arms[0].published_figure"
    assert message.startswith(f"decode rate {plain * 2:.3g} tok/s exceeds the physical ceiling {plain:.3g} tok/s")


def test_context_ladder_rate_over_the_physical_ceiling() -> None:
    point = {"depth_tokens": 2048, "content_class": "code", "decode_tok_s": 10_000.0}
    packet = edited(lambda d: d.update(ladders=[{"arm": ORACLE_ARM, "kind": "context", "context": [point]}]))
    field, message = only(found(packet))
    assert field == "ladders[0].context[0].decode_tok_s"
    assert message.startswith("decode rate 10,000 tok/s exceeds the physical ceiling")


def _unknown_model(d: Draft) -> None:
    serve(d, "Org/Mystery-7B", slug="mystery", weight_bytes=None)


def test_ceiling_skipped_when_the_projection_knows_too_little() -> None:
    draft = published_draft([published_arm("tp1-mtp0", [1_000_000.0], gates=G1)])
    _unknown_model(draft)
    assert found(seal_draft(draft), recipe=None) == {}


def test_measured_packet_needs_a_ceiling() -> None:
    """A synthetic model (its facts are its own) that declares none, of a recipe without a count."""
    uncounted = DEMO.model_copy(
        update={
            "model": DEMO.model.model_copy(
                update={"parameter_count": "unknown", "active_parameters": None, "min_vllm_version": None}
            )
        }
    )
    synthetic = {"slug": "demo", "synthetic": True, "weight_bytes": None}
    packet = edited(lambda d: serve(d, "local/demo-qwen3-tiny", **synthetic), spec=False)
    field, message = only(found(packet, recipe=uncounted))
    assert field == "arms[0]"
    assert message.startswith(f"arm {ORACLE_ARM!r}: the projection cannot compute a physical ceiling")


# --- token arrays --------------------------------------------------------------------------


def test_a_negative_token_id_cannot_be_written() -> None:
    """Token ids are unsigned 32-bit integers: no file can hold a negative one, so the consistency
    check looks only for ids at or above the vocabulary size."""
    with pytest.raises(OverflowError):
        to_uint32([-1])


def test_token_times_that_go_backwards() -> None:
    before = measured_packet(spec=False).arms[0].servers[0].rows[1].token_times_us[49]

    def backwards(d: Draft) -> None:
        set_array(d["arms"][0]["servers"][0]["rows"][1], "token_times_us", 50, before - 1)

    field, message = only(found(edited(backwards, spec=False)))
    assert field == "arms[0].servers[0].rows[1].token_times_us[50]"
    assert message == f"token time {before - 1:,} µs is earlier than the token before it ({before:,} µs)"


# (No test of a first token time that is not the row's TTFT: schema 2 stores no row TTFT, it is times[0].)


def test_negative_token_time() -> None:
    """Token times are unsigned µs: a negative one cannot be written, and a signed -2 written in
    its place reads as 4,294,967,294 µs, which the next token is refused as earlier than."""
    with pytest.raises(OverflowError):
        to_uint32([-2])
    second = measured_packet(spec=False).arms[0].servers[0].rows[0].token_times_us[1]
    packet = edited(
        lambda d: set_array(d["arms"][0]["servers"][0]["rows"][0], "token_times_us", 0, -2 % 2**32), spec=False
    )
    field, message = only(found(packet))
    assert field == "arms[0].servers[0].rows[0].token_times_us[1]"
    assert message == f"token time {second:,} µs is earlier than the token before it (4,294,967,294 µs)"


# --- speculative counters ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metrics", "field", "message"),
    [
        (spec_metrics(accepted=801), "accepted_tokens", "801 accepted draft tokens exceed the 800 drafted"),
        (
            spec_metrics(accepted_per_position=[240, 120]),
            "accepted_per_position",
            "sums to 360, not the 400 accepted_tokens",
        ),
        (
            spec_metrics(accepted_per_position=[240, 120, 40]),
            "accepted_per_position",
            "has 3 positions, more than the arm's depth 2",
        ),
        (
            spec_metrics(drafts=360),
            "draft_tokens",
            "800 drafted tokens exceed drafts × depth = 360 × 2 = 720",
        ),
    ],
)
def test_speculative_counters_that_disagree(metrics: dict[str, Any], field: str, message: str) -> None:
    packet = edited(lambda d: d["arms"][1]["servers"][1].update(spec_metrics=metrics))
    assert only(found(packet)) == (f"arms[1].servers[1].spec_metrics.{field}", message)


# --- ladders and dates ---------------------------------------------------------------------


def test_concurrency_point_with_more_tokens_than_its_users_may_ask_for() -> None:
    points = [
        {"users": 2, "completion_tokens": 1024, "wall_s": 9.0},
        {"users": 4, "completion_tokens": 2049, "wall_s": 9.0},
    ]
    packet = edited(lambda d: d.update(ladders=[{"arm": ORACLE_ARM, "kind": "concurrency", "concurrency": points}]))
    field, message = only(found(packet))
    assert field == "ladders[0].concurrency[1].completion_tokens"
    assert message == "2,049 completion tokens exceed users × max_tokens = 4 × 512 = 2,048"


def test_created_in_the_future() -> None:
    packet = measured_packet()
    assert packet.created is not None
    assert found(packet, now=packet.created - timedelta(minutes=9)) == {}
    field, message = only(found(packet, now=packet.created - timedelta(minutes=11)))
    assert field == "created"
    assert message == (
        "2026-11-30T10:15:00+00:00 is in the future (now 2026-11-30T10:04:00+00:00, 10 minutes of clock skew allowed)"
    )


# --- reproductions -------------------------------------------------------------------------


def test_independent_reproduction_passes() -> None:
    original = measured_packet()
    reproduction = seal_draft(independent(measured_draft(title="again", ms_per_token=20.5)))
    assert reproduction_problems(reproduction, original) == []


@pytest.mark.parametrize(
    ("key", "value"),
    [("slug", "qwen3.5-4b"), ("variant", "fp8"), ("repo", "Qwen/Qwen3.5-4B"), ("quantization", "fp8-dynamic")],
)
def test_reproduction_of_another_model(key: str, value: str) -> None:
    original = measured_packet()
    draft = independent(measured_draft(title="again", ms_per_token=20.5))
    draft["identity"]["model"][key] = value
    problems = dict(reproduction_problems(seal_draft(draft), original))
    assert problems == {
        f"identity.model.{key}": f"is {value!r}, but the packet it reproduces ({original.id}) has"
        f" {getattr(original.identity.model, key)!r}"
    }


def test_reproduction_of_another_configuration() -> None:
    original = measured_packet()
    fewer = seal_draft(independent(measured_draft(title="again", ms_per_token=20.5, spec=False)))
    assert reproduction_problems(fewer, original) == [
        ("arms", f"configurations differ from the packet it reproduces: only in {original.id}: TP 1, mtp depth 2")
    ]
    draft = independent(measured_draft(title="again", ms_per_token=20.5))
    draft["arms"][1]["config"]["env"] = {DRAFT_INT4_ENV: "1"}
    field, message = only(dict(reproduction_problems(seal_draft(draft), original)))
    assert field == "arms"
    assert f"only here: TP 1, mtp depth 2, {DRAFT_INT4_ENV}=1" in message


def test_reproduction_on_the_same_boot() -> None:
    original = measured_packet()
    same_boot = seal_draft(measured_draft(title="again", ms_per_token=20.5))
    assert reproduction_problems(same_boot, original) == [
        (
            "identity.host.boot_id",
            f"'4f0c2b1e-boot' is the boot of the packet it reproduces ({original.id}): a reproduction needs an"
            " independent run",
        )
    ]


def test_reproduction_with_the_originals_timings() -> None:
    original = measured_packet()
    copied = seal_draft(independent(measured_draft(title="re-labelled")))
    problems = dict(reproduction_problems(copied, original))
    assert set(problems) == {f"arms[{i}].servers[{j}].rows[0].token_times_us" for i in (0, 1) for j in (0, 1)}
    assert problems["arms[0].servers[0].rows[0].token_times_us"] == (
        "server A of arm 'tp1-mtp0': its token times for prompt 'ops-incident-retro' are those of server A of arm"
        f" 'tp1-mtp0' (arms[0].servers[0]) of {original.id} shifted or scaled to within 2 µs: a copy, not a"
        " reproduction"
    )


# --- the loader and `python -m catalog.verify` ---------------------------------------------


def load_problems(tree: Path) -> list[CatalogError]:
    with pytest.raises(CatalogError) as info:
        load_catalog(tree / "data", tree / "packets")
    return info.value.errors if isinstance(info.value, CatalogErrors) else [info.value]


def test_loader_names_file_and_field_of_each_kind_of_check(tree: Path) -> None:
    own = write_packet(sealed(edited_draft(lambda d: d["arms"][0].update(gates=[]))), tree / "packets")  # verify
    cuda = write_packet(
        sealed(edited_draft(lambda d: d["identity"]["runtime"].update(platform="cuda"))), tree / "packets"
    )
    original = sealed(measured_draft(title="original"))
    write_packet(original, tree / "packets")
    copied = independent(measured_draft(title="copied"))
    copied["reproduces"] = original.packet.id
    copy_path = write_packet(sealed(copied), tree / "packets")
    located = sorted((e.file or "", e.field or "") for e in load_problems(tree))
    assert located == sorted(
        [
            (str(own), "arms[0].gates"),
            (str(cuda), "identity.runtime.platform"),
            *[(str(copy_path), f"arms[{i}].servers[{j}].rows[0].token_times_us") for i in (0, 1) for j in (0, 1)],
        ]
    )


def _reproduction_copy(tree: Path) -> Sealed:
    original = sealed(measured_draft(title="original"))
    write_packet(original, tree / "packets")
    draft = measured_draft(title="copy")
    draft["reproduces"] = original.packet.id
    return sealed(draft)


def _edited_file(change: Callable[[Draft], object]) -> Callable[[Path], Sealed]:
    return lambda _: sealed(edited_draft(change))


END_TO_END: list[tuple[str, Callable[[Path], Sealed], str, str]] = [
    ("missing G3", _edited_file(lambda d: d["arms"][1]["gates"].pop(1)), "arms[1].gates", "has no G3 gate"),
    (
        "another model",
        _edited_file(lambda d: serve(d, "Qwen/Qwen3.5-4B")),
        "identity.model.repo",
        "is 'Qwen/Qwen3.5-4B', but recipe",
    ),
    (
        "negative rate",
        _edited_file(lambda d: d["arms"][1].update(oracle_decode_tok_s=[-1.0])),
        "arms[1].oracle_decode_tok_s[0]",
        "is negative: -1",
    ),
    (
        "impossible rate",
        _edited_file(lambda d: d["arms"][0]["servers"][0].update(decode_tok_s=1_234_567.0)),
        "arms[0].servers[0].decode_tok_s",
        "decode rate 1,234,567 tok/s exceeds the physical ceiling",
    ),
    (
        "time travel",
        _edited_file(lambda d: d.update(created="2999-01-01T00:00:00Z")),
        "created",
        "is in the future",
    ),
    ("copied reproduction", _reproduction_copy, "identity.host.boot_id", "is the boot of the packet it reproduces"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "make", "field", "text"), END_TO_END, ids=[case[0] for case in END_TO_END])
def test_verify_refuses_an_inconsistent_packet(
    tree: Path, name: str, make: Callable[[Path], Sealed], field: str, text: str
) -> None:
    path = write_packet(make(tree), tree / "packets")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    result = subprocess.run(
        [sys.executable, "-m", "catalog.verify", "--data", str(tree / "data"), "--packets", str(tree / "packets")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, (name, result.stdout)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith(f"error: {path}: {field}: ")]
    assert any(text in line for line in lines), result.stderr
