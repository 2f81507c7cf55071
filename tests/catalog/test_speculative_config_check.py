"""The speculative config a command runs is read whole, key for key (catalog/recipes/command_facts.py:
`spec_config`, every key but the method and depth an arm records itself), in every spelling vLLM
0.32 reads: `--speculative-config`/`-sc` JSON, its dotted keys, `--spec-method`, `--spec-model` and
`--spec-tokens` (vllm/engine/arg_utils.py:1826-1835, merged at 2068-2088). A measured arm's command
must run the speculative config its `make measure` line runs (its overlay configuration's, else the
recipe's speculative feature), but for `num_speculative_tokens`, the arm's depth; its launch command
and its ladders' the same as its `argv`. Else the packet is refused naming the arm's command field
(catalog/checks/commands.py). An imported arm without a command is never refused for it: its
closest command lists the settings the source did not record."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from catalog.checks.commands import command_problems
from catalog.model.packet import Ladder, Packet
from catalog.recipes.command_facts import command_facts
from catalog.recipes.compose import merge_args
from catalog.recipes.hardware import Hardware, HardwareFile
from catalog.recipes.recipe import Configuration, Recipe
from catalog.recipes.shown import arm_command
from catalog.store.documents import load_file
from catalog.store.repository import load_catalog
from testkit.samples import DATA, SPEC_ARM, measured_parts
from tests.catalog.factories import REPO, catalog_recipe, measured_draft, seal_draft

SERVE = ["vllm", "serve", "Qwen/Qwen3.5-9B"]
DRAFT = ("model", '"org/other-draft"')


@cache
def _b70() -> Hardware:
    return load_file(HardwareFile, DATA / "hardware.yaml").by_id()["arc_pro_b70"]


@pytest.mark.parametrize(
    "args",
    [
        ["-sc", '{"method": "mtp", "num_speculative_tokens": 2, "model": "org/other-draft"}'],
        ["--speculative-config", '{"method": "mtp", "num-speculative-tokens": 2, "model": "org/other-draft"}'],
        ["-sc.method", "mtp", "-sc.num_speculative_tokens=2", "-sc.model", "org/other-draft"],
        ["--speculative_config.model=org/other-draft", "--spec-method", "mtp", "--spec-tokens", "2"],
        ["-sc", '{"method": "mtp", "num_speculative_tokens": 2}', "--spec-model", "org/other-draft"],
        ["--spec-method", "mtp", "--spec-model", "org/other-draft", "--spec-tokens", "2"],
    ],
)
def test_a_draft_model_is_read_in_every_spelling(args: list[str]) -> None:
    facts = command_facts([*SERVE, *args])
    assert (facts.spec_method, facts.spec_depth, facts.spec_config, facts.unread) == ("mtp", 2, (DRAFT,), ())


@pytest.mark.parametrize(
    ("args", "unread"),
    [
        (["-sc", '{"method": "mtp", "num_speculative_tokens": 2, "draft": "x"}'], "'draft' in its speculative config"),
        (["-sc", '{"model": "a", "num_speculative_tokens": 2}', "--spec-model", "b"], "refuses together"),
        (["-sc", "[2]"], "no JSON object"),
        (["-sc", "{method: mtp}"], "no JSON vLLM reads"),
    ],
)
def test_a_speculative_config_vllm_refuses_is_named_not_guessed(args: list[str], unread: str) -> None:
    """SpeculativeConfig forbids other keys (vllm/config/utils.py:70, @config); --spec-model beside a
    JSON model is refused (arg_utils.py:2077-2080); the JSON is json.loads'd (1826) into a dict."""
    (words,) = command_facts([*SERVE, *args]).unread
    assert unread in words


def _with_spec(draft: dict[str, Any], config: dict[str, Any], field: str = "argv") -> int:
    index = next(i for i, arm in enumerate(draft["arms"]) if arm["id"] == SPEC_ARM)
    argv = draft["arms"][index]["config"][field]
    at = argv.index("--speculative-config")
    argv[at + 1] = json.dumps(config)
    return index


def _problems(packet: Packet, recipe: Recipe | None = None) -> dict[str, str]:
    recipe = recipe or catalog_recipe("qwen3.5-9b")
    return dict(command_problems(packet, recipe, _b70()))


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"model": "org/other-draft"}, 'sets no model in its speculative config; the arm measured with model "org/'),
        ({"quantization": "fp8"}, 'the arm measured with quantization "fp8"'),
        ({"revision": "0" * 40}, "the arm measured with revision"),
        ({"draft_tensor_parallel_size": 1}, "the arm measured with draft_tensor_parallel_size 1"),
    ],
)
def test_a_measured_arm_running_another_speculative_config_than_its_line_is_refused(
    extra: dict[str, Any], words: str
) -> None:
    """The recipe's MTP feature at the arm's depth is what `make measure` runs: a draft of another
    model, quantization, revision or TP is another configuration than the one the page names."""
    draft = measured_draft()
    index = _with_spec(draft, {"method": "mtp", "num_speculative_tokens": 2, **extra})
    problems = _problems(seal_draft(draft))
    assert list(problems) == [f"arms[{index}].config.argv"], problems
    message = problems[f"arms[{index}].config.argv"]
    assert f"arm {SPEC_ARM}: speculative config: `make measure MODEL=qwen3.5-9b" in message and words in message


def _listed(packet: Packet, spec: dict[str, Any]) -> Recipe:
    """The 9B recipe with a configuration that lists `packet`: its variant, card and TP, MTP."""
    recipe = catalog_recipe("qwen3.5-9b")
    config = Configuration(
        label="BF16, MTP, one B70",
        variant="default",
        hardware="arc_pro_b70",
        speculative_config=spec,
        packets=[packet.id],
    )
    return recipe.model_copy(update={"configurations": {**recipe.configurations, "b70-bf16-mtp": config}})


def test_an_arm_its_configuration_lists_runs_that_configurations_speculative_config() -> None:
    """A packet an overlay configuration lists is shown as that configuration (`make measure
    CONFIG=`): its command drafting with a quantized head of the configuration's MTP is refused;
    the configuration's own settings at the arm's depth pass."""
    draft = measured_draft()
    index = _with_spec(draft, {"method": "mtp", "num_speculative_tokens": 2, "quantization": "fp8"})
    packet = seal_draft(draft)
    problems = _problems(packet, _listed(packet, {"method": "mtp", "num_speculative_tokens": 3}))
    assert list(problems) == [f"arms[{index}].config.argv"], problems
    assert "CONFIG=b70-bf16-mtp" in problems[f"arms[{index}].config.argv"]
    assert not _problems(packet, _listed(packet, {"method": "mtp", "num_speculative_tokens": 3, "quantization": "fp8"}))


def test_the_configurations_own_settings_in_another_spelling_pass() -> None:
    draft = measured_draft()
    index = next(i for i, arm in enumerate(draft["arms"]) if arm["id"] == SPEC_ARM)
    argv = draft["arms"][index]["config"]["argv"]
    at = argv.index("--speculative-config")
    argv[at : at + 2] = ["-sc.method", "mtp", "-sc.num_speculative_tokens", "2", "--spec-model", "Qwen/Qwen3.5-9B"]
    packet = seal_draft(draft)
    spec = {"method": "mtp", "num_speculative_tokens": 3, "model": "Qwen/Qwen3.5-9B"}
    assert _problems(packet, _listed(packet, spec)) == {}


def test_a_launch_command_running_another_draft_than_the_arms_argv_is_refused() -> None:
    draft = measured_draft()
    index = next(i for i, arm in enumerate(draft["arms"]) if arm["id"] == SPEC_ARM)
    config = draft["arms"][index]["config"]
    config["launch_argv"] = list(config["argv"])
    _with_spec(draft, {"method": "mtp", "num_speculative_tokens": 2, "model": "org/other-draft"}, "launch_argv")
    problems = _problems(seal_draft(draft))
    assert list(problems) == [f"arms[{index}].config"], problems
    assert (
        'its recorded launch command (config.launch_argv) sets model "org/other-draft" in its speculative config;'
        " the arm records without model (config.argv)"
    ) in problems[f"arms[{index}].config"]


def test_a_ladder_running_another_ngram_window_than_its_arm_is_refused() -> None:
    parts = measured_parts()
    (arm,) = [a for a in parts.arms if a.id == SPEC_ARM]
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 2, "prompt_lookup_max": 5})
    argv = merge_args([*arm.config.argv, "--speculative-config", spec, "--max-num-seqs", "64"])
    packet = seal_draft(
        parts.model_copy(update={"ladders": [Ladder(arm=SPEC_ARM, kind="concurrency", argv=argv)]}).model_dump(
            mode="json"
        )
    )
    problems = _problems(packet)
    assert list(problems) == ["ladders[0].argv"], problems
    assert "sets prompt_lookup_max 5 in its speculative config; the arm records without" in problems["ladders[0].argv"]


def test_a_value_of_another_json_type_is_another_value() -> None:
    """pydantic would read "1" as 1; the catalog compares what the command says, as JSON."""
    draft = measured_draft()
    index = _with_spec(draft, {"method": "mtp", "num_speculative_tokens": 2, "draft_tensor_parallel_size": "1"})
    packet = seal_draft(draft)
    spec = {"method": "mtp", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1}
    problems = _problems(packet, _listed(packet, spec))
    message = problems[f"arms[{index}].config.argv"]
    assert "sets draft_tensor_parallel_size 1 in its speculative config; the arm measured with" in message
    assert 'with draft_tensor_parallel_size "1"' in message


def test_the_committed_demo_and_imports_pass_and_an_import_lists_what_its_source_did_not_record() -> None:
    """The demo's n-gram arm runs its recipe's window (prompt_lookup_max 3, min 2); an imported arm
    without a command is not refused for a setting its configuration adds, which its closest
    command lists as a difference instead."""
    catalog = load_catalog(REPO / "data", REPO / "packets")  # raises on any refusal
    assert any(name.startswith("demo-") for name in catalog.packets)
    packet = catalog.packets["qwen3.5-9b-fp8-dynamic-c48f580e"]
    recipe = catalog.recipes["qwen3.5-9b"]
    name = "b70-fp8-mtp3-int4-head"
    config = recipe.configurations[name]
    spec = {**(config.speculative_config or {}), "draft_tensor_parallel_size": 1}
    edited = {**recipe.configurations, name: config.model_copy(update={"speculative_config": spec})}
    recipe = recipe.model_copy(update={"configurations": edited})
    assert command_problems(packet, recipe, _b70()) == []
    shown = arm_command(packet, packet.arm("tp1-mtp3-int4-head"), recipe, _b70())
    assert shown is not None and shown.configuration == name
    (difference,) = [d for d in shown.differences if d.field == "speculative config"]
    assert difference.words() == (
        "the command sets draft_tensor_parallel_size 1 in its speculative config; the arm measured settings it did"
        " not record"
    )


def test_a_token_with_a_space_is_a_value_as_argparse_reads_it() -> None:
    """A reviewer's forgery: `--response-role "-sc None"` is the response role to vLLM (Python 3.11
    argparse _parse_optional: `if ' ' in arg_string: return None`), not a second `-sc` that wipes the
    draft the first one names. Read as vLLM reads it, the command drafts with org/other-draft."""
    facts = command_facts(
        [
            *SERVE,
            "-sc",
            '{"model": "org/other-draft"}',
            "--spec-method",
            "mtp",
            "--spec-tokens",
            "2",
            "--response-role",
            "-sc None",
        ]
    )
    assert (facts.spec_method, facts.spec_depth, facts.spec_config) == ("mtp", 2, (DRAFT,))
    # a short option with its value attached keeps argparse's reading: `-q fp8` is -q with " fp8"
    assert command_facts([*SERVE, "-q fp8"]).quantization == " fp8"
    assert command_facts([*SERVE, "--max-model-len 4096"]).max_model_len is None  # a value, not the flag


def test_a_config_file_taken_as_a_dotted_flags_value_is_still_unread() -> None:
    """vLLM pulls in a `--config` token wherever it stands before any dotted flag takes the next
    argument as its value (vllm/utils/argparse_utils.py:334): `--compilation-config.mode --config
    evil.yaml` reads evil.yaml's flags, which the packet does not carry."""
    facts = command_facts([*SERVE, "--compilation-config.mode", "--config", "evil.yaml", "3"])
    assert any("--config" in words for words in facts.unread), facts.unread


def test_a_speculative_key_set_to_null_is_its_default() -> None:
    """`{"model": null}` leaves SpeculativeConfig.model at its default, None
    (vllm/config/speculative.py:396): the same config as one without the key."""
    with_null = command_facts([*SERVE, "-sc", '{"method": "mtp", "num_speculative_tokens": 2, "model": null}'])
    assert with_null.spec_config == () and with_null.unread == ()
