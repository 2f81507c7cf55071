"""The KV cache bytes a projection assumes come from what the packet's arm recorded (its recorded
command's dtype, which verification holds the record to), then from the recipe variant's arguments
as vLLM reads them, then a stated 16-bit assumption: one reading of `--kv-cache-dtype`
(catalog/recipes/command_facts.py), not an exact-token one of its own."""

from __future__ import annotations

from catalog.projection.cells import cell_for_arm
from catalog.recipes.recipe import Recipe
from tests.projection.helpers import arm, hardware, imported_packet, repo_catalog


def _recipe(extra_args: list[str]) -> Recipe:
    recipe = repo_catalog().recipes["qwen3.5-9b"]
    variant = recipe.variants["fp8"].model_copy(update={"extra_args": extra_args})
    return recipe.model_copy(update={"variants": {**recipe.variants, "fp8": variant}})


def _kv(config: dict[str, object], extra_args: list[str]) -> tuple[float, str]:
    made = arm("a", values=(50.0, 50.0))
    made["config"] |= config
    packet = imported_packet([made])
    cell = cell_for_arm(packet, packet.arms[0], hardware(), _recipe(extra_args))
    assert cell is not None
    return cell.kv_bytes, cell.kv_source


def test_a_recipe_variant_spelling_its_kv_dtype_in_one_token_is_read() -> None:
    assert _kv({}, ["--kv-cache-dtype=fp8"])[0] == 1.0
    assert _kv({}, ["--kv_cache_dtype", "fp8_e4m3"])[0] == 1.0
    assert _kv({}, [])[0] == 2.0


def test_a_recorded_command_without_a_kv_dtype_is_vllms_auto_not_the_recipes_dtype() -> None:
    """A recipe changed since (its variant now fp8) does not change what a recorded command ran."""
    argv = ["vllm", "serve", "RedHatAI/Qwen3.5-9B-FP8-dynamic", "--max-model-len", "8192"]
    size, source = _kv({"argv": argv}, ["--kv-cache-dtype", "fp8"])
    assert size == 2.0 and "recorded command sets no --kv-cache-dtype" in source


def test_the_arms_recorded_kv_dtype_comes_first() -> None:
    argv = ["vllm", "serve", "m", "--kv-cache-dtype=fp8"]
    assert _kv({"argv": argv, "kv_cache_dtype": "fp8"}, []) == (1.0, "packet arm a config.kv_cache_dtype = 'fp8'")
