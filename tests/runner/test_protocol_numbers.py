"""Numbers a real GPU would skew, pinned or recorded (issue 29, items 5 to 8 and 10): the stream
interval, the metrics --disable-log-stats removes, what vLLM resolved for each server (read from
a real vLLM 0.32 CPU server's /server_info and log: tests/runner/vllm/README.md), ITL between
distinct arrivals, and where two outputs part."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from builder.views.methodology import methodology_view
from catalog.checks.evidence import evidence_problems
from catalog.errors import UserError
from catalog.model.metrics import arrival_gaps, compare_rows
from catalog.model.packet import Divergence, GateResult
from catalog.recipes.compose import LaunchCommand
from catalog.recipes.hardware import Hardware, HardwareFile
from catalog.recipes.recipe import Recipe
from catalog.store.documents import load_file
from runner import attempt, load_sweep
from runner.campaign import arm_parts
from runner.metrics_scrape import MetricsError, counters_from_samples, parse_exposition
from runner.plan import ArmPlan, CampaignRequest, flag_value, plan_arms
from runner.server_facts import from_log, from_server_info, read_server_facts
from testkit.samples import DATA, make_rows

HERE = Path(__file__).resolve().parent
SERVER_INFO = json.loads((HERE / "vllm" / "server_info_cpu_0.32.0.json").read_text())
SERVER_LOG = (HERE / "vllm" / "server_log_cpu_0.32.0.txt").read_text()


@pytest.fixture(scope="module")
def demo() -> Recipe:
    return load_file(Recipe, DATA / "models" / "demo.yaml")


@pytest.fixture(scope="module")
def cpu() -> Hardware:
    return next(h for h in load_file(HardwareFile, DATA / "hardware.yaml").hardware if h.id == "cpu_generic")


# ---- item 6: the stream interval is pinned, --disable-log-stats refused ----


def test_every_arm_streams_one_token_per_chunk(demo: Recipe, cpu: Hardware) -> None:
    for arm in plan_arms(CampaignRequest(model="demo", depths=[0, 3]), demo, cpu, "demo.yaml"):
        assert flag_value(arm.command.args, "--stream-interval") == "1"


def test_an_arm_without_engine_statistics_is_refused_before_anything_starts(demo: Recipe, cpu: Hardware) -> None:
    recipe = demo.model_copy(
        update={"model": demo.model.model_copy(update={"base_args": [*demo.model.base_args, "--disable-log-stats"]})}
    )
    with pytest.raises(UserError) as caught:
        plan_arms(CampaignRequest(model="demo"), recipe, cpu, "demo.yaml")
    assert (
        caught.value.field == "CONFIG" and "arm tp1-oracle would run with --disable-log-stats" in caught.value.message
    )
    assert "/metrics counters the runner reads" in caught.value.message


def test_metrics_without_engine_statistics_say_so() -> None:
    """vLLM with --disable-log-stats still serves /metrics, without any vllm:* counter."""
    with pytest.raises(MetricsError) as caught:
        counters_from_samples(parse_exposition('process_cpu_seconds_total 1.5\nhttp_requests_total{handler="x"} 3.0\n'))
    assert "--disable-log-stats" in str(caught.value) and "is this a vLLM server" not in str(caught.value)


# ---- item 6: what vLLM resolved, as the server said it ----


def test_what_a_real_server_resolved_is_read_from_its_server_info() -> None:
    facts = from_server_info(SERVER_INFO, {"VLLM_CPU_KVCACHE_SPACE": "1"}, [])
    assert facts is not None and facts.source == "server_info"
    # CPU: async scheduling off (platforms/cpu.py), DYNAMO_TRACE_ONCE without graphs, not eager
    assert (facts.async_scheduling, facts.enforce_eager, facts.compilation_mode, facts.cudagraph_mode) == (
        False,
        False,
        "DYNAMO_TRACE_ONCE",
        "NONE",
    )
    assert facts.batch_invariant is False and facts.stream_interval == 1
    assert facts.env == {"VLLM_CPU_KVCACHE_SPACE": "1"}


def test_without_server_info_the_startup_log_says_what_it_can() -> None:
    facts = from_log(SERVER_LOG, {}, ["VLLM_XPU_DRAFT_LM_HEAD_INT4"])
    assert facts is not None and facts.source == "log"
    assert (facts.enforce_eager, facts.compilation_mode, facts.cudagraph_mode) == (False, "DYNAMO_TRACE_ONCE", "NONE")
    assert facts.async_scheduling is None  # no log line says it (vllm/config/vllm.py sets it silently)
    assert from_log("plain text\n", {}, []) is None


def test_a_switch_the_server_logged_as_unknown_makes_the_attempt_invalid(tmp_path: Path) -> None:
    """The witness when the runtime's envs.py could not be read at preflight (item 5)."""
    log = tmp_path / "server-A.log"
    log.write_text(SERVER_LOG)
    arm = ArmPlan("tp1-mtp3", 3, "mtp", LaunchCommand("m", [], {"VLLM_XPU_DRAFT_LM_HEAD_INT4": "1"}))
    with pytest.raises(attempt.AttemptInvalid) as caught:
        attempt.resolved_facts("http://127.0.0.1:9", log, arm)  # nothing listens: the log is read
    assert "the server ignored VLLM_XPU_DRAFT_LM_HEAD_INT4" in str(caught.value)
    facts = read_server_facts("http://127.0.0.1:9", log, {})
    assert facts is not None and facts.unknown_env == ["VLLM_XPU_DRAFT_LM_HEAD_INT4"]


# ---- item 7: ITL between distinct arrivals ----


def test_itl_is_counted_between_distinct_arrivals_not_inside_a_chunk() -> None:
    """MTP at depth 3: up to four tokens per step share one arrival. Every gap before this fix
    was taken token to token, so three in four were 0 and the p50 read 0 ms."""
    chunks = [0.0, 0.040, 0.080, 0.120, 0.160]
    times = [at for at in chunks for _ in range(4)]  # four tokens per chunk
    gaps = load_sweep._gaps_ms(times)
    assert gaps == pytest.approx([40.0] * 4) and min(gaps) > 0
    assert arrival_gaps([1.0, 1.0, 2.0, 2.0, 2.5]) == [1.0, 0.5]
    assert arrival_gaps([]) == [] and arrival_gaps([3.0, 3.0]) == []


def test_the_methodology_page_says_how_itl_and_tpot_are_counted() -> None:
    metrics = next(s for s in methodology_view().sections if s.id == "metrics-rule")
    assert "distinct" in metrics.html and "TPOT stays per token" in metrics.html


# ---- item 8: where two outputs part ----


def test_a_gate_records_the_tokens_on_both_sides_of_each_divergence() -> None:
    oracle = make_rows(ms_per_token=20.0)
    spec = make_rows(ms_per_token=12.0, chunk=3, diverge={1: 57})
    gate = compare_rows("G3", "tp1-oracle", spec, oracle, server="A", cause="speculative")
    assert gate.first_divergence == [None, 57, *[None] * 10] and gate.cause == "speculative"
    expected = Divergence(index=57, token=int(spec[1].token_ids[57]), other=int(oracle[1].token_ids[57]))
    assert gate.divergences == [None, expected, *[None] * 10] and expected.token != expected.other
    identical = compare_rows("G1", "B", oracle, oracle, cause="repeat")
    assert identical.divergences == [] and identical.cause == "repeat"  # nothing to say: kept out of the file


def test_a_gate_whose_tokens_disagree_with_its_index_is_refused() -> None:
    with pytest.raises(ValueError, match="differs from first_divergence"):
        GateResult(
            gate="G3",
            against="o",
            exact=1,
            total=2,
            passed=False,
            first_divergence=[None, 4],
            divergences=[None, Divergence(index=5, token=1, other=2)],
        )


def test_divergence_tokens_are_re_derived_from_the_rows() -> None:
    from catalog.packets.seal import seal
    from testkit.samples import measured_parts

    parts = measured_parts(g3_diverges=True)  # speculative server A drifts on prompt 4 at token 57
    spec = parts.arms[1]
    g3 = next(g for g in spec.gates if g.gate == "G3" and g.server == "A")
    assert g3.divergences[4] is not None and g3.divergences[4].index == 57
    assert evidence_problems(seal(parts, None).packet) == []
    forged = g3.model_copy(
        update={"divergences": [*g3.divergences[:4], Divergence(index=57, token=1, other=2), *g3.divergences[5:]]}
    )
    arm = spec.model_copy(update={"gates": [forged if g is g3 else g for g in spec.gates]})
    packet = seal(parts.model_copy(update={"arms": [parts.arms[0], arm]}), None).packet
    assert any(path.endswith("divergences") for path, _ in evidence_problems(packet))


# ---- item 10 ----


def test_the_zero_cached_tokens_issue_is_cited_as_vllm_numbers_it() -> None:
    doc = inspect.getdoc(attempt.cache_check) or ""
    assert "#44377" in doc and "#44383" not in doc


@pytest.mark.parametrize(
    ("args", "cards", "length"),
    [
        (["--tensor-parallel-size", "2", "--max-model-len", "8192"], 2, 8192),
        (["-tp", "2", "--max-model-len", "8k"], 2, 8000),  # vLLM reads 8k as 8,000 and -tp as the size
        (["--tensor-parallel-size=4", "--max-model-len=2K"], 4, 2048),
        (["--max-model-len", "auto"], 1, None),  # the model's own length: none recorded
        (["-tp", "2", "-pp", "2", "--max-model-len", "4096"], 4, 4096),  # energy is sampled on every card used
        ([], 1, None),
    ],
)
def test_the_runner_records_a_commands_cards_and_length_as_vllm_reads_them(args, cards, length) -> None:
    """The arm's record and the server's card count come from the one reading of a command that
    verification uses (catalog/recipes/command_facts.py), not a second, exact-token one: `-tp 2`
    was one card and `--max-model-len 8k` no length (or, for the ladders, a ValueError)."""
    arm = ArmPlan("tp-oracle", 0, None, LaunchCommand("m", args, {}))
    request = CampaignRequest(model="demo", hardware="cpu_generic", depths=[0])
    assert attempt.arm_cards(arm) == cards
    assert arm_parts(arm, [], [], request).config.max_model_len == length


@pytest.mark.parametrize(
    ("args", "recorded"),
    [
        (["--kv-cache-dtype", "fp8"], "fp8"),
        (["--kv-cache-dtype=fp8"], "fp8"),  # one token: the exact-token reading recorded none
        (["--kv_cache_dtype", "fp8_e4m3"], "fp8_e4m3"),
        (["--kv-cache-dtype", "fp8", "--kv-cache-dtype", "auto"], "auto"),  # the last one holds
        ([], None),  # none set: vLLM's "auto", recorded as nothing
    ],
)
def test_the_runner_records_the_kv_cache_dtype_the_command_sets_as_vllm_reads_it(args, recorded) -> None:
    """The packet's kv_cache_dtype is held to its recorded command's (catalog/checks/commands.py):
    a dtype spelled `--kv-cache-dtype=fp8` recorded as none was a packet its own checks refused."""
    arm = ArmPlan("tp-oracle", 0, None, LaunchCommand("m", args, {}))
    request = CampaignRequest(model="demo", hardware="cpu_generic", depths=[0])
    assert arm_parts(arm, [], [], request).config.kv_cache_dtype == recorded
