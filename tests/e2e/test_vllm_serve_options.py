"""The facts a command states are read as the installed vLLM parses it (no server started, but the
real parser: make_arg_parser on FlexibleArgumentParser, vllm/entrypoints/launchers/cli_args.py, in
the vLLM environment's own Python), and the option list command_facts resolves abbreviations among
is the installed parser's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from catalog.recipes.command_facts import command_facts

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]

# Parse each argv as `vllm serve` does; print the fields the facts read, or "refused" where vLLM
# exits on it (an ambiguous abbreviation, a value it cannot read). The speculative config is the one
# EngineArgs.create_speculative_config (vllm/engine/arg_utils.py:2060-2099) hands SpeculativeConfig,
# refused where that raises or where it holds a key SpeculativeConfig does not have (extra="forbid").
_PARSE = """
import json, sys
from dataclasses import fields
from unittest import mock
from vllm.config.speculative import SpeculativeConfig
from vllm.engine.arg_utils import EngineArgs
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
KEYS = {field.name for field in fields(SpeculativeConfig)}
found = []
for argv in json.loads(sys.stdin.read()):
    try:
        ns = make_arg_parser(FlexibleArgumentParser()).parse_args(argv)
        with mock.patch("vllm.engine.arg_utils.SpeculativeConfig", lambda **kw: kw):
            spec = EngineArgs.from_cli_args(ns).create_speculative_config(None, None) or {}
    except (SystemExit, ValueError, AttributeError):
        found.append("refused")
        continue
    for key in ("target_model_config", "target_parallel_config"):
        spec.pop(key, None)
    if set(spec) - KEYS:
        found.append("refused")
        continue
    others = {k: v for k, v in spec.items() if k not in ("method", "num_speculative_tokens")}
    found.append({
        "kv_cache_dtype": ns.kv_cache_dtype, "max_model_len": ns.max_model_len,
        "tp": ns.tensor_parallel_size, "eager": ns.enforce_eager, "quantization": ns.quantization,
        "spec_method": spec.get("method"), "spec_depth": spec.get("num_speculative_tokens") or 0,
        "spec_config": [[k, json.dumps(v, sort_keys=True)] for k, v in sorted(others.items())],
    })
print(json.dumps(found))
"""

SPEC = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'
SPELLINGS = [
    ["--kv-cache-dtype", "fp8"],
    ["--kv-cache-dtype=fp8"],
    ["--kv_cache_dtype", "fp8_e4m3"],
    ["--kv-cache-dt", "fp8"],  # also --kv-cache-dtype-skip-layers: ambiguous
    ["--kv-cache-dtype", "fp8", "--kv-cache-dtype", "auto"],
    ["--max-model-len", "8k"],
    ["--max-model-len=8K"],
    ["--max-model", "4096"],
    ["--max_model_len", "auto"],
    ["-tp", "2"],
    ["-tp=2"],
    ["--tensor-parallel", "2"],
    ["--tensor_parallel_size=4"],
    ["--enforce-eager"],
    ["--enforce"],
    ["--enforce-eager", "--no-enforce-eager"],
    ["-q", "fp8"],
    ["-qfp8"],
    ["--quantization=gptq"],
    ["--quant", "awq"],  # also --quantization-config: ambiguous
    ["-sc", SPEC],
    ["--speculative-conf", SPEC],
    ["--speculative-config.method", "ngram", "--speculative-config.num_speculative_tokens", "5"],
    ["-sc.method=ngram", "-sc.num_speculative_tokens=2", "-sc.prompt_lookup_max=4"],
    ["--spec", SPEC],  # the spec-* flags too: ambiguous
    ["-sc", '{"method": "draft_model", "num-speculative-tokens": 3, "model": "org/draft", "quantization": "fp8"}'],
    ["--spec-method", "draft_model", "--spec-model", "org/draft", "--spec-tokens", "3"],
    ["-sc.method=mtp", "-sc.num_speculative_tokens", "2", "-sc.revision", "abc", "-sc.draft_tensor_parallel_size=1"],
    ["-sc", '{"method": "mtp", "num_speculative_tokens": 2}', "--spec-model", "org/draft"],
    ["-sc", '{"method": "mtp", "model": "a", "num_speculative_tokens": 2}', "--spec-model", "b"],  # both: refused
    ["-sc", '{"method": "mtp", "num_speculative_tokens": 2, "draft": "org/draft"}'],  # no such key
    ["-sc", "[2]"],
    ["-sc", "None"],
]


def test_the_recorded_option_list_is_the_installed_parsers(vllm_python: Path) -> None:
    written = subprocess.run(
        [str(vllm_python), str(REPO / "scripts" / "vllm_serve_options.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    recorded = (REPO / "catalog" / "recipes" / "vllm_serve_options.py").read_text(encoding="utf-8")
    assert written == recorded, "run scripts/vllm_serve_options.py catalog/recipes/vllm_serve_options.py"


def test_command_facts_read_each_spelling_as_vllm_parses_it(vllm_python: Path) -> None:
    parsed = json.loads(
        subprocess.run(
            [str(vllm_python), "-c", _PARSE],
            input=json.dumps([["m", *flags] for flags in SPELLINGS]),
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    assert "refused" in parsed and any(p != "refused" for p in parsed)  # the list holds both kinds
    for flags, vllm in zip(SPELLINGS, parsed, strict=True):
        facts = command_facts(["vllm", "serve", "m", *flags])
        if vllm == "refused":
            assert facts.unread, flags  # named as what the catalog cannot read, never guessed
            continue
        assert not facts.unread, flags
        length = vllm["max_model_len"]
        read = {
            "kv_cache_dtype": facts.kv_cache_dtype,
            "max_model_len": facts.max_model_len,
            "tp": facts.tp,
            "eager": facts.eager,
            "quantization": facts.quantization,
            "spec_method": facts.spec_method,
            "spec_depth": facts.spec_depth,
            "spec_config": [list(pair) for pair in facts.spec_config or ()],
        }
        expected = {**vllm, "max_model_len": None if length in (None, -1) else length, "eager": bool(vllm["eager"])}
        assert read == expected, flags
