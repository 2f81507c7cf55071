"""Command composition: checked against the seed guide's own launch commands, then layer by layer."""

from __future__ import annotations

import copy
import itertools
import json
import re
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from catalog.errors import CatalogError
from catalog.recipes.compose import LaunchCommand, Selection, compose, flag_name, merge_args, override_keys
from catalog.recipes.hardware import HardwareFile
from catalog.recipes.recipe import Recipe
from catalog.store.documents import load_file
from tests.catalog.factories import DATA

RECIPE_9B = load_file(Recipe, DATA / "models" / "qwen3.5-9b.yaml")
HARDWARE = load_file(HardwareFile, DATA / "hardware.yaml").by_id()
B70, H100, CPU = HARDWARE["arc_pro_b70"], HARDWARE["h100_sxm"], HARDWARE["cpu_generic"]


# --- reading the guide's commands, independently of catalog.recipes.compose ------------------------


def guide_commands(guide: str) -> list[list[str]]:
    """argv of every ```bash block that launches a server, continuation lines joined."""
    blocks = re.findall(r"```bash\n(.*?)```", guide, flags=re.S)
    return [
        shlex.split(block.replace("\\\n", " "), comments=True)
        for block in blocks
        if "vllm serve" in block or "docker run" in block
    ]


def is_flag(token: str) -> bool:
    return token.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", token)


def groups(tokens: list[str]) -> list[list[str]]:
    out: list[list[str]] = []
    for token in tokens:
        if is_flag(token) or not out:
            out.append([token])
        else:
            out[-1].append(token)
    return out


def value(token: str) -> Any:
    """JSON-valued arguments compare as data: '{"a": 1}' equals '{"a":1}'."""
    return json.loads(token) if token[:1] in "{[" else token


def flag_map(args: list[str]) -> dict[str, list[Any]]:
    mapping: dict[str, list[Any]] = {}
    for group in groups(args):
        flag, rest = group[0], group[1:]
        if "=" in flag:
            flag, inline = flag.split("=", 1)
            rest = [inline, *rest]
        assert flag not in mapping, f"{flag} given twice"
        mapping[flag] = [value(v) for v in rest]
    return mapping


def split_serve(argv: list[str]) -> tuple[str, list[str]]:
    assert argv[:2] == ["vllm", "serve"]
    return argv[2], argv[3:]


def split_docker(argv: list[str]) -> tuple[list[str], str, str, list[str]]:
    """docker options, image, model id, server args."""
    assert argv[:2] == ["docker", "run"]
    image_at = next(i for i, t in enumerate(argv) if t.startswith("vllm/vllm-openai"))
    return argv[2:image_at], argv[image_at], argv[image_at + 1], argv[image_at + 2 :]


GUIDE = guide_commands(RECIPE_9B.guide)


def test_the_guide_has_three_launch_commands() -> None:
    assert [argv[:2] for argv in GUIDE] == [["vllm", "serve"], ["vllm", "serve"], ["docker", "run"]]


# base_args are part of every composed command; the guide's hand-written commands leave them out.
BASE: dict[str, list[str]] = {"--trust-remote-code": []}


def test_guide_single_gpu_bf16() -> None:
    model, args = split_serve(GUIDE[0])
    assert flag_map(args) == {"--max-model-len": ["262144"], "--reasoning-parser": ["qwen3"]}
    command = compose(RECIPE_9B, Selection(features=["reasoning"], extra_args=["--max-model-len", "262144"]))
    assert command.model_id == model == "Qwen/Qwen3.5-9B"
    assert flag_map(command.args) == {**BASE, **flag_map(args)}
    assert command.env == {}
    assert command.docker_image is None
    assert command.docker_argv() is None


def test_guide_mtp_speculative_decoding() -> None:
    model, args = split_serve(GUIDE[1])
    assert flag_map(args)["--speculative-config"] == [{"method": "mtp", "num_speculative_tokens": 1}]
    command = compose(RECIPE_9B, Selection(features=["reasoning", "spec_decoding"]))
    assert command.model_id == model
    assert flag_map(command.args) == {**BASE, **flag_map(args)}
    # the recipe spells the JSON compactly; the values are the same data, not the same text
    assert '{"method":"mtp","num_speculative_tokens":1}' in command.args
    assert '{"method": "mtp", "num_speculative_tokens": 1}' in args


def test_guide_docker_intel_xpu() -> None:
    options, image, model, args = split_docker(GUIDE[2])
    assert flag_map(args) == {"--reasoning-parser": ["qwen3"], "--max-model-len": ["8192"], "--enforce-eager": []}
    command = compose(
        RECIPE_9B, Selection(features=["reasoning"], hardware=B70, extra_args=["--max-model-len", "8192"])
    )
    assert command.docker_image == image == "vllm/vllm-openai-xpu:latest"
    assert command.platform == "xpu"
    assert command.model_id == model
    # --enforce-eager comes from the recipe's xpu hardware override, matched by the B70's generation
    assert flag_map(command.args) == {**BASE, **flag_map(args)}

    docker = command.docker_argv()
    assert docker is not None
    c_options, c_image, c_model, c_args = split_docker(docker)
    assert (c_image, c_model, c_args) == (image, model, command.args)
    # the same docker options as the guide (~ written as $HOME so it expands inside quotes), plus --rm
    expected = Counter(tuple(g) for g in groups([o.replace("~/", "$HOME/") for o in options]))
    expected[("--rm",)] += 1
    assert Counter(tuple(g) for g in groups(c_options)) == expected


def test_guide_commands_drift_is_caught() -> None:
    """The comparison is strict: a missing or changed value would fail the three tests above."""
    _, args = split_serve(GUIDE[0])
    command = compose(RECIPE_9B, Selection(features=["reasoning"], extra_args=["--max-model-len", "8192"]))
    assert flag_map(command.args) != {**BASE, **flag_map(args)}
    command = compose(RECIPE_9B, Selection(extra_args=["--max-model-len", "262144"]))  # tool calling on too
    assert flag_map(command.args) != {**BASE, **flag_map(args)}


# --- defaults, opt-in features, variants ---------------------------------------------------


def test_default_selection_uses_all_but_opt_in_features() -> None:
    command = compose(RECIPE_9B, Selection())
    assert command.argv() == [
        "vllm", "serve", "Qwen/Qwen3.5-9B",
        "--trust-remote-code",
        "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder",
        "--reasoning-parser", "qwen3",
    ]  # fmt: skip
    assert command.env == {}
    for opt_in in ("--speculative-config", "--language-model-only", "--hf-overrides", "--max-model-len"):
        assert opt_in not in command.args


def test_empty_feature_list_turns_everything_off() -> None:
    assert compose(RECIPE_9B, Selection(features=[])).args == ["--trust-remote-code"]


def test_opt_in_feature_when_asked() -> None:
    command = compose(RECIPE_9B, Selection(features=["long_context"]))
    mapping = flag_map(command.args)
    assert mapping["--max-model-len"] == ["1010000"]
    assert mapping["--hf-overrides"][0]["text_config"]["rope_parameters"]["factor"] == 4.0
    assert command.env == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    assert "--reasoning-parser" not in mapping  # an explicit list replaces the defaults


def test_features_follow_recipe_order_not_selection_order() -> None:
    one = compose(RECIPE_9B, Selection(features=["text_only", "reasoning", "tool_calling"]))
    two = compose(RECIPE_9B, Selection(features=["tool_calling", "text_only", "reasoning"]))
    assert one.args == two.args
    assert one.args == [
        "--trust-remote-code", "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder",
        "--reasoning-parser", "qwen3", "--language-model-only",
    ]  # fmt: skip


def test_fp8_variant() -> None:
    command = compose(RECIPE_9B, Selection(variant="fp8", features=[]))
    assert command.model_id == "RedHatAI/Qwen3.5-9B-FP8-dynamic"
    assert command.args == ["--trust-remote-code", "--kv-cache-dtype", "fp8"]


def test_unknown_variant_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError) as info:
        compose(RECIPE_9B, Selection(variant="nvfp4"), source="data/models/qwen3.5-9b.yaml")
    error = info.value
    assert (error.file, error.field) == ("data/models/qwen3.5-9b.yaml", "variants")
    assert "unknown variant 'nvfp4'" in error.message
    assert "default, fp8" in error.message
    assert str(error).startswith("data/models/qwen3.5-9b.yaml: variants: unknown variant")


def test_unknown_feature_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError) as info:
        compose(RECIPE_9B, Selection(features=["reasoning", "turbo"]))
    assert info.value.field == "features"
    assert "unknown feature 'turbo'" in info.value.message
    assert "tool_calling, reasoning, spec_decoding, text_only, long_context" in info.value.message


def test_xpu_override_only_on_xpu() -> None:
    assert "--enforce-eager" in compose(RECIPE_9B, Selection(hardware=B70)).args
    assert "--enforce-eager" in compose(RECIPE_9B, Selection(hardware=HARDWARE["arc_pro_b60"])).args
    assert "--enforce-eager" not in compose(RECIPE_9B, Selection(hardware=H100)).args
    assert "--enforce-eager" not in compose(RECIPE_9B, Selection(hardware=CPU)).args
    assert "--enforce-eager" not in compose(RECIPE_9B, Selection()).args


def test_override_keys() -> None:
    assert override_keys(B70) == ["intel", "xpu", "arc_pro_b70"]
    assert override_keys(H100) == ["nvidia", "hopper", "h100_sxm"]
    assert override_keys(None) == []


# --- a synthetic recipe with every layer ---------------------------------------------------


def make_recipe(**sections: Any) -> Recipe:
    data: dict[str, Any] = {
        "meta": {
            "title": "T", "slug": "t", "provider": "p", "description": "d",
            "date_added": "2026-01-01", "date_updated": "2026-01-02", "difficulty": "beginner",
        },
        "model": {"model_id": "org/m", "architecture": "dense", "parameter_count": "1B", "context_length": 4096},
        "variants": {
            "default": {"precision": "bf16", "vram_minimum_gb": 2, "description": "d"},
            "fp8": {"model_id": "org/m-fp8", "precision": "fp8", "vram_minimum_gb": 1, "description": "d"},
        },
    }  # fmt: skip
    for key, section in sections.items():
        if isinstance(section, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **section}
        else:
            data[key] = section
    return Recipe.model_validate(copy.deepcopy(data))


# Layers in the documented order, lowest first. `tp` sets --tensor-parallel-size through the
# selection; every other layer writes the flag (and an env var) itself.
LAYERS = ["base", "variant", "variant_hw", "tp", "strategy", "hardware", "feature", "extras"]


def layered(present: set[str]) -> tuple[Recipe, Selection]:
    def arg(layer: str) -> list[str]:
        return ["--tensor-parallel-size", str(LAYERS.index(layer) + 2)] if layer in present else []

    def env(layer: str) -> dict[str, str]:
        return {"LAYER": layer} if layer in present and layer != "tp" else {}

    recipe = make_recipe(
        model={"base_args": arg("base"), "base_env": env("base")},
        variants={
            "default": {
                "precision": "bf16", "vram_minimum_gb": 2, "description": "d",
                "extra_args": arg("variant"), "extra_env": env("variant"),
                "hardware_overrides": {"xpu": {"extra_args": arg("variant_hw"), "extra_env": env("variant_hw")}},
            }
        },
        compatible_strategies=["single_node_tp"],
        default_strategy="single_node_tp",
        strategy_overrides={"single_node_tp": {"extra_args": arg("strategy"), "env": env("strategy")}},
        hardware_overrides={"xpu": {"extra_args": arg("hardware"), "extra_env": env("hardware")}},
        features={"f": {"description": "d", "args": arg("feature"), "env": env("feature")}},
    )  # fmt: skip
    selection = Selection(
        hardware=B70,
        tensor_parallel_size=LAYERS.index("tp") + 2 if "tp" in present else None,
        extra_args=arg("extras"),
        extra_env=env("extras"),
    )
    return recipe, selection


SUBSETS = [set(c) for n in range(1, len(LAYERS) + 1) for c in itertools.combinations(LAYERS, n)]


@pytest.mark.parametrize("present", SUBSETS, ids=["+".join(sorted(s, key=LAYERS.index)) for s in SUBSETS])
def test_later_layers_override_earlier_ones(present: set[str]) -> None:
    recipe, selection = layered(present)
    command = compose(recipe, selection)
    top = max(present, key=LAYERS.index)
    assert command.args == ["--tensor-parallel-size", str(LAYERS.index(top) + 2)]
    env_layers = present - {"tp"}
    if env_layers:
        assert command.env == {"LAYER": max(env_layers, key=LAYERS.index)}
    else:
        assert command.env == {}


def test_override_order_spelled_out() -> None:
    recipe, selection = layered(set(LAYERS))
    assert compose(recipe, selection).args == ["--tensor-parallel-size", "9"]  # extras
    recipe, selection = layered({"base", "variant", "tp", "hardware"})
    assert compose(recipe, selection).args == ["--tensor-parallel-size", "7"]  # hardware beats tp
    recipe, selection = layered({"base", "variant"})
    assert compose(recipe, selection).args == ["--tensor-parallel-size", "3"]  # variant beats base


def test_merge_keeps_last_occurrence_in_its_position() -> None:
    recipe = make_recipe(model={"base_args": ["--a", "1", "--b", "2", "--c"]})
    command = compose(recipe, Selection(extra_args=["--a", "3", "--d", "x", "y"]))
    assert command.args == ["--b", "2", "--c", "--a", "3", "--d", "x", "y"]


@pytest.mark.parametrize(
    ("base", "extra", "expected"),
    [
        (["--enable-prefix-caching"], ["--no-enable-prefix-caching"], ["--no-enable-prefix-caching"]),
        (["--no-enable-prefix-caching"], ["--enable-prefix-caching"], ["--enable-prefix-caching"]),
        (["--max-num-seqs", "8"], ["--max-num-seqs=1"], ["--max-num-seqs=1"]),
        (["--max-num-seqs=8"], ["--max-num-seqs", "1"], ["--max-num-seqs", "1"]),
    ],
)
def test_negated_and_inline_flags_override(base: list[str], extra: list[str], expected: list[str]) -> None:
    recipe = make_recipe(model={"base_args": base})
    assert compose(recipe, Selection(extra_args=extra)).args == expected


def test_flag_helpers() -> None:
    assert flag_name("--no-enable-prefix-caching") == "--enable-prefix-caching"
    assert flag_name("--max-model-len=8192") == "--max-model-len"
    assert flag_name("-tp") == "-tp"
    # negative numbers are values, not flags
    assert merge_args(["--offset", "-1", "--x", "--offset", "-2.5"]) == ["--x", "--offset", "-2.5"]
    assert merge_args(["--a", '{"k": -1}', "--a", "[1]"]) == ["--a", "[1]"]


def test_variant_tp_and_selection_tp() -> None:
    recipe = make_recipe(variants={"default": {"precision": "bf16", "vram_minimum_gb": 2, "description": "d", "tp": 2}})
    assert compose(recipe, Selection()).args == ["--tensor-parallel-size", "2"]
    assert compose(recipe, Selection(tensor_parallel_size=4)).args == ["--tensor-parallel-size", "4"]
    assert compose(make_recipe(), Selection(tensor_parallel_size=1)).args == []


def test_variant_hardware_overrides() -> None:
    recipe = make_recipe(
        variants={
            "default": {"precision": "bf16", "vram_minimum_gb": 2, "description": "d"},
            "fp8": {
                "precision": "fp8", "vram_minimum_gb": 1, "description": "d",
                "extra_args": ["--quantization", "fp8"],
                "hardware_overrides": {
                    "xpu": {"extra_args": ["--quantization", "fp8-xpu"], "extra_env": {"ONEAPI": "1"}},
                    "hopper": {"extra_args": ["--kv-cache-dtype", "fp8_e4m3"]},
                },
            },
        },
    )  # fmt: skip
    assert compose(recipe, Selection(variant="fp8")).args == ["--quantization", "fp8"]
    xpu = compose(recipe, Selection(variant="fp8", hardware=B70))
    assert (xpu.args, xpu.env) == (["--quantization", "fp8-xpu"], {"ONEAPI": "1"})
    hopper = compose(recipe, Selection(variant="fp8", hardware=H100))
    assert hopper.args == ["--quantization", "fp8", "--kv-cache-dtype", "fp8_e4m3"]
    assert compose(recipe, Selection(variant="default", hardware=B70)).args == []


def test_hardware_keys_apply_vendor_then_generation_then_id() -> None:
    recipe = make_recipe(
        hardware_overrides={
            "arc_pro_b70": {"extra_args": ["--block-size", "id"]},
            "xpu": {"extra_args": ["--block-size", "generation", "--enforce-eager"]},
            "intel": {"extra_args": ["--block-size", "vendor", "--dtype", "float16"]},
        }
    )
    b70 = compose(recipe, Selection(hardware=B70))
    assert b70.args == ["--dtype", "float16", "--enforce-eager", "--block-size", "id"]
    b60 = compose(recipe, Selection(hardware=HARDWARE["arc_pro_b60"]))
    assert b60.args == ["--dtype", "float16", "--block-size", "generation", "--enforce-eager"]
    assert compose(recipe, Selection(hardware=H100)).args == []


def test_feature_variants_gate() -> None:
    recipe = make_recipe(
        features={"fp8kv": {"description": "d", "args": ["--kv-cache-dtype", "fp8"], "variants": ["fp8"]}}
    )
    assert compose(recipe, Selection()).args == []
    assert compose(recipe, Selection(variant="fp8")).args == ["--kv-cache-dtype", "fp8"]


def test_feature_strategies_gate() -> None:
    recipe = make_recipe(
        compatible_strategies=["single_node_tp", "multi_node_tp_pp"],
        default_strategy="single_node_tp",
        features={
            "mtp": {"description": "d", "args": ["--speculative-config", "{}"], "strategies": ["single_node_tp"]}
        },
    )
    assert compose(recipe, Selection()).args == ["--speculative-config", "{}"]
    assert compose(recipe, Selection(strategy="multi_node_tp_pp")).args == []
    # no strategy known at all: a strategy-gated feature stays on
    recipe = make_recipe(features={"mtp": {"description": "d", "args": ["--x"], "strategies": ["single_node_tp"]}})
    assert compose(recipe, Selection()).args == ["--x"]


def test_strategy_overrides_apply_for_the_chosen_strategy() -> None:
    recipe = make_recipe(
        compatible_strategies=["single_node_tp", "single_node_dep"],
        default_strategy="single_node_tp",
        strategy_overrides={
            "single_node_dep": {"extra_args": ["--enable-expert-parallel"], "env": {"A": "1"}, "extra_env": {"A": "2"}}
        },
    )
    assert compose(recipe, Selection()).args == []
    dep = compose(recipe, Selection(strategy="single_node_dep"))
    assert (dep.args, dep.env) == (["--enable-expert-parallel"], {"A": "2"})


MODES = {
    "description": "d",
    "args": ["--feature-on"],
    "default_mode": "safe",
    "modes": {
        "fast": {"args": ["--mode", "fast"], "env": {"MODE": "fast"}},
        "safe": {
            "args": ["--mode", "safe"],
            "hardware_overrides": {"xpu": {"args": ["--mode", "safe-xpu"], "env": {"XPU": "1"}}},
        },
        "fp8only": {"args": ["--mode", "fp8"], "variants": ["fp8"]},
    },
    "hardware_overrides": {"hopper": {"args": ["--feature-hopper"]}},
}


def test_modes_default_and_choice() -> None:
    recipe = make_recipe(features={"f": MODES})
    assert compose(recipe, Selection()).args == ["--feature-on", "--mode", "safe"]
    fast = compose(recipe, Selection(modes={"f": "fast"}))
    assert (fast.args, fast.env) == (["--feature-on", "--mode", "fast"], {"MODE": "fast"})
    xpu = compose(recipe, Selection(hardware=B70))
    assert (xpu.args, xpu.env) == (["--feature-on", "--mode", "safe-xpu"], {"XPU": "1"})
    hopper = compose(recipe, Selection(hardware=H100, modes={"f": "fast"}))
    assert hopper.args == ["--feature-on", "--mode", "fast", "--feature-hopper"]


def test_mode_variants_gate_only_the_mode() -> None:
    recipe = make_recipe(features={"f": MODES})
    assert compose(recipe, Selection(modes={"f": "fp8only"})).args == ["--feature-on"]
    assert compose(recipe, Selection(variant="fp8", modes={"f": "fp8only"})).args == ["--feature-on", "--mode", "fp8"]


def test_first_mode_without_default_mode() -> None:
    feature = {**MODES, "default_mode": None}
    assert compose(make_recipe(features={"f": feature}), Selection()).args == ["--feature-on", "--mode", "fast"]


def test_unknown_mode_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError) as info:
        compose(make_recipe(features={"f": MODES}), Selection(modes={"f": "ludicrous"}), source="x.yaml")
    assert (info.value.file, info.value.field) == ("x.yaml", "features.f.modes")
    assert "no mode 'ludicrous'" in info.value.message


def test_opt_in_features_of_a_synthetic_recipe() -> None:
    recipe = make_recipe(
        features={"a": {"description": "d", "args": ["--a"]}, "b": {"description": "d", "args": ["--b"]}},
        opt_in_features=["b"],
    )
    assert compose(recipe, Selection()).args == ["--a"]
    assert compose(recipe, Selection(features=["b"])).args == ["--b"]
    assert compose(recipe, Selection(features=["a", "b"])).args == ["--a", "--b"]


# --- docker images and the printed forms ---------------------------------------------------


def test_docker_image_resolution() -> None:
    assert compose(make_recipe(), Selection(hardware=H100)).docker_image == "vllm/vllm-openai:latest"
    assert compose(make_recipe(), Selection(hardware=CPU)).docker_image is None
    assert compose(make_recipe(), Selection()).docker_image is None
    declared = make_recipe(model={"docker_image": "org/custom:1"})
    assert compose(declared, Selection(hardware=B70)).docker_image == "org/custom:1"
    assert compose(declared, Selection()).docker_image is None  # no hardware, no docker form
    by_key = make_recipe(model={"docker_image": {"hopper": "org/hopper:1", "xpu": {"b70": "org/xpu:2"}}})
    assert compose(by_key, Selection(hardware=H100)).docker_image == "org/hopper:1"
    assert compose(by_key, Selection(hardware=B70)).docker_image == "org/xpu:2"
    assert compose(by_key, Selection(hardware=CPU)).docker_image is None
    variant = make_recipe(
        model={"docker_image": "org/model:1"},
        variants={
            "default": {"precision": "bf16", "vram_minimum_gb": 2, "description": "d", "docker_image": "org/v:1"}
        },
    )
    assert compose(variant, Selection(hardware=H100)).docker_image == "org/v:1"


def test_cuda_docker_form() -> None:
    recipe = make_recipe(model={"base_env": {"HF_TOKEN": "x y"}})
    command = compose(recipe, Selection(hardware=H100))
    assert command.docker_argv() == [
        "docker", "run", "--rm", "--gpus", "all", "--ipc=host", "-p", "8000:8000",
        "-v", "$HOME/.cache/huggingface:/root/.cache/huggingface", "-e", "HF_TOKEN=x y",
        "vllm/vllm-openai:latest", "org/m",
    ]  # fmt: skip
    shell = command.docker_shell()
    assert shell is not None
    assert '"$HOME/.cache/huggingface:/root/.cache/huggingface"' in shell  # expands in a shell
    assert shlex.split(shell) == command.docker_argv()


def test_shell_forms_round_trip() -> None:
    command = compose(RECIPE_9B, Selection(features=["long_context", "spec_decoding"], hardware=B70))
    shell = command.shell()
    assert shell.startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve Qwen/Qwen3.5-9B --trust-remote-code")
    assert '\'{"method":"mtp","num_speculative_tokens":1}\'' in shell
    assert shlex.split(shell) == ["VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", *command.argv()]
    multi = command.shell_multiline()
    lines = multi.splitlines()
    assert lines[0] == "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 \\"
    assert lines[1] == "vllm serve Qwen/Qwen3.5-9B \\"
    assert lines[2:4] == ["  --trust-remote-code \\", "  --enforce-eager \\"]  # base, then the xpu override
    assert lines[-1] == "  --max-model-len 1010000"  # long_context is the last feature in the recipe
    assert shlex.split(multi.replace("\\\n", " ")) == shlex.split(shell)
    assert command.argv(("python", "-m", "vllm.entrypoints.openai.api_server"))[:4] == [
        "python", "-m", "vllm.entrypoints.openai.api_server", "Qwen/Qwen3.5-9B",
    ]  # fmt: skip


def test_launch_command_without_docker_image() -> None:
    command = LaunchCommand(model_id="m", args=["--x"], env={})
    assert command.docker_argv() is None
    assert command.docker_shell() is None
    assert command.shell() == "vllm serve m --x"


# --- every real recipe composes -------------------------------------------------------------

REAL_RECIPES = sorted((DATA / "models").glob("*.yaml")) + sorted(
    (DATA.parent / "tests" / "fixtures" / "community_recipes").glob("*.yaml")
)


@pytest.mark.parametrize("path", REAL_RECIPES, ids=[p.stem for p in REAL_RECIPES])
def test_every_real_recipe_composes_on_every_card(path: Path) -> None:
    recipe = load_file(Recipe, path)
    for variant in recipe.variants:
        for hardware in [None, *HARDWARE.values()]:
            for features in (None, list(recipe.features)):
                command = compose(recipe, Selection(variant=variant, hardware=hardware, features=features))
                assert command.model_id
                assert all(isinstance(a, str) and a for a in command.args)
                names = [flag_name(g[0]) for g in groups(command.args) if is_flag(g[0])]
                assert len(names) == len(set(names)), names  # every flag once after merging
                env = [f"{k}={v}" for k, v in sorted(command.env.items())]
                assert shlex.split(command.shell()) == [*env, *command.argv()]
                docker = command.docker_shell()
                if docker is not None:
                    assert shlex.split(docker) == command.docker_argv()
