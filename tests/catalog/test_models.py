"""Every input and output model: suites, canaries, hardware, recipes and packets."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from catalog.model.arrays import decode_uint32, encode_uint32, to_uint32
from catalog.model.packet import (
    ArmConfig,
    ArmParts,
    GateResult,
    Packet,
    PromptRow,
    SpecMetrics,
    State,
    packet_id,
)
from catalog.packets.canonical import canonical_json, canonical_sha256, sha256_hex
from catalog.packets.seal import packet_bytes, parts_of, seal
from catalog.recipes.hardware import Figure, HardwareFile
from catalog.recipes.recipe import Recipe
from catalog.recipes.suite import CanarySet, Suite
from catalog.store.documents import load_file
from tests.catalog.factories import (
    DATA,
    ORACLE_ARM,
    SPEC_ARM,
    measured_draft,
    measured_packet,
    published_arm,
    published_draft,
    seal_draft,
    sealed,
)
from tests.catalog.factories import test_key as signing_key

SUITE_FILE = DATA / "suites" / "strict-v1.json"
CANARY_FILE = DATA / "suites" / "canaries-v1.json"

# strict-v1's identity. Packets record it in workload.suite_sha256 and verify compares: a change to
# the suite file must come with a new suite id (strict-v2), never an edit of strict-v1.
STRICT_V1_SHA256 = "7b63bf4cb1cedf740072761bc10a261b1315de2f8e9cf5da9979368dccddc1bd"
CANARIES_V1_SHA256 = "9f1d4c36f2e34b5d20325f10067267ed916cc962a297307db2dd9c3e4ba58faa"


def raw(path: Path) -> Any:
    return json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())


def rejects(model: type[BaseModel], data: Any, match: str | None = None) -> ValidationError:
    with pytest.raises(ValidationError, match=match) as info:
        model.model_validate(data)
    return info.value


def first_loc(error: ValidationError) -> tuple[Any, ...]:
    return tuple(error.errors()[0]["loc"])


# --- Suite ---------------------------------------------------------------------------------


def test_strict_suite_loads_with_six_classes_of_twelve_prompts() -> None:
    suite = load_file(Suite, SUITE_FILE)
    assert suite.id == "strict-v1"
    assert len(suite.prompts) == 12
    assert [c.id for c in suite.classes] == ["operations", "code", "prose", "analysis", "documentation", "structured"]
    counts = Counter(p.class_ for p in suite.prompts)
    assert [counts[c.id] for c in suite.classes] == [3, 2, 2, 3, 1, 1]
    assert suite.class_of()["code-sql-debug"] == "code"


def test_suite_hash_is_pinned_and_stable() -> None:
    first, second = load_file(Suite, SUITE_FILE), load_file(Suite, SUITE_FILE)
    assert first.sha256 == second.sha256 == STRICT_V1_SHA256
    # the hash is over the file's content with the "class" alias, independent of key order
    data = raw(SUITE_FILE)
    assert canonical_sha256(data) == STRICT_V1_SHA256
    reordered = {k: data[k] for k in reversed(list(data))}
    assert Suite.model_validate(reordered).sha256 == STRICT_V1_SHA256


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["prompts"][0].update(prompt=d["prompts"][0]["prompt"] + " "),
        lambda d: d["prompts"][5].update(title="Another title"),
        lambda d: d["prompts"].reverse(),
        lambda d: d.update(description="changed"),
    ],
    ids=["prompt-text", "prompt-title", "prompt-order", "description"],
)
def test_suite_hash_changes_with_content(edit: Any) -> None:
    data = raw(SUITE_FILE)
    edit(data)
    assert Suite.model_validate(data).sha256 != STRICT_V1_SHA256


def test_suite_duplicate_prompt_id_rejected() -> None:
    data = raw(SUITE_FILE)
    data["prompts"][1]["id"] = data["prompts"][0]["id"]
    rejects(Suite, data, "duplicate prompt id 'ops-incident-retro'")


def test_suite_duplicate_class_id_rejected() -> None:
    data = raw(SUITE_FILE)
    data["classes"].append(copy.deepcopy(data["classes"][0]))
    rejects(Suite, data, "duplicate class id 'operations'")


def test_suite_unknown_class_rejected() -> None:
    data = raw(SUITE_FILE)
    data["prompts"][0]["class"] = "poetry"
    rejects(Suite, data, "prompt 'ops-incident-retro' names unknown class 'poetry'")


def test_suite_empty_class_rejected() -> None:
    data = raw(SUITE_FILE)
    data["prompts"] = [p for p in data["prompts"] if p["class"] != "documentation"]
    rejects(Suite, data, "class 'documentation' has no prompt")


@pytest.mark.parametrize(
    ("edit", "loc"),
    [
        (lambda d: d.update(schema_version=2), ("schema_version",)),
        (lambda d: d.update(extra="x"), ("extra",)),
        (lambda d: d["prompts"][0].update(prompt=""), ("prompts", 0, "prompt")),
        (lambda d: d["prompts"][0].pop("class"), ("prompts", 0, "class")),
        (lambda d: d["prompts"][0].update(id="Ops Incident"), ("prompts", 0, "id")),
        (lambda d: d.update(prompts=[]), ("prompts",)),
    ],
    ids=["schema-version", "unknown-key", "empty-prompt", "missing-class", "bad-slug", "no-prompts"],
)
def test_suite_field_errors(edit: Any, loc: tuple[Any, ...]) -> None:
    data = raw(SUITE_FILE)
    edit(data)
    assert first_loc(rejects(Suite, data)) == loc


# --- CanarySet -----------------------------------------------------------------------------


def test_canary_set_loads() -> None:
    canaries = load_file(CanarySet, CANARY_FILE)
    assert canaries.id == "canaries-v1"
    assert [(c.id, c.kind) for c in canaries.canaries] == [
        ("repeat-8", "repeat"),
        ("multiply", "contains"),
        ("copy-phrase", "contains"),
        ("json-keys", "json_keys"),
    ]
    assert canaries.canaries[0].repeats == 8
    assert canaries.canaries[1].expect == ["1591"]
    # The hash is over the model dump, defaults included (repeats: null ...), not over the file:
    # a new optional field on Canary changes it. Pinned for the same reason as strict-v1's.
    assert canaries.sha256 == canonical_sha256(canaries.model_dump(mode="json")) == CANARIES_V1_SHA256
    assert canaries.sha256 != canonical_sha256(raw(CANARY_FILE))


@pytest.mark.parametrize(
    ("index", "drop", "needed"),
    [
        (0, "repeats", "a repeat canary needs repeats"),
        (1, "expect", "a contains canary needs expect"),
        (3, "expect_keys", "a json_keys canary needs expect_keys"),
    ],
)
def test_canary_kind_needs_its_field(index: int, drop: str, needed: str) -> None:
    data = raw(CANARY_FILE)
    del data["canaries"][index][drop]
    rejects(CanarySet, data, needed)


def test_canary_set_rejects_duplicates_and_bad_values() -> None:
    data = raw(CANARY_FILE)
    data["canaries"][1]["id"] = "repeat-8"
    rejects(CanarySet, data, "duplicate canary id 'repeat-8'")
    for field, value in [("max_tokens", 0), ("max_tokens", 5000), ("repeats", 1), ("kind", "regex")]:
        data = raw(CANARY_FILE)
        data["canaries"][0][field] = value
        assert first_loc(rejects(CanarySet, data))[:3] == ("canaries", 0, field)
    data = raw(CANARY_FILE)
    data["canaries"][3]["expect_keys"]["when"] = "date"
    rejects(CanarySet, data, "string")


# --- HardwareFile --------------------------------------------------------------------------


def _figures(model: BaseModel) -> list[tuple[str, Figure]]:
    found: list[tuple[str, Figure]] = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, Figure):
            found.append((name, value))
        elif isinstance(value, BaseModel):
            found.extend((f"{name}.{sub}", fig) for sub, fig in _figures(value))
    return found


def test_hardware_file_loads() -> None:
    hardware = load_file(HardwareFile, DATA / "hardware.yaml").by_id()
    assert {"arc_pro_b70", "arc_pro_b60", "h100_sxm", "h200", "cpu_generic"} <= set(hardware)
    b70 = hardware["arc_pro_b70"]
    assert (b70.vendor, b70.platform, b70.generation) == ("Intel", "xpu", "xpu")
    assert b70.docker_image == "vllm/vllm-openai-xpu:latest"
    assert b70.memory_gb.value == 32
    assert b70.memory_bandwidth_gb_s.value == 608
    assert hardware["h100_sxm"].generation == "hopper"
    assert hardware["cpu_generic"].docker_image is None


def test_every_hardware_figure_has_a_source() -> None:
    hardware = load_file(HardwareFile, DATA / "hardware.yaml")
    for item in hardware.hardware:
        figures = _figures(item)
        assert len(figures) >= 2, item.id  # memory and bandwidth at least
        for name, figure in figures:
            assert figure.value > 0, (item.id, name)
            assert len(figure.source.strip()) > 10, (item.id, name)
    # estimates are labelled as such, never passed off as datasheet figures
    b70 = hardware.by_id()["arc_pro_b70"]
    assert b70.compute_tflops_bf16 is not None
    assert b70.compute_tflops_bf16.source.startswith("estimate")


def test_hardware_duplicate_id_rejected() -> None:
    data = raw(DATA / "hardware.yaml")
    data["hardware"].append(copy.deepcopy(data["hardware"][0]))
    rejects(HardwareFile, data, "duplicate hardware id 'arc_pro_b70'")


@pytest.mark.parametrize(
    ("edit", "loc"),
    [
        (lambda h: h["memory_gb"].pop("source"), ("hardware", 0, "memory_gb", "source")),
        (lambda h: h["memory_gb"].update(source=""), ("hardware", 0, "memory_gb", "source")),
        (lambda h: h.update(memory_gb=32), ("hardware", 0, "memory_gb")),
        (lambda h: h["memory_bandwidth_gb_s"].update(value=0), ("hardware", 0, "memory_bandwidth_gb_s", "value")),
        (lambda h: h.update(platform="rocm"), ("hardware", 0, "platform")),
        (lambda h: h.update(id="../b70"), ("hardware", 0, "id")),
        (lambda h: h.update(tdp_w=230), ("hardware", 0, "tdp_w")),
    ],
    ids=["no-source", "empty-source", "bare-number", "zero-value", "platform", "path-id", "unknown-key"],
)
def test_hardware_field_errors(edit: Any, loc: tuple[Any, ...]) -> None:
    data = raw(DATA / "hardware.yaml")
    edit(data["hardware"][0])
    assert first_loc(rejects(HardwareFile, data)) == loc


# --- Recipe --------------------------------------------------------------------------------

RECIPE_9B = DATA / "models" / "qwen3.5-9b.yaml"


@pytest.mark.parametrize("slug", ["qwen3.5-9b", "qwen3.5-4b"])
def test_data_recipes_load(slug: str) -> None:
    recipe = load_file(Recipe, DATA / "models" / f"{slug}.yaml")
    assert recipe.meta.slug == slug
    assert recipe.model.base_args == ["--trust-remote-code"]
    assert list(recipe.features) == ["tool_calling", "reasoning", "spec_decoding", "text_only", "long_context"]
    assert recipe.default_features() == ["tool_calling", "reasoning"]
    assert recipe.hardware_overrides["xpu"].extra_args == ["--enforce-eager"]
    assert recipe.meta.hardware == {"arc_pro_b60": "verified", "arc_pro_b70": "verified"}
    assert "vllm serve" in recipe.guide


def test_9b_recipe_details() -> None:
    recipe = load_file(Recipe, RECIPE_9B)
    assert recipe.meta.date_added is not None and recipe.meta.date_added.isoformat() == "2026-04-22"
    assert list(recipe.variants) == ["default", "fp8"]
    assert recipe.variant_model_id("default") == "Qwen/Qwen3.5-9B"
    assert recipe.variant_model_id("fp8") == "RedHatAI/Qwen3.5-9B-FP8-dynamic"
    assert recipe.variants["fp8"].extra_args == ["--kv-cache-dtype", "fp8"]
    assert recipe.features["long_context"].env == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}


COMMUNITY = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "community_recipes").glob("*.yaml"))


def test_community_fixtures_are_there() -> None:
    assert len(COMMUNITY) >= 6


@pytest.mark.parametrize("path", COMMUNITY, ids=[p.stem for p in COMMUNITY])
def test_community_recipe_loads(path: Path) -> None:
    recipe = load_file(Recipe, path)
    assert "default" in recipe.variants
    assert recipe.model.model_id
    for name in recipe.opt_in_features:
        assert name in recipe.features


def _recipe_data() -> dict[str, Any]:
    data: dict[str, Any] = raw(RECIPE_9B)
    return data


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: d["opt_in_features"].append("turbo"), "names unknown feature 'turbo'"),
        (lambda d: d.update(hardware_opt_in_features={"xpu": ["warp"]}), "names unknown feature 'warp'"),
        (lambda d: d["variants"].pop("default"), "variants must include 'default'"),
        (lambda d: d.update(default_strategy="pd_cluster"), "default_strategy 'pd_cluster' is not a compatible"),
        (lambda d: d["features"]["reasoning"].update(variants=["nvfp4"]), "feature 'reasoning' names unknown variant"),
        (
            lambda d: d["features"]["reasoning"].update(modes={"on": {"variants": ["int2"]}}),
            "feature 'reasoning' names unknown variant 'int2'",
        ),
        (
            lambda d: d["features"]["reasoning"].update(default_mode="off", modes={"on": {}}),
            "default_mode 'off' is not one of the modes",
        ),
        (lambda d: d.update(variants={}), "at least 1 item"),
    ],
    ids=[
        "opt-in",
        "hardware-opt-in",
        "no-default-variant",
        "default-strategy",
        "feature-variant",
        "mode-variant",
        "default-mode",
        "no-variants",
    ],
)
def test_recipe_references_must_resolve(edit: Any, match: str) -> None:
    data = _recipe_data()
    Recipe.model_validate(data)
    edit(data)
    rejects(Recipe, data, match)


@pytest.mark.parametrize(
    ("edit", "loc"),
    [
        (lambda d: d["meta"].update(slug="../qwen"), ("meta", "slug")),
        (lambda d: d["meta"].update(slug="qwën3.5-9b"), ("meta", "slug")),
        (lambda d: d["meta"].update(slug="Qwen3.5-9B"), ("meta", "slug")),
        (lambda d: d["meta"].update(slug=".hidden"), ("meta", "slug")),
        (lambda d: d["meta"].update(slug="a/b"), ("meta", "slug")),
        (lambda d: d["meta"].update(difficulty="easy"), ("meta", "difficulty")),
        (lambda d: d["meta"]["hardware"].update(h100_sxm="works"), ("meta", "hardware", "h100_sxm")),
        (lambda d: d["meta"].update(date_added="yesterday"), ("meta", "date_added")),
        (lambda d: d["model"].update(context_length="long"), ("model", "context_length")),
        (lambda d: d["model"].update(base_args="--trust-remote-code"), ("model", "base_args")),
        (lambda d: d["model"].update(colour="red"), ("model", "colour")),
        (lambda d: d["variants"]["fp8"].pop("precision"), ("variants", "fp8", "precision")),
        (lambda d: d["variants"]["fp8"].update(tp=0), ("variants", "fp8", "tp")),
        (lambda d: d["variants"]["fp8"].update(tp=-2), ("variants", "fp8", "tp")),
        (lambda d: d["variants"]["fp8"].update(tp={"xpu": 0}), ("variants", "fp8", "tp")),
        (
            lambda d: d.update(strategy_overrides={"single_node_tp": {"tp": 0}}),
            ("strategy_overrides", "single_node_tp", "tp"),
        ),
        (lambda d: d["features"]["reasoning"].update(args=["--x", 3]), ("features", "reasoning", "args", 1)),
        (lambda d: d.update(unknown_section={}), ("unknown_section",)),
    ],
    ids=[
        "slug-dotdot",
        "slug-non-ascii",
        "slug-upper",
        "slug-dot",
        "slug-slash",
        "difficulty",
        "hardware-status",
        "date",
        "context-type",
        "args-string",
        "model-unknown",
        "precision-missing",
        "tp-zero",
        "tp-negative",
        "tp-map-zero",
        "strategy-tp-zero",
        "arg-int",
        "top-unknown",
    ],
)
def test_recipe_field_errors(edit: Any, loc: tuple[Any, ...]) -> None:
    data = _recipe_data()
    edit(data)
    # a union field's location goes on with the member tried (tp.constrained-int): compare the path
    assert first_loc(rejects(Recipe, data))[: len(loc)] == loc


# --- Packet --------------------------------------------------------------------------------

ID_FORMAT = re.compile(r"^(?P<slug>[a-z0-9][a-z0-9._-]*)-(?P<quant>[a-z0-9][a-z0-9._-]*)-(?P<short>[0-9a-f]{8})$")


def stored(draft: dict[str, Any]) -> dict[str, Any]:
    """The JSON form a sealed packet's file holds (states included), to edit as a file could be."""
    document: dict[str, Any] = json.loads(sealed(draft).data)
    return document


def read_stored(document: dict[str, Any]) -> Packet:
    """Validate a stored form as a reader does: strictly, from JSON."""
    return Packet.model_validate_json(json.dumps(document), strict=True)


def test_seal_stamps_digest_and_id() -> None:
    draft = measured_draft()
    before = copy.deepcopy(draft)
    result = sealed(draft)
    packet = result.packet
    assert result.data == packet_bytes(packet)
    assert packet.sha256 == sha256_hex(result.data)
    assert re.fullmatch(r"[0-9a-f]{64}", packet.sha256)
    assert packet.id == f"qwen3.5-9b-bf16-{packet.sha256[:8]}" == packet_id("qwen3.5-9b", "bf16", packet.sha256)
    assert result.file_name == f"{packet.id}.json"
    match = ID_FORMAT.match(packet.id)
    assert match is not None
    assert (match["slug"], match["quant"], match["short"]) == ("qwen3.5-9b", "bf16", packet.sha256[:8])
    again = sealed(copy.deepcopy(draft))
    assert again.packet == packet and again.data == result.data  # deterministic
    assert draft == before and "id" not in draft and "sha256" not in draft  # the draft is not modified


def test_unsealed_packet_has_no_digest_or_id() -> None:
    packet = measured_packet(spec=False)
    unsealed = Packet.model_validate(packet.model_dump(mode="json"))
    with pytest.raises(RuntimeError, match="unsealed packet"):
        unsealed.id  # noqa: B018
    with pytest.raises(RuntimeError, match="unsealed packet"):
        unsealed.sha256  # noqa: B018


def test_digest_is_the_sha256_of_the_file_bytes() -> None:
    result = sealed(measured_draft(spec=False))
    document = json.loads(result.data)
    # neither the id nor the digest is stored: both are facts about the bytes
    assert "id" not in document and "sha256" not in document
    assert document == result.packet.model_dump(mode="json")
    assert result.data == canonical_json(document) + b"\n"
    assert hashlib.sha256(result.data).hexdigest() == result.packet.sha256
    changed = sealed({**measured_draft(spec=False), "title": "another"})
    assert changed.packet.sha256 != result.packet.sha256


def test_any_content_change_changes_the_digest() -> None:
    base = measured_packet(spec=False)
    draft = measured_draft(spec=False)
    row = draft["arms"][0]["servers"][0]["rows"][3]
    ids = decode_uint32(row["token_ids"])
    ids[7] += 1
    row["token_ids"] = encode_uint32(ids)
    assert seal_draft(draft).sha256 != base.sha256
    assert seal_draft(measured_draft(spec=False, title="x")).sha256 != base.sha256
    assert seal_draft(measured_draft(spec=False, hardware="arc_pro_b60")).id != base.id


def test_packet_id_function() -> None:
    assert packet_id("qwen3.5-4b", "w4a16", "882591a8" + "0" * 56) == "qwen3.5-4b-w4a16-882591a8"


def test_round_trip_gives_an_equal_packet_and_the_same_bytes() -> None:
    result = sealed(measured_draft(g3_diverges=True))
    packet = result.packet
    again = Packet.model_validate(packet.model_dump(mode="json"))
    assert again.model_dump() == packet.model_dump()
    assert packet_bytes(again) == result.data
    from_file = Packet.model_validate_json(result.data, strict=True)
    assert from_file.model_dump() == packet.model_dump()
    assert sha256_hex(packet_bytes(from_file)) == packet.sha256
    # the parts give the same packet back, byte for byte
    assert seal(parts_of(packet), signing_key("measurer")).data == result.data


def test_measured_packet_states_and_figures() -> None:
    packet = measured_packet()
    assert packet.state == State.MEASURED
    oracle, spec = packet.arm(ORACLE_ARM), packet.arm(SPEC_ARM)
    assert (oracle.state, spec.state) == (State.MEASURED, State.MEASURED)
    assert [g.summary for g in spec.gates] == [
        "G2 12/12 vs the arm's second fresh server",
        "G3 server A 12/12 vs tp1-mtp0",
        "G3 server B 12/12 vs tp1-mtp0",
    ]
    assert spec.decode_tok_s is not None and oracle.decode_tok_s is not None
    assert spec.decode_tok_s > oracle.decode_tok_s
    assert oracle.decode_tok_s == pytest.approx(sum(oracle.server_values) / 2)
    assert oracle.ttft_ms is not None


def test_failed_g3_withholds_the_arm() -> None:
    packet = measured_packet(g3_diverges=True)
    spec = packet.arm(SPEC_ARM)
    assert spec.state == State.WITHHELD
    assert spec.withheld_reason
    assert [g.gate for g in spec.failed_gates] == ["G2", "G3"]
    assert spec.gates[1].first_divergence[4] == 57
    assert packet.state == State.MEASURED  # the oracle arm still publishes


def test_failed_g3_stored_as_measured_is_refused() -> None:
    document = stored(measured_draft(g3_diverges=True))
    document["arms"][1]["state"] = "measured"
    with pytest.raises(ValidationError, match="arm 'tp1-mtp2': state is measured, its gates make it withheld"):
        read_stored(document)
    # a writer cannot choose the state: seal derives it from the gates
    draft = measured_draft(g3_diverges=True)
    draft["arms"][1]["state"] = "measured"
    assert seal_draft(draft).arm(SPEC_ARM).state == State.WITHHELD


def test_withheld_arm_needs_a_reason() -> None:
    document = stored(measured_draft(g3_diverges=True))
    for missing in (None, ""):
        document["arms"][1]["withheld_reason"] = missing
        with pytest.raises(ValidationError, match="a withheld arm needs withheld_reason"):
            read_stored(document)
    # seal gives a withheld arm without a reason the failed gates as its reason
    draft = measured_draft(g3_diverges=True)
    draft["arms"][1]["withheld_reason"] = None
    spec = seal_draft(draft).arm(SPEC_ARM)
    assert spec.withheld_reason == "; ".join(g.summary for g in spec.failed_gates)


def test_packet_state_follows_its_arms() -> None:
    draft = published_draft([published_arm("a", [10.0, 11.0], gates=[("G1", 11, 12, False)])])
    assert "state" not in draft
    assert seal_draft(draft).state == State.WITHHELD
    document = stored(draft)
    assert document["state"] == "withheld"
    document["state"] = "imported"
    with pytest.raises(ValidationError, match="state is imported, its arms make it withheld"):
        read_stored(document)
    mixed = stored(measured_draft(g3_diverges=True))
    mixed["state"] = "withheld"
    with pytest.raises(ValidationError, match="state is withheld, its arms make it measured"):
        read_stored(mixed)


def test_screened_stays_screened_even_with_a_failed_gate() -> None:
    draft = published_draft([published_arm("a", [10.0], gates=[("G1", 3, 12, False)])], provenance="screened")
    packet = seal_draft(draft)
    assert packet.state == State.SCREENED
    assert packet.arms[0].state == State.SCREENED
    document = stored(draft)
    document["arms"][0]["state"] = "withheld"
    with pytest.raises(ValidationError, match="its gates make it screened"):
        read_stored(document)


@pytest.mark.parametrize("kind", ["imported", "screened"])
def test_non_measured_provenance_needs_a_source(kind: str) -> None:
    draft = published_draft([published_arm("a", [10.0, 11.0])], provenance=kind)
    seal_draft(draft)
    del draft["provenance"]["source"]
    with pytest.raises(ValidationError, match=f"an {kind} packet must name its source"):
        seal_draft(draft)
    draft["provenance"]["source"] = {"name": ""}
    with pytest.raises(ValidationError, match="at least 1 character"):
        seal_draft(draft)


def test_measured_provenance_needs_no_source() -> None:
    assert measured_packet(spec=False).provenance.source is None


@pytest.mark.parametrize(
    ("exact", "total", "passed", "ok"),
    [
        (12, 12, True, True),
        (11, 12, False, True),
        (12, 12, False, False),
        (11, 12, True, False),
        (13, 12, False, False),
        (None, 12, True, True),
        (None, 12, False, True),
        (0, 0, False, False),
    ],
)
def test_gate_passed_must_equal_exact_equals_total(exact: int | None, total: int, passed: bool, ok: bool) -> None:
    data = {"gate": "G1", "against": "B", "exact": exact, "total": total, "passed": passed}
    if ok:
        assert GateResult.model_validate(data).passed is passed
    else:
        with pytest.raises(ValidationError):
            GateResult.model_validate(data)


def test_gate_messages_and_divergence_length() -> None:
    rejects(GateResult, {"gate": "G1", "against": "B", "exact": 12, "total": 12, "passed": False}, "passed must equal")
    rejects(
        GateResult, {"gate": "G1", "against": "B", "exact": 13, "total": 12, "passed": False}, "exact exceeds total"
    )
    rejects(
        GateResult,
        {"gate": "G1", "against": "B", "exact": 1, "total": 2, "passed": False, "first_divergence": [None]},
        "one entry per prompt",
    )
    rejects(GateResult, {"gate": "G4", "against": "B", "total": 2, "passed": True}, "G1")
    assert GateResult(gate="G3", against="o", server="B", total=12, passed=False).summary == "G3 server B failed vs o"


def _b64(values: list[int]) -> str:
    return encode_uint32(to_uint32(values))


def _row(**changes: Any) -> dict[str, Any]:
    row = {
        "prompt_id": "p",
        "class_id": "c",
        "token_ids": _b64([1, 2, 3]),
        "prompt_tokens": 5,
        "completion_tokens": 3,
        "token_times_us": _b64([1000, 2000, 2000]),
    }
    return {**row, **changes}


def test_prompt_row_token_counts() -> None:
    row = PromptRow.model_validate(_row())
    assert row.completion_tokens == 3
    assert list(row.token_ids) == [1, 2, 3]
    assert row.ttft_ms == 1.0  # derived from the first token's time, never stored
    rejects(PromptRow, _row(completion_tokens=4), "token_ids length differs from completion_tokens")
    rejects(PromptRow, _row(token_times_us=_b64([1000, 2000])), "one time per token")
    rejects(PromptRow, _row(token_ids=_b64([1, 2]), completion_tokens=2), "one time per token")
    rejects(PromptRow, _row(cached_tokens=-1), "greater than or equal to 0")
    rejects(PromptRow, _row(ttft_ms=0.5), "Extra inputs are not permitted")  # no stored TTFT any more
    rejects(PromptRow, _row(token_ids=[1, 2, 3]), "must be base64 text")
    rejects(PromptRow, _row(token_ids="AQAAAAIAAAAD"), "not a whole number of 32-bit integers")


def test_arm_config_spec_method_iff_depth() -> None:
    assert ArmConfig(tensor_parallel_size=1).spec_depth == 0
    assert ArmConfig(tensor_parallel_size=2, spec_method="mtp", spec_depth=3).spec_method == "mtp"
    rejects(ArmConfig, {"tensor_parallel_size": 1, "spec_depth": 2}, "spec_method is set exactly when")
    rejects(ArmConfig, {"tensor_parallel_size": 1, "spec_method": "mtp"}, "spec_method is set exactly when")
    rejects(ArmConfig, {"tensor_parallel_size": 0}, "greater than or equal to 1")


def test_arm_ids_unique_and_ladders_name_arms() -> None:
    draft = measured_draft()
    draft["arms"][1]["id"] = ORACLE_ARM
    with pytest.raises(ValidationError, match="duplicate arm id"):
        seal_draft(draft)
    draft = measured_draft()
    draft["ladders"] = [
        {"arm": "tp9", "kind": "concurrency", "concurrency": [{"users": 1, "completion_tokens": 5, "wall_s": 1}]}
    ]
    with pytest.raises(ValidationError, match="ladder names unknown arm 'tp9'"):
        seal_draft(draft)
    draft["ladders"][0]["arm"] = SPEC_ARM
    ladder = seal_draft(draft).ladders[0]
    assert ladder.concurrency[0].aggregate_tok_s == 5.0


def test_arm_centre_and_ttft_fallback() -> None:
    arm = ArmParts.model_validate({**published_arm("a", [40.0, 50.0]), "published_ttft_ms": [100.0, 120.0]})
    assert arm.server_values == [40.0, 50.0]
    assert arm.decode_tok_s == 45.0
    assert arm.ttft_ms == 110.0
    empty = ArmParts.model_validate(published_arm("b", []))
    assert (empty.decode_tok_s, empty.ttft_ms) == (None, None)


def test_spec_metrics_rates() -> None:
    metrics = SpecMetrics(drafts=100, draft_tokens=300, accepted_tokens=150)
    assert metrics.acceptance_rate == 0.5
    assert metrics.mean_acceptance_length == 2.5
    assert SpecMetrics(drafts=0, draft_tokens=0, accepted_tokens=0).acceptance_rate is None


@pytest.mark.parametrize(
    ("edit", "loc"),
    [
        (lambda d: d.update(colour="red"), ("colour",)),
        (lambda d: d.update(schema_version=3), ("schema_version",)),
        (lambda d: d["identity"]["model"].update(slug="../etc"), ("identity", "model", "slug")),
        (lambda d: d["identity"]["model"].update(quantization="FP8/x"), ("identity", "model", "quantization")),
        (lambda d: d["identity"]["host"].update(card_count=0), ("identity", "host", "card_count")),
        (lambda d: d["identity"]["runtime"].update(platform="tpu"), ("identity", "runtime", "platform")),
        (lambda d: d["workload"].update(api="chat"), ("workload", "api")),
        (lambda d: d["workload"].update(suite_sha256="abc"), ("workload", "suite_sha256")),
        (lambda d: d["arms"][0]["servers"][0].update(decode_tok_s=0), ("arms", 0, "servers", 0, "decode_tok_s")),
        (lambda d: d["arms"][0]["servers"][0].update(status="maybe"), ("arms", 0, "servers", 0, "status")),
        (lambda d: d["arms"][0].update(state="great"), ("arms", 0, "state")),
        (lambda d: d.update(arms=[]), ("arms",)),
    ],
    ids=[
        "unknown",
        "schema",
        "slug-path",
        "quant-slash",
        "cards",
        "platform",
        "api",
        "hash",
        "rate",
        "status",
        "state",
        "no-arms",
    ],
)
def test_packet_field_errors(edit: Any, loc: tuple[Any, ...]) -> None:
    document = stored(measured_draft(spec=False))
    edit(document)
    with pytest.raises(ValidationError) as info:
        read_stored(document)
    assert first_loc(info.value) == loc
    if "state" not in loc and "schema_version" not in loc:  # a writer's parts are checked the same way
        draft = measured_draft(spec=False)
        edit(draft)
        with pytest.raises(ValidationError) as info:
            seal_draft(draft)
        assert first_loc(info.value) == loc


def test_models_are_frozen() -> None:
    packet = measured_packet(spec=False)
    with pytest.raises(ValidationError):
        packet.title = "changed"  # type: ignore[misc]
