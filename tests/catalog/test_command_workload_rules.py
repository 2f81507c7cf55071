"""The recorded command's weights, KV cache and context, and the model's own context
(catalog/recipes/command_facts.py, catalog/checks/commands.py, catalog/checks/workload.py):

- a `--quantization` must be a vLLM method that serves the identity's quantization scheme (none for
  a 16-bit checkpoint);
- an arm's kv_cache_dtype is what its recorded command sets, no `--kv-cache-dtype` being vLLM's
  "auto";
- where the config records no max_model_len, the `--max-model-len` the recorded command sets bounds
  the rows and the context ladder;
- no row and no context point is deeper than the model's context length in data/models (or a
  recipe feature's, such as YaRN's long_context, that the command carries).

One test per rule and its honest side, each naming the field and the numbers."""

from __future__ import annotations

from collections.abc import Callable

from catalog.checks.commands import command_problems
from catalog.checks.workload import model_context, model_context_problems, server_context, workload_problems
from catalog.model.packet import Packet
from catalog.recipes.command_facts import Weights, command_facts, vllm_length
from catalog.recipes.recorded import disagreements, recorded_facts
from tests.catalog.factories import ORACLE_ARM, catalog_recipe, measured_packet
from tests.catalog.test_consistency import Draft, edited

RECIPE = catalog_recipe("qwen3.5-9b")
SERVE = ["vllm", "serve", "Qwen/Qwen3.5-9B"]


def commands(packet: Packet) -> dict[str, str]:
    return dict(command_problems(packet, RECIPE, None))


Edit = Callable[[Draft], None]


def add_argv(*args: str, kv: str | None = None, length: int | None = None) -> Edit:
    def change(d: Draft) -> None:
        for arm in d["arms"]:
            arm["config"]["argv"] += list(args)
            arm["config"]["kv_cache_dtype"] = kv
            arm["config"]["max_model_len"] = length

    return change


def ladder(depth: int, **config: object) -> Edit:
    def change(d: Draft) -> None:
        d["arms"][0]["config"].update(config)
        point = {"depth_tokens": depth, "content_class": "prose", "decode_tok_s": 20.0, "identical_to_oracle": True}
        d["ladders"] = [{"arm": ORACLE_ARM, "kind": "context", "context": [point]}]

    return change


# ---- what a command states ----


def test_a_command_states_its_quantization_kv_cache_and_length_as_vllm_reads_them() -> None:
    plain = command_facts(SERVE)
    assert (plain.quantization, plain.kv_cache_dtype, plain.max_model_len) == (None, "auto", None)
    spelled = command_facts([*SERVE, "-q", "gptq", "--kv_cache_dtype=fp8", "--max_model_len", "8k"])
    assert (spelled.quantization, spelled.kv_cache_dtype, spelled.max_model_len) == ("gptq", "fp8", 8000)
    assert command_facts([*SERVE, "--quantization=fp8", "--quantization", "awq"]).quantization == "awq"  # the last
    assert command_facts([*SERVE, "--quantization-config", "{}"]).quantization == "online"
    assert [vllm_length(v) for v in ("4096", "1K", "25.6k", "auto", "-1", "1.5K")] == [
        4096,
        1024,
        25600,
        None,
        None,
        None,
    ]


def test_each_scheme_allows_the_vllm_methods_that_serve_it() -> None:
    assert Weights.of("bf16").methods == frozenset()
    assert {"compressed-tensors", "fp8"} <= Weights.of("fp8-dynamic").methods
    assert "gptq" not in Weights.of("fp8-dynamic").methods
    assert {"compressed-tensors", "gptq", "awq"} <= Weights.of("w4a16").methods
    assert Weights.of("nf4").methods == frozenset({"nf4"})  # unknown: only its own name


# ---- 1. the weights a --quantization serves ----


def test_a_bf16_packet_whose_command_quantizes_is_refused() -> None:
    problems = commands(edited(add_argv("--quantization", "fp8"), spec=False))
    assert problems["arms[0].config"] == (
        f"arm {ORACLE_ARM}: quantization: its recorded vllm serve command (config.argv) quantizes the weights"
        " with --quantization fp8; the arm records BF16 weights, which no --quantization serves"
        " (identity.model.quantization)"
    )


def test_a_method_of_the_packets_own_scheme_is_its_weights() -> None:
    packet = edited(lambda d: d["identity"]["model"].update(quantization="fp8-dynamic"), spec=False)
    arm = packet.arms[0]
    served = command_facts([*SERVE, "--quantization", "compressed-tensors"])
    assert disagreements(served, recorded_facts(packet, arm)) == []
    (other,) = disagreements(command_facts([*SERVE, "--quantization", "gptq"]), recorded_facts(packet, arm))
    assert other.field == "quantization" and other.packet_field == "identity.model.quantization"
    assert "only --quantization compressed-tensors, fbgemm_fp8, fp8," in other.recorded


# ---- 2. the KV cache dtype a command sets ----


def test_a_kv_cache_dtype_the_command_does_not_set_is_refused() -> None:
    problems = commands(edited(add_argv(kv="fp8"), spec=False))
    assert problems["arms[0].config"] == (
        f"arm {ORACLE_ARM}: KV cache dtype: its recorded vllm serve command (config.argv) sets no --kv-cache-dtype"
        " (vLLM's default 'auto': the model's own dtype); the arm records kv_cache_dtype 'fp8' (config.kv_cache_dtype)"
    )


def test_a_command_setting_a_kv_cache_dtype_its_config_leaves_out_is_refused() -> None:
    problems = commands(edited(add_argv("--kv-cache-dtype", "fp8"), spec=False))
    assert "sets --kv-cache-dtype fp8; the arm records kv_cache_dtype 'auto'" in problems["arms[0].config"]


def test_a_kv_cache_dtype_the_command_sets_is_the_arms() -> None:
    packet = edited(add_argv("--kv-cache-dtype", "fp8", kv="fp8"), spec=False)
    assert [
        d for d in disagreements(command_facts(packet.arms[0].config.argv), recorded_facts(packet, packet.arms[0]))
    ] == []
    plain = measured_packet()  # no flag, nothing recorded: "auto" both
    assert disagreements(command_facts(plain.arms[0].config.argv), recorded_facts(plain, plain.arms[0])) == []


def test_an_arm_without_a_command_records_no_kv_cache_dtype_to_compare() -> None:
    packet = edited(lambda d: [a["config"].update(argv=[]) for a in d["arms"]], spec=False)
    assert recorded_facts(packet, packet.arms[0]).kv_cache_dtype is None


# ---- 3. the context the command sized the server for ----


def test_rows_beyond_the_commands_max_model_len_are_refused() -> None:
    problems = dict(workload_problems(edited(add_argv("--max-model-len", "64"), spec=False)))
    assert problems["arms[0].servers[0].rows[0].prompt_tokens"] == (
        "200 prompt + 120 completion tokens exceed the arm's recorded command's --max-model-len 64"
        " (config.argv; config.max_model_len is null)"
    )


def test_the_smallest_length_a_recorded_command_sets_bounds_the_server() -> None:
    def launch(d: Draft) -> None:
        config = d["arms"][0]["config"]
        config["argv"] += ["--max-model-len", "8192"]
        config["launch_argv"] = [*config["argv"][:-2], "--max-model-len", "300"]

    assert server_context(edited(launch, spec=False).arms[0]) == (
        300,
        "recorded command's --max-model-len 300 (config.launch_argv; config.max_model_len is null)",
    )


def test_a_context_point_beyond_the_commands_max_model_len_is_refused() -> None:
    def deep(d: Draft) -> None:
        add_argv("--max-model-len", "8k")(d)
        ladder(32768)(d)

    assert dict(workload_problems(edited(deep, spec=False)))["ladders[0].context[0].depth_tokens"] == (
        f"32,768 prompt tokens exceed arm {ORACLE_ARM!r}'s recorded command's --max-model-len 8,000"
        " (config.argv; config.max_model_len is null)"
    )


def test_rows_within_the_commands_max_model_len_are_its_workload() -> None:
    assert workload_problems(edited(add_argv("--max-model-len", "8192"), spec=False)) == []


# ---- 4. the model's own context length ----


def test_a_context_point_beyond_the_models_context_is_refused() -> None:
    problems = dict(command_problems(edited(ladder(10_000_000), spec=False), RECIPE, None))
    assert problems["ladders[0].context[0].depth_tokens"] == (
        "10,000,000 prompt tokens exceed the model's context length 262,144 (recipe 'qwen3.5-9b'"
        f" model.context_length), whatever arm {ORACLE_ARM!r} was sized for"
    )


def test_a_max_model_len_beyond_the_model_does_not_lift_its_context() -> None:
    packet = edited(ladder(300_000, max_model_len=10_000_000), spec=False)
    assert [f for f, _ in model_context_problems(packet, RECIPE)] == ["ladders[0].context[0].depth_tokens"]


def test_rows_beyond_the_models_context_are_refused() -> None:
    def long_row(d: Draft) -> None:
        d["arms"][0]["servers"][0]["rows"][0]["prompt_tokens"] = 300_000

    problems = dict(model_context_problems(edited(long_row, spec=False), RECIPE))
    assert problems == {
        "arms[0].servers[0].rows[0].prompt_tokens": "300,000 prompt + 120 completion tokens exceed the model's"
        " context length 262,144 (recipe 'qwen3.5-9b' model.context_length)"
    }


def test_a_context_point_within_the_model_is_its_own() -> None:
    assert model_context_problems(edited(ladder(262_144), spec=False), RECIPE) == []
    assert model_context_problems(edited(ladder(10_000_000)), None) == []  # no recipe: the loader says so


def test_the_long_context_feature_the_command_carries_extends_the_model() -> None:
    feature = RECIPE.features["long_context"]

    def yarn(d: Draft) -> None:
        ladder(1_000_000)(d)
        d["arms"][0]["config"]["argv"] += feature.args
        d["arms"][0]["config"]["env"] = dict(feature.env)

    packet = edited(yarn, spec=False)
    assert model_context(RECIPE, packet.arms[0]) == (
        1_010_000,
        "recipe 'qwen3.5-9b' feature 'long_context''s --max-model-len",
    )
    assert model_context_problems(packet, RECIPE) == []

    def yarn_without_its_length(d: Draft) -> None:
        yarn(d)
        d["arms"][0]["config"]["argv"].pop()

    half = edited(yarn_without_its_length, spec=False)
    assert model_context(RECIPE, half.arms[0])[0] == 262_144


def test_a_features_length_is_read_in_any_spelling_vllm_reads() -> None:
    """A feature writing `--max-model-len=1010k` extends the model as the two-token form does."""
    original = RECIPE.features["long_context"]
    args = [*original.args[:2], "--max-model-len=1010k"]
    recipe = RECIPE.model_copy(
        update={"features": {**RECIPE.features, "long_context": original.model_copy(update={"args": args})}}
    )

    def yarn(d: Draft) -> None:
        ladder(1_000_000)(d)
        d["arms"][0]["config"]["argv"] += args
        d["arms"][0]["config"]["env"] = dict(original.env)

    assert model_context(recipe, edited(yarn, spec=False).arms[0])[0] == 1_010_000
