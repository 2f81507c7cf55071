"""A listed key cannot publish a lie about the command it ran or the context it held
(tests/adversarial/test_listed_key.py's harness): a lab seals, with its listed key, a campaign whose
recorded `vllm serve` command, or whose context, says what no such server measured, and
`python -m catalog.verify` and `python -m builder build` refuse each, published and with
`--allow-unsigned`, by an error line naming the packet and the field; the same lab's honest campaign,
its command stating what its config leaves unsaid, is accepted by both.

- every arm's recorded command adds `--quantization fp8` under a BF16 identity: FP8 weights'
  speed under a BF16 label (catalog/recipes/command_facts.py: a BF16 checkpoint allows no method);
- every arm's config says kv_cache_dtype fp8 while its recorded command sets no --kv-cache-dtype
  (vLLM's "auto": a 16-bit cache), which would let physics count 1 byte per KV value;
- every arm's recorded command sizes the server for 64 tokens (config.max_model_len null) while
  its rows hold 200-310 prompt + 120 completion tokens (catalog/checks/workload.py);
- a context point 10,000,000 tokens deep on Qwen3.5-9B, whose context length in data/models is
  262,144, on an arm that records no max_model_len;
- every arm's recorded command serves the W4A16 checkpoint under the BF16 model's name
  (`--served-model-name`), which only checked that the repository appeared somewhere;
- a concurrency ladder whose own server served Qwen3.5-4B (a ladder's command named no model check);
- every arm's recorded command edits the model's config (`--hf-overrides '{"num_hidden_layers": 8}'`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.adversarial.test_forgery import MODES, refused
from tests.adversarial.test_listed_key import accepted, campaign, lab, lab_seal  # noqa: F401 (lab: fixture)

Document = dict[str, Any]


def argv_quantization_fp8(document: Document) -> None:
    """Identity BF16, every arm's recorded command `--quantization fp8` (online FP8 weights)."""
    for arm in document["arms"]:
        arm["config"]["argv"] += ["--quantization", "fp8"]


def kv_fp8_config_only(document: Document) -> None:
    """Every arm's config kv_cache_dtype fp8; its recorded command sets no --kv-cache-dtype."""
    for arm in document["arms"]:
        arm["config"]["kv_cache_dtype"] = "fp8"


def argv_max_model_len_small(document: Document) -> None:
    """Every arm's recorded command `--max-model-len 64`, config.max_model_len left null."""
    for arm in document["arms"]:
        arm["config"]["argv"] += ["--max-model-len", "64"]


def context_beyond_model(document: Document) -> None:
    """A context point 10,000,000 tokens deep: 38x Qwen3.5-9B's 262,144 (no max_model_len set)."""
    point = {
        "depth_tokens": 10_000_000,
        "content_class": "prose",
        "decode_tok_s": 45.0,
        "ttft_ms": 40_000_000.0,
        "identical_to_oracle": True,
    }
    document["ladders"] = [{"arm": "tp1-mtp0", "kind": "context", "context": [point]}]


def served_as_another_model(document: Document) -> None:
    """Every arm's `vllm serve` loads the W4A16 checkpoint and answers as the identity's BF16 repo."""
    for arm in document["arms"]:
        argv = arm["config"]["argv"]
        arm["config"]["argv"] = [
            "RedHatAI/Qwen3.5-9B-quantized.w4a16" if token == "Qwen/Qwen3.5-9B" else token for token in argv
        ] + ["--served-model-name", "Qwen/Qwen3.5-9B"]


def ladder_of_another_model(document: Document) -> None:
    """The oracle arm's concurrency ladder recorded a server of Qwen3.5-4B (no 9B token at all)."""
    point = {"users": 2, "completion_tokens": 240, "wall_s": 3.5, "identical_to_oracle": None}
    argv = ["vllm", "serve", "Qwen/Qwen3.5-4B", "--no-enable-prefix-caching", "--max-num-seqs", "64"]
    document["ladders"] = [{"arm": "tp1-mtp0", "kind": "concurrency", "concurrency": [point], "argv": argv}]


def config_edited(document: Document) -> None:
    """Every arm's recorded command serves the 9B with 8 of its layers (an edited config)."""
    for arm in document["arms"]:
        arm["config"]["argv"] += ["--hf-overrides", '{"num_hidden_layers": 8}']


def honest_command(document: Document) -> None:
    """The control: every arm's recorded command states `--kv-cache-dtype auto` (its config "auto")
    and `--max-model-len 8192` (its config null): rows of at most 430 tokens fit both the server and
    the model."""
    for arm in document["arms"]:
        arm["config"]["argv"] += ["--kv-cache-dtype", "auto", "--max-model-len", "8192"]
        arm["config"]["kv_cache_dtype"] = "auto"


# (the forgery, what the error line holds besides the packet's id: the field, or the flag it names)
FORGERIES: list[tuple[Callable[[Document], None], str]] = [
    (argv_quantization_fp8, "(identity.model.quantization)"),
    (kv_fp8_config_only, "(config.kv_cache_dtype)"),
    (argv_max_model_len_small, "--max-model-len 64 (config.argv"),
    (context_beyond_model, "ladders[0].context[0].depth_tokens"),
    (served_as_another_model, "loads 'RedHatAI/Qwen3.5-9B-quantized.w4a16'"),
    (ladder_of_another_model, "ladders[0].argv"),
    (config_edited, "--hf-overrides"),
]


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize(("edit", "because"), FORGERIES, ids=[f.__name__ for f, _ in FORGERIES])
def test_a_listed_key_cannot_publish_another_command(
    lab: Path,  # noqa: F811
    edit: Callable[[Document], None],
    because: str,
    options: tuple[str, ...],
) -> None:
    document = campaign()
    edit(document)
    refused(lab, lab_seal(lab, document), options, because=because)


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_the_same_key_publishes_a_command_that_says_more(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    document = campaign()
    honest_command(document)
    lab_seal(lab, document)
    accepted(lab, options)
