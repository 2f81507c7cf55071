"""Which model a recorded command serves, read as vLLM 0.32 reads it.

A packet names one checkpoint (`identity.model.repo`, at `identity.model.revision`); its commands
must load that checkpoint and nothing else in its place. vLLM takes the model from `vllm serve`'s
positional, which replaces `--model` (vllm/entrypoints/cli/serve.py:56-57), else from `--model`
(the runner's local launcher, `python -m ... --model DIR --served-model-name REPO`:
runner/runtime.py), and lets other options change what it loads: another tokenizer, another commit
of the weights, tokenizer or code (`--revision`, `--tokenizer-revision`, `--code-revision`), and an
edited config (`--hf-overrides`), all in ModelConfig's group of vllm/engine/arg_utils.py:944-1016.
The options are read with every spelling argparse accepts (`vllm_options`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from catalog.model.packet import Packet
from catalog.recipes.command_facts import (
    HF_OVERRIDES_FLAG,
    MODEL_FLAG,
    REVISION_FLAGS,
    SERVED_NAME_FLAG,
    TOKENIZER_FLAG,
    vllm_options,
)
from catalog.recipes.docker_run import DockerRun


@dataclass(frozen=True)
class ServedModel:
    """What a command's server loads: the model (None where the command names none vLLM would
    read), the name it answers to, its tokenizer, the commits it asks for and its config edits."""

    model: str | None
    served_name: str | None
    tokenizer: str | None
    revisions: tuple[tuple[str, str], ...]
    hf_overrides: str | None


def served_model(argv: Sequence[str]) -> ServedModel:
    """What `argv`'s server loads. Read once a process per command, as `command_facts` is: a
    packet's checks read each of its commands twice, and a family's packets record the same few."""
    return _served(tuple(argv))


@lru_cache(maxsize=1024)
def _served(argv: tuple[str, ...]) -> ServedModel:
    tokens = list(argv)
    positional: str | None = None
    run = DockerRun.parse(tokens)
    if run is not None:  # the vLLM images' entrypoint is `vllm serve`: IMAGE [MODEL] ARGS
        args = [run.model, *run.args] if run.model is not None else run.args
        positional = run.model if run.model is not None and not run.model.startswith("-") else None
    elif len(tokens) > 2 and tokens[1] == "serve":
        args = tokens[2:]
        positional = tokens[2] if not tokens[2].startswith("-") else None
    else:
        args = tokens[tokens.index("-m") + 2 :] if "-m" in tokens else tokens
    values: dict[str, str] = {}
    for flag, value in vllm_options(args):
        if value is not None:
            values[flag] = value  # the last one holds, as in argparse
    return ServedModel(
        model=positional or values.get(MODEL_FLAG),
        served_name=values.get(SERVED_NAME_FLAG),
        tokenizer=values.get(TOKENIZER_FLAG),
        revisions=tuple((flag, values[flag]) for flag in REVISION_FLAGS if flag in values),
        hf_overrides=values.get(HF_OVERRIDES_FLAG),
    )


def recorded_commands(packet: Packet) -> list[tuple[str, list[str], bool]]:
    """Every command a packet records its servers ran, with its field and whether it is the
    portable form a reader runs (an arm's `argv`, a ladder's) or a launch (`launch_argv`)."""
    commands = [
        (f"arms[{i}].config.{field}", argv, field == "argv")
        for i, arm in enumerate(packet.arms)
        for field, argv in (("argv", arm.config.argv), ("launch_argv", arm.config.launch_argv))
    ]
    return commands + [(f"ladders[{i}].argv", ladder.argv, True) for i, ladder in enumerate(packet.ladders)]


def served_model_problems(
    argv: Sequence[str], repo: str, revision: str | None, *, portable: bool, synthetic: bool = False
) -> list[str]:
    """How a recorded command serves another model than `repo` at `revision`. `portable`: the form
    a reader runs (`vllm serve REPO ...`: config.argv, a ladder's argv), which names the repository
    itself; a launch command (config.launch_argv) may load a local folder of it, served as `repo`
    (a synthetic model is only ever a folder)."""
    found = served_model(argv)
    problems: list[str] = []
    if found.model is None:
        problems.append(f"names no model vLLM would load (the packet's is {repo!r})")
    elif found.model != repo and (portable or not _is_folder(found.model, synthetic)):
        problems.append(f"loads {found.model!r}, not the packet's model {repo!r}")
    elif found.model != repo and not _folder_of(found.model, repo):
        problems.append(f"loads {found.model!r}, the hub cache's folder of another repository than {repo!r}")
    if found.served_name is not None and found.served_name != repo:
        problems.append(f"serves its model as {found.served_name!r}, not as {repo!r}")
    if found.tokenizer is not None and found.tokenizer not in (repo, found.model):
        problems.append(f"tokenizes with {found.tokenizer!r}, not the model's own tokenizer")
    for flag, asked in found.revisions:
        if asked != revision:
            recorded = f"is {revision!r}" if revision else "records none"
            problems.append(f"asks for {flag} {asked}, but identity.model.revision {recorded}")
    return problems


def _is_folder(model: str, synthetic: bool) -> bool:
    """A local folder as the runner's launchers pass one: absolute (a container's mount), under the
    home or repository markers runner/identity.py writes, or relative but not a Hugging Face id
    (`org/name`); a synthetic model's `models/demo` too."""
    path = Path(model)
    marked = model.startswith(("~", "<repo>", "."))
    return path.is_absolute() or marked or len(path.parts) != 2 or synthetic


def _folder_of(folder: str, repo: str) -> bool:
    """A hub cache folder (`.../models--ORG--NAME/snapshots/REV`) is the repository it is named for."""
    cached = [part for part in Path(folder).parts if part.startswith("models--")]
    return all(part == "models--" + repo.replace("/", "--") for part in cached)


def same_overrides(a: str, b: str) -> bool:
    """Two `--hf-overrides` values that set the same config (JSON, whatever its spacing)."""
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return a == b
