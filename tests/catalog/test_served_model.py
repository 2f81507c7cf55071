"""Which model a recorded command serves (catalog/recipes/served_model.py), read as vLLM 0.32 reads
it: `vllm serve`'s positional replaces --model (vllm/entrypoints/cli/serve.py:56-57), the options
are ModelConfig's (vllm/engine/arg_utils.py:944-1016), with every spelling argparse accepts."""

from __future__ import annotations

import pytest

from catalog.recipes.command_facts import command_facts
from catalog.recipes.served_model import served_model, served_model_problems

REPO = "Qwen/Qwen3.5-9B"
REV = "0123456789abcdef0123456789abcdef01234567"
Found = list[str]
SERVE = ["vllm", "serve", REPO, "--max-model-len", "8192"]
LAUNCH = ["<repo>/.venv-vllm/bin/python", "-m", "vllm.entrypoints.launchers.api_server.entry"]


def problems(
    argv: list[str], *, portable: bool = True, revision: str | None = REV, synthetic: bool = False
) -> list[str]:
    return served_model_problems(argv, REPO, revision, portable=portable, synthetic=synthetic)


@pytest.mark.parametrize(
    "argv",
    [
        SERVE,
        [*SERVE, "--revision", REV, "--tokenizer-revision", REV],  # what runner/measure.py with_revision adds
        [*SERVE, "--served-model-name", REPO, "--tokenizer", REPO],
        [*SERVE, "--model", "Qwen/Qwen3.5-4B"],  # the positional replaces --model
    ],
)
def test_a_command_serving_the_packets_model_passes(argv: list[str]) -> None:
    assert problems(argv) == []


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["vllm", "serve", "RedHatAI/Qwen3.5-9B-quantized.w4a16", "--served-model-name", REPO], "loads 'RedHatAI"),
        (["vllm", "serve", "--model", "Qwen/Qwen3.5-4B"], "loads 'Qwen/Qwen3.5-4B'"),
        (["vllm", "serve", "--max-model-len", "8192"], "names no model"),
        ([*SERVE, "--served-model-name", "Qwen/Qwen3.5-4B"], "serves its model as 'Qwen/Qwen3.5-4B'"),
        ([*SERVE, "--tokenizer", "Qwen/Qwen3.5-4B"], "tokenizes with 'Qwen/Qwen3.5-4B'"),
        ([*SERVE, "--revision", "f" * 40], f"asks for --revision {'f' * 40}, but identity.model.revision is"),
        ([*SERVE, "--tokenizer-rev=" + "f" * 40], "asks for --tokenizer-revision"),  # an abbreviation
        ([*SERVE, "--code-revision", "main"], "asks for --code-revision main"),
    ],
)
def test_a_command_serving_another_model_is_named(argv: list[str], said: str) -> None:
    found = problems(argv)
    assert len(found) == 1 and said in found[0], found


def test_a_revision_the_identity_does_not_record_cannot_be_checked() -> None:
    assert problems([*SERVE, "--revision", REV], revision=None) == [
        f"asks for --revision {REV}, but identity.model.revision records none"
    ]


def test_a_launch_loads_a_folder_served_as_the_packets_model() -> None:
    """runner/runtime.py: `--model DIR --served-model-name REPO`; DIR is absolute (a container's
    mount), under the markers runner/identity.py writes, or a synthetic model's `models/demo`."""
    hub = f"~/.cache/huggingface/hub/models--Qwen--Qwen3.5-9B/snapshots/{REV}"
    for folder in (hub, "/models/Qwen3.5-9B", "<repo>/models/qwen"):
        assert problems([*LAUNCH, "--model", folder, "--served-model-name", REPO], portable=False) == []
    demo = [*LAUNCH, "--model", "models/demo", "--served-model-name", REPO]
    assert problems(demo, portable=False, synthetic=True) == []
    assert problems(demo, portable=False) == [f"loads 'models/demo', not the packet's model {REPO!r}"]


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("RedHatAI/Qwen3.5-9B-quantized.w4a16", "loads 'RedHatAI/Qwen3.5-9B-quantized.w4a16', not"),
        ("~/.cache/huggingface/hub/models--Qwen--Qwen3.5-4B/snapshots/x", "the hub cache's folder of another"),
    ],
)
def test_a_launch_loading_another_repository_is_named(model: str, said: str) -> None:
    found = problems([*LAUNCH, "--model", model, "--served-model-name", REPO], portable=False)
    assert len(found) == 1 and said in found[0], found


def test_a_portable_command_names_the_repository_itself() -> None:
    assert problems(["vllm", "serve", "/models/Qwen3.5-9B", "--served-model-name", REPO]) == [
        f"loads '/models/Qwen3.5-9B', not the packet's model {REPO!r}"
    ]


def test_docker_serves_the_model_after_the_image() -> None:
    """The vLLM images' entrypoint is `vllm serve`: `docker run OPTIONS IMAGE MODEL ARGS`."""
    image = "vllm/vllm-openai-xpu@sha256:" + "ab" * 32
    honest = ["docker", "run", "--rm", "--device", "/dev/dri", image, REPO, "--max-model-len", "8192"]
    assert served_model(honest).model == REPO and problems(honest) == []
    other = ["docker", "run", "--rm", image, "Qwen/Qwen3.5-4B", "--served-model-name", REPO]
    assert problems(other, portable=False) == [f"loads 'Qwen/Qwen3.5-4B', not the packet's model {REPO!r}"]


@pytest.mark.parametrize(
    "flag", ["--load-format", "--hf-config-path", "--model-loader-extra-config", "--config-format"]
)
def test_a_loader_the_catalog_cannot_follow_is_unread(flag: str) -> None:
    assert any(flag in words for words in command_facts([*SERVE, flag, "x"]).unread)
