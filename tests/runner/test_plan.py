"""The campaign plan in-process: plan_arms (which arms, which command each), campaign_id (when a
rerun resumes and when it is a new campaign) and gates_for (which gates an arm is held to).
The subprocess tests drive these through `python -m runner`; these name the rule that broke."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from catalog.errors import UserError
from catalog.recipes.hardware import Hardware, HardwareFile
from catalog.recipes.recipe import Recipe
from catalog.store.documents import load_file
from runner.campaign import gates_for
from runner.plan import (
    DEFAULT_MAX_MODEL_LEN,
    PROTOCOL_ARGS,
    SPEC_FLAG,
    ArmPlan,
    CampaignRequest,
    campaign_id,
    flag_value,
    plan_arms,
)
from testkit.samples import DATA, make_rows, make_server

SUITE_SHA = "a" * 64


@pytest.fixture(scope="module")
def demo() -> Recipe:
    return load_file(Recipe, DATA / "models" / "demo.yaml")


@pytest.fixture(scope="module")
def cpu() -> Hardware:
    hardware = load_file(HardwareFile, DATA / "hardware.yaml").hardware
    return next(h for h in hardware if h.id == "cpu_generic")


def _plan(recipe: Recipe, hardware: Hardware, **asked: object) -> list[ArmPlan]:
    return plan_arms(CampaignRequest.model_validate({"model": "demo", **asked}), recipe, hardware, "demo.yaml")


def test_the_oracle_comes_first_and_each_depth_is_one_arm(demo: Recipe, cpu: Hardware) -> None:
    arms = _plan(demo, cpu, depths=[5, 3])
    assert [(a.id, a.spec_depth, a.spec_method) for a in arms] == [
        ("tp1-oracle", 0, None),
        ("tp1-ngram3", 3, "ngram"),
        ("tp1-ngram5", 5, "ngram"),
    ]


def test_only_speculative_arms_carry_the_speculative_config_at_their_depth(demo: Recipe, cpu: Hardware) -> None:
    oracle, spec = _plan(demo, cpu, depths=[0, 4])
    assert flag_value(oracle.command.args, SPEC_FLAG) is None
    config = json.loads(flag_value(spec.command.args, SPEC_FLAG) or "{}")
    assert config["num_speculative_tokens"] == 4 and config["method"] == "ngram"


def test_every_arm_runs_the_protocol_flags_and_one_sequence_at_a_time(demo: Recipe, cpu: Hardware) -> None:
    for arm in _plan(demo, cpu, depths=[0, 3], seed=99):
        assert set(PROTOCOL_ARGS) <= set(arm.command.args)
        assert flag_value(arm.command.args, "--max-num-seqs") == "1"
        assert flag_value(arm.command.args, "--seed") == "99"
        assert "--enforce-eager" in arm.command.args  # the recipe's cpu override


def test_the_recipes_max_model_len_wins_over_the_runner_default(demo: Recipe, cpu: Hardware) -> None:
    (arm,) = _plan(demo, cpu)
    assert arm.max_model_len_source == "recipe"
    assert flag_value(arm.command.args, "--max-model-len") == "4096"
    unset = demo.model_copy(update={"model": demo.model.model_copy(update={"base_args": []})})
    (default,) = _plan(unset, cpu)
    assert default.max_model_len_source == "runner default"
    assert flag_value(default.command.args, "--max-model-len") == str(min(DEFAULT_MAX_MODEL_LEN, 4096))


@pytest.mark.parametrize("spelled", [["--max-model-len=8k"], ["--max_model_len", "2048"], ["--max-model", "auto"]])
def test_a_recipes_max_model_len_in_any_spelling_vllm_reads_is_kept(demo: Recipe, cpu: Hardware, spelled) -> None:
    """The runner appends its default only where the recipe sets no length: an exact-token reading
    appended `--max-model-len 8192` after `--max-model-len=8k`, and the later flag won in vLLM."""
    model = demo.model.model_copy(update={"base_args": spelled})
    (arm,) = _plan(demo.model_copy(update={"model": model}), cpu)
    assert arm.max_model_len_source == "recipe"
    assert [t for t in arm.command.args if t.replace("_", "-").startswith("--max-model")] == spelled[:1]


def test_the_runners_own_flag_reading_takes_an_attached_value() -> None:
    assert flag_value(["--tokenizer=org/tok", "--seed", "1"], "--tokenizer") == "org/tok"
    assert flag_value(["--max_num_seqs", "8"], "--max-num-seqs") == "8"
    assert flag_value(["--tokenizer-mode", "slow"], "--tokenizer") is None


def test_a_speculative_depth_without_a_speculative_feature_is_refused(demo: Recipe, cpu: Hardware) -> None:
    plain = demo.model_copy(update={"features": {}, "opt_in_features": []})
    assert [a.id for a in _plan(plain, cpu)] == ["tp1-oracle"]
    with pytest.raises(UserError, match="no speculative decoding feature"):
        _plan(plain, cpu, depths=[0, 3])


def test_an_unknown_configuration_is_refused_naming_the_known_ones(demo: Recipe, cpu: Hardware) -> None:
    with pytest.raises(UserError, match="unknown configuration 'nope'"):
        _plan(demo, cpu, configuration="nope")


def test_the_campaign_id_is_stable_for_the_same_plan_and_new_for_any_change(demo: Recipe, cpu: Hardware) -> None:
    request = CampaignRequest(model="demo", depths=[0, 3])
    arms = plan_arms(request, demo, cpu, "demo.yaml")
    first = campaign_id(request, arms, SUITE_SHA, "vllm 0.32")
    assert first == campaign_id(request, plan_arms(request, demo, cpu, "demo.yaml"), SUITE_SHA, "vllm 0.32")
    assert first.startswith("demo-default-") and len(first.rsplit("-", 1)[1]) == 12
    changed_env = [replace(arms[0], command=replace(arms[0].command, env={"X": "1"})), arms[1]]
    others = {
        campaign_id(request.model_copy(update={"seed": 1}), arms, SUITE_SHA, "vllm 0.32"),
        campaign_id(request, arms[:1], SUITE_SHA, "vllm 0.32"),
        campaign_id(request, changed_env, SUITE_SHA, "vllm 0.32"),
        campaign_id(request, arms, "b" * 64, "vllm 0.32"),
        campaign_id(request, arms, SUITE_SHA, "vllm 0.33"),
        campaign_id(request.model_copy(update={"salt": "reproduce"}), arms, SUITE_SHA, "vllm 0.32"),
    }
    assert first not in others and len(others) == 6


def test_the_oracle_is_held_to_g1_only(demo: Recipe, cpu: Hardware) -> None:
    oracle, _ = _plan(demo, cpu, depths=[0, 3])
    runs = [make_server("A", make_rows(ms_per_token=20.0)), make_server("B", make_rows(ms_per_token=20.1))]
    (g1,) = gates_for(oracle, runs, oracle, runs)
    assert (g1.gate, g1.passed, g1.exact, g1.total) == ("G1", True, 12, 12)


def test_a_speculative_arm_gets_g2_and_a_g3_per_server_against_server_a_of_the_oracle(
    demo: Recipe, cpu: Hardware
) -> None:
    oracle, spec = _plan(demo, cpu, depths=[0, 3])
    oracle_runs = [make_server("A", make_rows(ms_per_token=20.0)), make_server("B", make_rows(ms_per_token=20.1))]
    drifted = make_rows(ms_per_token=12.0, diverge={2: 40})
    spec_runs = [make_server("A", make_rows(ms_per_token=12.0)), make_server("B", drifted)]
    gates = gates_for(spec, spec_runs, oracle, oracle_runs)
    assert [(g.gate, g.server, g.against) for g in gates] == [
        ("G2", None, "the arm's second fresh server"),
        ("G3", "A", oracle.id),
        ("G3", "B", oracle.id),
    ]
    assert [g.passed for g in gates] == [False, True, False]
    assert gates[2].exact == 11 and gates[2].first_divergence[2] == 40
