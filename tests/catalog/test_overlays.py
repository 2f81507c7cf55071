"""Overlays (data/overlays/<slug>.yaml): merged into the upstream recipe with the same strictness,
never editing the upstream file; and the commands an arm composes (--max-model-len, depth, env)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from catalog.errors import CatalogError, CatalogErrors, UserError
from catalog.recipes.compose import compose_configuration
from catalog.recipes.shown import composed_for_arm
from catalog.store.repository import load_catalog
from runner.plan import CampaignRequest, flag_value, plan_arms

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def catalog():  # type: ignore[no-untyped-def]
    return load_catalog(REPO / "data", REPO / "packets")


def test_upstream_recipes_stay_unchanged_and_the_overlay_adds_the_9b_w4a16_variant(catalog) -> None:  # type: ignore[no-untyped-def]
    upstream = (REPO / "data" / "models" / "qwen3.5-9b.yaml").read_text()
    assert "w4a16" not in upstream and "VLLM_XPU_DRAFT_LM_HEAD_INT4" not in upstream
    recipe = catalog.recipes["qwen3.5-9b"]
    assert recipe.variants["w4a16"].model_id == "RedHatAI/Qwen3.5-9B-quantized.w4a16"
    assert {"default", "fp8", "w4a16"} <= set(recipe.variants)


def test_every_imported_packet_names_a_variant_its_recipe_has(catalog) -> None:  # type: ignore[no-untyped-def]
    for packet in catalog.packets.values():
        model = packet.identity.model
        assert model.variant in catalog.recipes[model.slug].variants, packet.id


def test_a_configuration_composes_its_env_and_speculative_depth(catalog) -> None:  # type: ignore[no-untyped-def]
    recipe = catalog.recipes["qwen3.5-9b"]
    b70 = catalog.hardware["arc_pro_b70"]
    command = compose_configuration(recipe, "b70-w4a16-mtp3-int4-head", b70)
    assert command.model_id == "RedHatAI/Qwen3.5-9B-quantized.w4a16"
    assert command.env == {"VLLM_XPU_DRAFT_LM_HEAD_INT4": "1"}
    assert json.loads(flag_value(command.args, "--speculative-config") or "") == {
        "method": "mtp",
        "num_speculative_tokens": 3,
    }
    assert flag_value(command.args, "--max-model-len") == "8192"  # the guide's B70 value, from the overlay
    docker = command.docker_argv()
    assert docker is not None and "VLLM_XPU_DRAFT_LM_HEAD_INT4=1" in docker


def test_an_imported_arm_finds_its_configuration_by_draft_head(catalog) -> None:  # type: ignore[no-untyped-def]
    b70 = catalog.hardware["arc_pro_b70"]
    recipe = catalog.recipes["qwen3.5-9b"]
    packet, screened = (
        catalog.packets["qwen3.5-9b-fp8-dynamic-c48f580e"],
        catalog.packets["qwen3.5-9b-fp8-dynamic-92dc20d8"],
    )
    int4, int4_config = composed_for_arm(recipe, packet, packet.arm("tp1-mtp4-int4-head"), b70)
    fp8, fp8_config = composed_for_arm(recipe, screened, screened.arm("tp1-mtp3-fp8-head"), b70)
    oracle, oracle_config = composed_for_arm(recipe, packet, packet.arm("tp2-mtp0"), b70)
    assert (int4_config, fp8_config, oracle_config) == (
        "b70-fp8-mtp3-int4-head",
        "b70-fp8-mtp3-fp8-head",
        "2xb70-fp8-mtp3-int4-head",
    )
    assert int4.env == {"VLLM_XPU_DRAFT_LM_HEAD_INT4": "1"} and fp8.env == {} and oracle.env == {}
    assert json.loads(flag_value(int4.args, "--speculative-config") or "")["num_speculative_tokens"] == 4
    assert flag_value(oracle.args, "--speculative-config") is None
    assert flag_value(oracle.args, "--tensor-parallel-size") == "2"
    # measured with graph capture: none inherits the recipe's xpu --enforce-eager
    assert not any("--enforce-eager" in c.args for c in (int4, fp8, oracle))


def test_the_committed_overlays_list_committed_packets(catalog) -> None:  # type: ignore[no-untyped-def]
    """A configuration's packets are linked from the recipe page and pick its command for their
    arms: an id left behind by a re-import links nothing and composes the recipe default instead."""
    listed = {p for recipe in catalog.recipes.values() for c in recipe.configurations.values() for p in c.packets}
    assert listed and listed <= set(catalog.packets)


def test_the_runner_sets_max_model_len_and_the_speculative_depth(catalog) -> None:  # type: ignore[no-untyped-def]
    recipe = catalog.recipes["qwen3.5-9b"]
    request = CampaignRequest(model="qwen3.5-9b", variant="fp8", hardware="arc_pro_b70", depths=[0, 3, 5])
    arms = plan_arms(request, recipe, catalog.hardware["arc_pro_b70"], "recipe")
    assert [a.max_model_len_source for a in arms] == ["recipe"] * 3  # the overlay's xpu override
    assert {flag_value(a.command.args, "--max-model-len") for a in arms} == {"8192"}
    depths = [json.loads(flag_value(a.command.args, "--speculative-config") or "{}") for a in arms[1:]]
    assert [d["num_speculative_tokens"] for d in depths] == [3, 5]
    h100 = plan_arms(
        CampaignRequest(model="qwen3.5-9b", variant="fp8", hardware="h100_sxm"),
        recipe,
        catalog.hardware["h100_sxm"],
        "recipe",
    )
    assert h100[0].max_model_len_source == "runner default"
    assert flag_value(h100[0].command.args, "--max-model-len") == "8192"


def _tree(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "data", tmp_path / "data")
    shutil.copytree(REPO / "packets", tmp_path / "packets")
    return tmp_path


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (("  w4a16:\n", "  w4a16:\n    colour: blue\n"), "variants.w4a16.colour", "unknown key"),
        (("variants:\n  w4a16:", "variants:\n  fp8:"), "variants.fp8", "already has variant 'fp8'"),
        (("    variant: w4a16\n", "    variant: w8a8\n"), "configurations.b70-w4a16-mtp3-int4-head.variant", "w8a8"),
        (
            ("hardware: arc_pro_b70\n", "hardware: arc_pro_b99\n"),
            "configurations.b70-fp8-mtp3-fp8-head.hardware",
            "b99",
        ),
        (("  xpu:\n", "  tpu:\n"), "hardware_overrides.tpu", "names no card"),
        (  # vllm/config/speculative.py:386, a pydantic dataclass that forbids other keys (vllm/config/utils.py:70)
            ("num_speculative_tokens: 3}", "num_speculative_tokens: 3, draft: org/x}"),
            "configurations.b70-fp8-mtp3-fp8-head.speculative_config.draft",
            "no key of vLLM's SpeculativeConfig",
        ),
        (("recipe: qwen3.5-9b", "recipe: qwen3.5-27b"), "recipe", "must match the file name"),
    ],
)
def test_an_overlay_error_names_file_line_and_field(
    tmp_path: Path, edit: tuple[str, str], field: str, message: str
) -> None:
    tree = _tree(tmp_path)
    path = tree / "data" / "overlays" / "qwen3.5-9b.yaml"
    text = path.read_text()
    assert edit[0] in text
    path.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises((CatalogError, CatalogErrors)) as caught:
        load_catalog(tree / "data", tree / "packets")
    errors = caught.value.errors if isinstance(caught.value, CatalogErrors) else [caught.value]
    (error,) = [e for e in errors if Path(str(e.file)).name == "qwen3.5-9b.yaml"]
    assert message in error.message and field in (error.field or "")
    assert error.line is not None and error.line > 1


def test_the_runner_measures_an_overlay_configuration(catalog) -> None:  # type: ignore[no-untyped-def]
    recipe = catalog.recipes["qwen3.5-9b"]
    b70 = catalog.hardware["arc_pro_b70"]
    request = CampaignRequest(
        model="qwen3.5-9b", variant="w4a16", hardware="arc_pro_b70", depths=[0, 3],
        configuration="b70-w4a16-mtp3-int4-head",
    )  # fmt: skip
    oracle, spec = plan_arms(request, recipe, b70, "recipe")
    assert oracle.command.env == {} and flag_value(oracle.command.args, "--speculative-config") is None
    assert spec.command.env == {"VLLM_XPU_DRAFT_LM_HEAD_INT4": "1"} and spec.draft_head == "draft INT4 head"
    assert json.loads(flag_value(spec.command.args, "--speculative-config") or "")["num_speculative_tokens"] == 3
    assert flag_value(spec.command.args, "--max-num-seqs") == "1"  # the protocol's flags still win
    with pytest.raises(UserError) as caught:
        plan_arms(request.model_copy(update={"variant": "fp8"}), recipe, b70, "recipe")
    assert caught.value.field == "CONFIG"
    with pytest.raises(UserError, match="unknown configuration 'nope'"):
        plan_arms(request.model_copy(update={"configuration": "nope"}), recipe, b70, "recipe")
