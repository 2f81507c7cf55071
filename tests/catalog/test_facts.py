"""catalog.checks.facts: what a packet says about its model is the catalog's, never its own. One test
per refusal (a factory packet, edited, refused naming the field and both values), and the factory,
demo and committed packets accepted."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from catalog.checks.facts import facts_problems, file_facts_problems
from catalog.model.packet import Packet
from catalog.store.repository import load_catalog
from tests.catalog.factories import REPO, catalog_recipe, measured_packet
from tests.catalog.test_consistency import Draft, edited, set_array

RECIPE_9B = catalog_recipe("qwen3.5-9b")
DEMO = catalog_recipe("demo")


def facts(packet: Packet, recipe_slug: str = "qwen3.5-9b") -> dict[str, str]:
    return dict(facts_problems(packet, catalog_recipe(recipe_slug)))


def model(**values: object) -> Callable[[Draft], object]:
    return lambda d: d["identity"]["model"].update(values)


def test_the_factory_and_committed_packets_agree_with_the_catalog() -> None:
    assert facts(measured_packet()) == {}
    catalog = load_catalog(REPO / "data", REPO / "packets")
    for packet in catalog.packets.values():
        assert facts_problems(packet, catalog.recipes[packet.identity.model.slug]) == [], packet.id
        assert file_facts_problems(packet) == [], packet.id


@pytest.mark.parametrize(
    ("name", "declared", "known"),
    [("hidden_size", 64, 4096), ("num_layers", 2, 32), ("vocab_size", 3121, 248320), ("num_kv_heads", 1, 4)],
)
def test_a_declared_fact_that_is_not_the_catalogs(name: str, declared: int, known: int) -> None:
    """A packet that declares a smaller model to raise its own ceiling."""
    problems = facts(edited(model(config={name: declared})))
    assert problems == {
        f"identity.model.config.{name}": f"is {declared!r}, but the catalog's facts for 'qwen3.5-9b' say {known!r}"
        f" (data/overlays/qwen3.5-9b.yaml facts.{name})"
    }


def test_a_declared_fact_the_catalog_agrees_with_passes() -> None:
    assert facts(edited(model(config={"hidden_size": 4096, "architecture": "Qwen3_5ForConditionalGeneration"}))) == {}


def test_a_quantization_that_is_not_the_variants_precision() -> None:
    """W4A16 declared for the BF16 variant: the ceiling would count 4 bits per weight."""
    problems = facts(edited(model(quantization="w4a16", quantization_label="W4A16")))
    assert problems == {
        "identity.model.quantization": "is 'w4a16', but recipe 'qwen3.5-9b' variant 'default' has precision 'bf16'"
        " (BF16)"
    }


def test_a_variants_precision_under_another_spelling_passes() -> None:
    """The fp8 variant's precision `fp8` is the FP8-dynamic scheme the packet names."""
    fp8 = model(
        variant="fp8", repo="RedHatAI/Qwen3.5-9B-FP8-dynamic", quantization="fp8-dynamic", quantization_label="FP8"
    )
    assert facts(edited(fp8)) == {}


def test_a_quantization_label_that_says_another_precision() -> None:
    problems = facts(edited(model(quantization_label="INT4")))
    assert problems == {
        "identity.model.quantization_label": "is 'INT4', but quantization 'bf16' is shown as 'BF16' or 'bf16'"
    }


def test_weight_bytes_that_no_checkpoint_of_the_model_has() -> None:
    """The CPU demo's 2.4 MB passed off as Qwen3.5 9B in BF16."""
    problems = facts(edited(model(weight_bytes=2_388_832)))
    (field, message), *_ = problems.items()
    assert field == "identity.model.weight_bytes"
    assert message.startswith("is 2,388,832 B, but 9,653,104,368 parameters of 'qwen3.5-9b' (the catalog's facts)")
    assert message.endswith("at BF16 take 17,375,587,862 to 21,236,829,610 B")


def test_weight_bytes_inside_the_span_of_a_4_bit_build_pass() -> None:
    """Which components a W4A16 build keeps at 16 bits is not published for every repository."""
    w4 = model(
        variant="w4a16",
        repo="RedHatAI/Qwen3.5-9B-quantized.w4a16",
        quantization="w4a16",
        quantization_label="W4A16",
        weight_bytes=7_700_000_000,
    )
    assert facts(edited(w4)) == {}


def test_a_real_model_the_catalog_has_no_facts_for() -> None:
    no_facts = RECIPE_9B.model_copy(update={"facts": None})
    problems = dict(facts_problems(measured_packet(), no_facts))
    assert set(problems) == {"identity.model.slug"}
    assert problems["identity.model.slug"].startswith("the catalog has no facts for model 'qwen3.5-9b'")


def test_a_synthetic_model_goes_by_its_own_declared_facts() -> None:
    demo = edited(
        model(slug="demo", variant="default", repo="local/demo-qwen3-tiny", synthetic=True, config={"vocab_size": 200})
    )
    problems = facts(demo, "demo")
    rows = [f"arms[{i}].servers[{j}].rows[{k}]" for i in range(2) for j in range(2) for k in range(12)]
    assert {field.rsplit(".", 1)[0] for field in problems} == set(rows)  # every row holds ids above 200
    assert all(m.endswith("the synthetic model's declared vocab_size is 200") for m in problems.values())


def test_a_token_id_beyond_the_real_vocabulary_when_the_packet_declares_none() -> None:
    def beyond(d: Draft) -> None:
        d["identity"]["model"]["config"] = None
        set_array(d["arms"][0]["servers"][1]["rows"][2], "token_ids", 7, 250_000)

    problems = facts(edited(beyond, spec=False))
    assert problems == {
        "arms[0].servers[1].rows[2].token_ids[7]": "token id 250,000 is outside the vocabulary:"
        " the catalog's vocab_size is 248,320"
    }


def test_a_declared_parameter_count_far_from_the_catalogs() -> None:
    problems = facts(edited(model(config={"parameters": 1_000_000})))
    assert problems == {
        "identity.model.config.parameters": "is 1,000,000, but the catalog's facts for 'qwen3.5-9b' give"
        " 9,653,104,368 parameters (± 15%)"
    }


def _files(weights: int) -> list[dict[str, object]]:
    return [
        {"name": "config.json", "bytes": 826, "sha256": "a" * 64},
        {"name": "model.safetensors", "bytes": weights, "sha256": "b" * 64},
    ]


def test_weight_bytes_that_are_not_the_weight_files_listed() -> None:
    packet = edited(model(weight_files=_files(19_000_000_000)))
    assert dict(file_facts_problems(packet)) == {
        "identity.model.weight_bytes": "is 19,300,000,000 B, but the weight files listed in weight_files hold"
        " 19,000,000,000 B"
    }
    assert file_facts_problems(edited(model(weight_files=_files(19_300_000_000)))) == []


def test_a_config_hash_that_is_not_the_config_file_listed() -> None:
    packet = edited(model(weight_files=_files(19_300_000_000), config={"config_sha256": "c" * 64}))
    assert dict(file_facts_problems(packet)) == {
        "identity.model.config.config_sha256": f"is {'c' * 64}, but weight_files lists config.json with sha256"
        f" {'a' * 64}"
    }
