"""Write catalog/recipes/vllm_serve_options.py: every option string of `vllm serve`, as the installed
vLLM's own parser holds them (vllm/entrypoints/launchers/cli_args.py: make_arg_parser on a
FlexibleArgumentParser, the parser `vllm serve` parses with), and every key its
`--speculative-config` takes (the fields of vllm/config/speculative.py's SpeculativeConfig, which
forbids any other). Run with the vLLM environment's Python: `.venv-vllm/bin/python
scripts/vllm_serve_options.py [OUT]` (no OUT: standard output); tests/e2e/test_vllm_serve_options.py
holds the committed module to what it writes."""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path

from vllm import __version__
from vllm.config.speculative import SpeculativeConfig
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser


def module_text() -> str:
    parser = make_arg_parser(FlexibleArgumentParser())
    options = sorted({option for action in parser._actions for option in action.option_strings})
    keys = sorted(field.name for field in fields(SpeculativeConfig))
    lines = [
        f'"""Every option string of `vllm serve` {__version__}, written by scripts/vllm_serve_options.py from the',
        "installed parser (do not edit; tests/e2e/test_vllm_serve_options.py checks it). argparse resolves",
        "an abbreviated or single-dash token among all of them (catalog/recipes/command_facts.py). And every",
        "key a --speculative-config takes: SpeculativeConfig's fields (vllm/config/speculative.py), a",
        'pydantic dataclass that refuses any other (vllm/config/utils.py, `config`: extra="forbid")."""',
        "",
        "OPTIONS = frozenset(",
        "    {",
        *(f'        "{option}",' for option in options),
        "    }",
        ")",
        f"ALLOW_ABBREV = {parser.allow_abbrev!r}",
        "SPECULATIVE_CONFIG_KEYS = frozenset(",
        "    {",
        *(f'        "{key}",' for key in keys),
        "    }",
        ")",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    text = module_text()
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
