"""A listed key cannot publish a recorded command that vLLM 0.32 reads otherwise than the checks do,
nor an identity whose image, version and launch tell two stories (tests/adversarial/test_listed_key.py's
harness): a lab seals, with its listed key, a campaign whose recorded `vllm serve` command says, in a
spelling vLLM's parser accepts, what its arm does not record, and `python -m catalog.verify` and
`python -m builder build` refuse each, published and with `--allow-unsigned`, by an error line naming
the packet and the field; the same lab's honest campaigns, in those spellings, are accepted by both.

- a depth-0 arm running MTP through the alias `-sc` (vllm/engine/arg_utils.py:1828), through the
  dotted form `--speculative-config.method mtp` (vllm/utils/argparse_utils.py:425-466) or through
  `--spec-method mtp --spec-tokens 2` (vllm/engine/arg_utils.py:1831-1835, 2068-2080);
- a BF16 arm quantizing online through `--quantization-config.method fp8_per_tensor`;
- a "1 card" arm whose command runs `--data-parallel-size 2` or `-pp 2` (the cards vLLM uses are
  TP x PP x PCP x DP, vllm/config/parallel.py:945, 623; the catalog records TP only);
- a command whose flags come from `--config /srv/serve.yaml`, a file the packet does not carry
  (vllm/utils/argparse_utils.py:334, 479-);
- an image tagged vllm/vllm-openai-xpu:0.10.0 under identity.runtime.version 0.17.1;
- a local `python -m vllm.entrypoints.openai.api_server` launch under an identity naming an image and
  its digest.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testkit.samples import measured_parts
from tests.adversarial.test_forgery import MODES, refused
from tests.adversarial.test_listed_key import accepted, campaign, lab, lab_seal  # noqa: F401 (lab: fixture)

Document = dict[str, Any]
SPEC = json.dumps({"method": "mtp", "num_speculative_tokens": 2})
DIGEST = "sha256:" + "ab" * 32
PINNED = f"vllm/vllm-openai-xpu@{DIGEST}"


def oracle_only(*extra: str) -> Document:
    """A campaign of one depth-0 arm on one card (vLLM 0.32.0), its recorded command given `extra`."""
    document = measured_parts(spec=False).model_dump(mode="json")
    document["identity"]["runtime"].update(version="0.32.0", label="vLLM 0.32.0 XPU")
    document["arms"][0]["config"]["argv"] += list(extra)
    return document


def short_spec_flag() -> Document:
    return oracle_only("-sc", SPEC)


def dotted_spec_flag() -> Document:
    return oracle_only("--speculative-config.method", "mtp", "--speculative-config.num_speculative_tokens", "2")


def spec_method_flags() -> Document:
    return oracle_only("--spec-method", "mtp", "--spec-tokens", "2")


def quantization_dotted() -> Document:
    return oracle_only("--quantization-config.method", "fp8_per_tensor")


def data_parallel() -> Document:
    document = oracle_only("--data-parallel-size", "2")
    document["identity"]["host"]["card_count"] = 2
    return document


def pipeline_parallel() -> Document:
    document = oracle_only("-pp", "2")
    document["identity"]["host"]["card_count"] = 2
    return document


def config_file() -> Document:
    return oracle_only("--config", "/srv/serve.yaml")


def docker_campaign(tag: str) -> Document:
    """A docker campaign as the runner records one, its image named with `tag`."""
    document = campaign()
    runtime = document["identity"]["runtime"]
    runtime.update(image=f"vllm/vllm-openai-xpu:{tag}", image_digest=DIGEST, image_pinned=PINNED)
    for arm in document["arms"]:
        arm["config"]["launch_argv"] = ["docker", "run", "--rm", PINNED, "Qwen/Qwen3.5-9B", *arm["config"]["argv"][3:]]
    return document


def image_of_another_version() -> Document:
    return docker_campaign("0.10.0")


def local_launch_with_an_image() -> Document:
    document = campaign()
    document["identity"]["runtime"].update(image="vllm/vllm-openai-xpu:0.17.1", image_digest=DIGEST)
    for arm in document["arms"]:
        arm["config"]["launch_argv"] = [
            "/opt/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3.5-9B",
            *arm["config"]["argv"][3:],
        ]  # fmt: skip
    return document


# (the forgery, what the error line holds besides the packet's id: the field, and the flag it names)
FORGERIES: list[tuple[Callable[[], Document], str]] = [
    (short_spec_flag, "(config.argv) uses mtp"),
    (dotted_spec_flag, "(config.argv) uses mtp"),
    (spec_method_flags, "(config.argv) uses mtp"),
    (quantization_dotted, "(identity.model.quantization)"),
    (data_parallel, "(config.argv) spans 2 cards"),
    (pipeline_parallel, "(config.argv) spans 2 cards"),
    (config_file, "(config.argv) reads its flags from --config /srv/serve.yaml"),
    (image_of_another_version, "identity.runtime.image"),
    (local_launch_with_an_image, "launch_argv"),
]


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize(("forge", "because"), FORGERIES, ids=[f.__name__ for f, _ in FORGERIES])
def test_a_listed_key_cannot_publish_a_command_vllm_reads_otherwise(
    lab: Path,  # noqa: F811
    forge: Callable[[], Document],
    because: str,
    options: tuple[str, ...],
) -> None:
    refused(lab, lab_seal(lab, forge()), options, because=because)


def honest_aliases() -> Document:
    """Every arm's command in vLLM's other spellings of one card: `-tp 1 -dp 1 --pipeline_parallel_size=1`;
    the image tag is the runtime's version. (The MTP arm keeps `--speculative-config` as the runner
    writes it: the G3 check, catalog/checks/consistency.py, compares the arms' argv without that
    one spelling.)"""
    document = docker_campaign("0.17.1")
    for arm in document["arms"]:
        extra = ["-tp", "1", "-dp", "1", "--pipeline_parallel_size=1"]
        arm["config"]["argv"] += extra
        arm["config"]["launch_argv"] += extra
    return document


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_the_same_key_publishes_the_same_command_in_other_spellings(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    lab_seal(lab, honest_aliases())
    accepted(lab, options)
