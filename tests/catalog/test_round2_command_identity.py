"""A recorded command is read as vLLM 0.32 reads it (catalog/recipes/command_facts.py), and a
packet's image, version and launch tell one story (catalog/checks/identity.py):

- every alias, abbreviation and dotted JSON spelling of the flags the checks read means what it
  means to vLLM's FlexibleArgumentParser (`-sc`, `--speculative-config.method`, `--spec-method`,
  `-qfp8`, `--quantization-config.linear`, `--no-enforce-eager`, `-pp`, `-dp`, ...);
- the cards a command uses (TP x PP x PCP x DP) are the arm's tensor_parallel_size: the catalog
  records TP only, so a pipeline, prefill context or data parallel size above 1 is refused;
- a command with `--config FILE` is refused: vLLM reads flags from a file the packet does not carry;
- a vLLM image tagged with a version is an image of that version: identity.runtime.version's;
- a launch that is not `docker run` names no image and no digest.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from catalog.checks.commands import command_problems
from catalog.model.packet import Packet
from catalog.recipes.command_facts import INFERRED_METHOD, command_facts
from catalog.recipes.recorded import disagreements, recorded_facts
from tests.catalog.factories import ORACLE_ARM, SPEC_ARM, catalog_recipe
from tests.catalog.test_consistency import Draft, edited
from tests.catalog.test_identity import DIGEST, PINNED, campaign, identity

RECIPE = catalog_recipe("qwen3.5-9b")
SERVE = ["vllm", "serve", "Qwen/Qwen3.5-9B"]
SPEC = json.dumps({"method": "mtp", "num_speculative_tokens": 2})


def commands(packet: Packet) -> dict[str, str]:
    """field -> its messages, one a line (an arm's refusals share the field `arms[i].config`)."""
    found: dict[str, str] = {}
    for field, message in command_problems(packet, RECIPE, None):
        found[field] = f"{found[field]}\n{message}" if field in found else message
    return found


def on_arm(arm_id: str, *args: str) -> Callable[[Draft], None]:
    def change(d: Draft) -> None:
        for arm in d["arms"]:
            if arm["id"] == arm_id:
                arm["config"]["argv"] += list(args)

    return change


# ---- speculative decoding, in every spelling vLLM reads ----


@pytest.mark.parametrize(
    "args",
    [
        ["-sc", SPEC],  # vllm/engine/arg_utils.py:1828
        ["-sc=" + SPEC],
        ["--speculative-conf", SPEC],  # argparse's abbreviation (FlexibleArgumentParser keeps allow_abbrev)
        ["-s", SPEC],  # the one single-dash option that starts with -s
        ["--speculative-config.method", "mtp", "--speculative-config.num_speculative_tokens", "2"],
        ["--speculative_config.method=mtp", "--speculative-config.num_speculative_tokens", "2"],
        ["-sc.method", "mtp", "-sc.num_speculative_tokens=2"],
        ["--spec-method", "mtp", "--spec-tokens", "2"],  # arg_utils.py:1831-1835, merged at 2068-2080
        ["--speculative-config", json.dumps({"method": "mtp", "num-speculative-tokens": "2"})],
    ],
)
def test_speculative_decoding_in_every_spelling(args: list[str]) -> None:
    facts = command_facts([*SERVE, *args])
    assert (facts.spec_method, facts.spec_depth) == ("mtp", 2)


def test_a_dotted_speculative_config_replaces_the_json_one() -> None:
    """vLLM appends the dotted flags, merged into one JSON per spelling, after the rest: the last
    value wins, whole (`-sc.x` and `--speculative-config.y` are two JSON values, the later holding)."""
    facts = command_facts([*SERVE, "-sc.num_speculative_tokens", "3", "-sc", SPEC])
    assert (facts.spec_method, facts.spec_depth) == (INFERRED_METHOD, 3)
    facts = command_facts([*SERVE, "--speculative-config.method", "mtp", "-sc.num_speculative_tokens", "2"])
    assert (facts.spec_method, facts.spec_depth) == (INFERRED_METHOD, 2)


def test_flags_before_the_model() -> None:
    """`vllm serve -sc '{...}' MODEL`: the model is a positional argparse finds after the flags."""
    facts = command_facts(["vllm", "serve", "-sc", SPEC, "Qwen/Qwen3.5-9B"])
    assert (facts.spec_method, facts.spec_depth) == ("mtp", 2)
    assert command_facts(["vllm", "serve", "--enforce-eager", "Qwen/Qwen3.5-9B"]).eager is True


def test_no_enforce_eager_is_graph_capture() -> None:
    assert command_facts([*SERVE, "--enforce-eager", "--no-enforce-eager"]).eager is False
    assert command_facts([*SERVE, "--no-enforce-eager", "--enforce"]).eager is True


@pytest.mark.parametrize("args", [["-sc", SPEC], ["--speculative-config.method", "mtp"], ["--spec-method", "mtp"]])
def test_a_depth_0_arm_whose_command_runs_mtp(args: list[str]) -> None:
    problems = commands(edited(on_arm(ORACLE_ARM, *args)))
    assert "arms[0].config" in problems, problems
    assert "speculative method: its recorded vllm serve command (config.argv) uses mtp" in problems["arms[0].config"]


# ---- weights ----


@pytest.mark.parametrize(
    ("args", "method"),
    [
        (["-qfp8"], "fp8"),
        (["-q=fp8"], "fp8"),
        (["--quantiz", "fp8"], None),  # ambiguous to vLLM (--quantization, --quantization-config): not read
        (["--quantization-config.method", "fp8_per_tensor"], "online"),
        (["--quantization_config.linear=fp8_per_tensor"], "online"),
    ],
)
def test_quantization_in_every_spelling(args: list[str], method: str | None) -> None:
    assert command_facts([*SERVE, *args]).quantization == method


def test_an_ambiguous_flag_is_refused() -> None:
    facts = command_facts([*SERVE, "--quantiz", "fp8"])
    assert facts.unread and "--quantiz" in facts.unread[0]


def test_a_bf16_arm_quantized_online_through_a_dotted_flag() -> None:
    problems = commands(edited(on_arm(ORACLE_ARM, "--quantization-config.method", "fp8_per_tensor")))
    assert problems == {
        "arms[0].config": "arm tp1-mtp0: quantization: its recorded vllm serve command (config.argv) quantizes the"
        " weights with --quantization online; the arm records BF16 weights, which no --quantization serves"
        " (identity.model.quantization)"
    }


# ---- cards ----


@pytest.mark.parametrize(
    ("args", "cards"),
    [
        (["--data-parallel-size", "2"], "spans 2 cards (TP 1 x PP 1 x DP 2)"),
        (["-dp", "2"], "spans 2 cards (TP 1 x PP 1 x DP 2)"),
        (["-pp=2"], "spans 2 cards (TP 1 x PP 2 x DP 1)"),
        (["--pipeline_parallel_size", "2", "-dp", "2"], "spans 4 cards (TP 1 x PP 2 x DP 2)"),
        (["-pcp", "2"], "spans 2 cards (TP 1 x PP 1 x DP 1 x PCP 2)"),
    ],
)
def test_a_one_card_arm_whose_command_spans_more(args: list[str], cards: str) -> None:
    problems = commands(edited(on_arm(ORACLE_ARM, *args)))
    message = problems["arms[0].config"]
    assert f"cards: its recorded vllm serve command (config.argv) {cards}" in message, message
    assert "the catalog records tensor parallelism only" in message


def test_one_card_spelled_with_every_size() -> None:
    packet = edited(on_arm(ORACLE_ARM, "-tp", "1", "-pp", "1", "-dp", "1", "-pcp", "1"))
    assert commands(packet) == {}


def test_cards_of_a_shown_and_recorded_configuration() -> None:
    packet = edited(lambda d: None)
    found = disagreements(command_facts([*SERVE, "-dp", "2"]), recorded_facts(packet, packet.arms[0]))
    assert [d.field for d in found] == ["cards"]


# ---- a config file ----


@pytest.mark.parametrize("args", [["--config", "/srv/serve.yaml"], ["--config=/srv/serve.yaml"]])
def test_a_command_that_reads_its_flags_from_a_file(args: list[str]) -> None:
    problems = commands(edited(on_arm(SPEC_ARM, *args)))
    message = problems["arms[1].config"]
    assert "config file: its recorded vllm serve command (config.argv) reads its flags from --config" in message
    assert "/srv/serve.yaml" in message


def test_a_config_file_before_the_model() -> None:
    facts = command_facts(["vllm", "serve", "--config", "/srv/serve.yaml", "Qwen/Qwen3.5-9B"])
    assert facts.unread


# ---- identity: the image's tag and the launch ----


def test_an_image_tagged_with_another_version() -> None:
    problems = identity(campaign(image="vllm/vllm-openai-xpu:0.10.0"))
    assert problems == {
        "identity.runtime.image": "is 'vllm/vllm-openai-xpu:0.10.0', an image of vLLM 0.10.0, but"
        " identity.runtime.version is '0.17.1'"
    }


@pytest.mark.parametrize(
    "image",
    [
        "vllm/vllm-openai-xpu:v0.17.1",
        "vllm/vllm-openai-xpu:0.17.1-xpu",
        "vllm/vllm-openai-xpu:0.17",
        "vllm/vllm-openai-xpu:latest",
        "vllm/vllm-openai-xpu:nightly-0123abc",
        "vllm/vllm-openai-xpu",
    ],
)
def test_an_image_tag_of_the_same_release_or_no_version(image: str) -> None:
    assert identity(campaign(image=image)) == {}


@pytest.mark.parametrize(
    "image", ["vllm/vllm-openai-xpu:v0.10.0", "vllm/vllm-openai-xpu:0.17.2", "vllm/vllm-openai-xpu:0.18-xpu"]
)
def test_other_spellings_of_another_version(image: str) -> None:
    assert set(identity(campaign(image=image))) == {"identity.runtime.image"}


def test_a_local_launch_under_an_image_and_digest() -> None:
    def local(d: Draft) -> None:
        d["identity"]["runtime"]["image_pinned"] = None
        for arm in d["arms"]:
            arm["config"]["launch_argv"] = [
                "/opt/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3.5-9B",
            ]  # fmt: skip

    message = (
        "runs '/opt/venv/bin/python', not `docker run`, but identity.runtime names the image"
        f" 'vllm/vllm-openai-xpu:0.17.1' (image) and {DIGEST!r} (image_digest)"
    )
    assert identity(campaign(local)) == {f"arms[{i}].config.launch_argv": message for i in (0, 1)}


def test_a_local_launch_names_no_image() -> None:
    def local(d: Draft) -> None:
        d["identity"]["runtime"].update(image=None, image_digest=None, image_pinned=None)
        for arm in d["arms"]:
            arm["config"]["launch_argv"] = [".venv-vllm/bin/python", "-m", "vllm", "--model", "Qwen/Qwen3.5-9B"]

    assert identity(campaign(local)) == {}
    assert PINNED  # the docker campaign's image, unused here
