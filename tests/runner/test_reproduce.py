"""`make reproduce`: a new campaign on fresh servers, one planned arm per arm of the packet, and
a clear refusal where the packet names nothing this host can run."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest

from catalog.errors import UserError
from catalog.model.packet import Packet
from catalog.store.repository import Catalog, load_catalog
from runner import reproduce
from runner.campaign import arm_tp, oracle_of
from runner.plan import campaign_id, flag_value
from runner.reproduce import NotReproducible, plan_reproduction

REPO = Path(__file__).resolve().parents[2]
FP8_9B = "qwen3.5-9b-fp8-dynamic-c48f580e"
SCREENED_9B = "qwen3.5-9b-fp8-dynamic-92dc20d8"
W4A16_9B = "qwen3.5-9b-w4a16-8c08b0d2"
DEMO = "demo-bf16-83f021f8"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(REPO / "data", REPO / "packets")


@pytest.fixture()
def on_a_b70(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reproduce, "hardware_present", lambda platform: True)


def _with_fp8_head_arm(packet: Packet) -> Packet:
    """The packet with a second depth-3 arm that differs only by its draft head (the FP8 one, no
    INT4 switch): the committed packet left that arm to its screened companion, whose identity
    outcome the source did not print."""
    int4 = packet.arm("tp1-mtp3-int4-head")
    config = int4.config.model_copy(update={"env": {}, "draft_head": "FP8 draft head"})
    fp8 = int4.model_copy(update={"id": "tp1-mtp3-fp8-head", "config": config})
    arms = list(packet.arms)
    arms.insert(arms.index(int4), fp8)
    return packet.model_copy(update={"arms": arms})


@pytest.mark.usefixtures("on_a_b70")
def test_every_arm_is_planned_even_two_of_one_depth(catalog: Catalog) -> None:
    """The 9B FP8 packet has arms at TP 1 and 2 (and, here, two depth-3 arms that differ by their
    draft head): nothing collapses, each keeps its id, size, switches and draft head, and G3 pairs
    each with its own TP's oracle."""
    packet = _with_fp8_head_arm(catalog.packets[FP8_9B])
    plan = plan_reproduction(packet, catalog)
    assert [arm.id for arm in plan.arms] == [arm.id for arm in packet.arms]
    by_id = {arm.id: arm for arm in plan.arms}
    fp8, int4 = by_id["tp1-mtp3-fp8-head"], by_id["tp1-mtp3-int4-head"]
    assert fp8.spec_depth == int4.spec_depth == 3
    assert "VLLM_XPU_DRAFT_LM_HEAD_INT4" not in fp8.command.env
    assert int4.command.env["VLLM_XPU_DRAFT_LM_HEAD_INT4"] == "1"
    assert (fp8.draft_head, int4.draft_head) == ("FP8 draft head", "draft INT4 head")
    assert [arm_tp(arm) for arm in plan.arms] == [arm.config.tensor_parallel_size for arm in packet.arms]
    assert oracle_of(by_id["tp2-mtp4-int4-head"], plan.arms).id == "tp2-mtp0"
    assert oracle_of(int4, plan.arms).id == "tp1-mtp0"
    assert '"num_speculative_tokens":4' in " ".join(by_id["tp1-mtp4-int4-head"].command.args)
    # the overlay's B70 --max-model-len (the recipe guides' 8192) on every arm, recorded as the recipe's
    assert {(flag_value(arm.command.args, "--max-model-len"), arm.max_model_len_source) for arm in plan.arms} == {
        ("8192", "recipe")
    }


@pytest.mark.usefixtures("on_a_b70")
def test_the_imported_w4a16_packet_names_its_variant_and_is_reproducible_on_a_b70(catalog: Catalog) -> None:
    plan = plan_reproduction(catalog.packets[W4A16_9B], catalog)
    assert plan.request.variant == "w4a16"
    assert [arm.id for arm in plan.arms] == ["tp1-mtp0", "tp1-mtp3-int4-head"]
    assert plan.arms[1].command.env["VLLM_XPU_DRAFT_LM_HEAD_INT4"] == "1"
    assert plan.arms[0].command.model_id == "RedHatAI/Qwen3.5-9B-quantized.w4a16"


@pytest.mark.usefixtures("on_a_b70")
def test_a_reproduction_is_a_new_campaign_every_time(catalog: Catalog) -> None:
    packet = catalog.packets[FP8_9B]
    suite = catalog.suites["strict-v1"].sha256
    first = plan_reproduction(packet, catalog, datetime(2026, 12, 3, 9, 0, tzinfo=UTC))
    again = plan_reproduction(packet, catalog, datetime(2026, 12, 3, 9, 1, tzinfo=UTC))
    plain = first.request.model_copy(update={"salt": None})
    ids = {campaign_id(r, first.arms, suite) for r in (first.request, again.request, plain)}
    assert len(ids) == 3
    assert first.request.salt == f"reproduces {packet.id} at 2026-12-03T09:00:00+00:00"


def test_the_demo_packet_is_reproducible_here(catalog: Catalog) -> None:
    plan = plan_reproduction(catalog.packets[DEMO], catalog)
    assert [arm.id for arm in plan.arms] == ["tp1-oracle", "tp1-ngram3"]
    assert plan.request.ladders == ["concurrency", "context"]


def test_an_import_without_a_recipe_variant_says_why(catalog: Catalog) -> None:
    packet = catalog.packets[W4A16_9B]
    model = packet.identity.model.model_copy(update={"variant": None})
    unnamed = packet.model_copy(
        update={"identity": packet.identity.model_copy(update={"model": model})}
    )  # as it was imported before the overlay named the W4A16 variant
    with pytest.raises(NotReproducible, match=r"names no recipe variant: its checkpoint .* no command to run"):
        plan_reproduction(unnamed, catalog)


def test_hardware_this_host_lacks_says_why(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reproduce, "hardware_present", lambda platform: platform == "cpu")
    with pytest.raises(NotReproducible, match=r"measured on Intel Arc Pro B70 \(xpu\); this host has no xpu device"):
        plan_reproduction(catalog.packets[FP8_9B], catalog)


def test_the_list_names_every_packet_with_its_verdict(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reproduce, "hardware_present", lambda platform: platform == "cpu")
    table = reproduce.reproducibility(catalog)
    rows = list(zip(*(column._cells for column in table.columns), strict=True))
    verdicts = {packet: here for packet, here, _ in rows}
    assert verdicts == {packet_id: "yes" if packet_id == DEMO else "no" for packet_id in catalog.packets}


def test_reproducing_an_unrunnable_packet_fails_before_anything_starts(catalog: Catalog, tmp_path: Path) -> None:
    places = reproduce.Places(REPO / "data", REPO / "packets", tmp_path / "runs", tmp_path / "models")  # type: ignore[attr-defined]
    with pytest.raises(UserError, match="cannot be reproduced here: is a screened `vllm bench serve` run") as caught:
        reproduce.reproduce(catalog, SCREENED_9B, reproduce.RuntimeChoice(None), places)  # type: ignore[attr-defined]
    assert caught.value.file is not None and caught.value.file.endswith(f"{SCREENED_9B}.json")
    assert not (tmp_path / "runs").exists()


def test_the_runner_does_not_import_the_site_builder() -> None:
    for path in sorted((REPO / "runner").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(name == "builder" or name.startswith("builder.") for name in names), path.name
