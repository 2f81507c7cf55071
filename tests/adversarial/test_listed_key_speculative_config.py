"""A listed key cannot show a command beside a result that drafted with another speculative
configuration than the one the page names (tests/adversarial/test_listed_key.py's harness): a lab
seals, with its listed key, a campaign whose MTP arm is the recipe's MTP at its depth by every
field the arm records (spec_method, spec_depth), while its recorded command runs, in vLLM 0.32's
`--speculative-config` (vllm/config/speculative.py:386-608), a draft of another model, a quantized
draft, another revision of it, another draft TP; or whose launch command drafts otherwise than its
`argv`; or the CPU demo's n-gram arm with another window than its recipe's. `python -m
catalog.verify` and `python -m builder build` refuse each, published and with `--allow-unsigned`,
by an error line naming the packet and the command's field; the same lab's honest campaign, its
speculative config spelled `--spec-method mtp --spec-tokens 2` and its launch command `-sc`, is
accepted by both.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testkit.samples import SPEC_ARM
from tests.adversarial.test_forgery import MODES, refused
from tests.adversarial.test_listed_key import DEMO, accepted, base, campaign, lab, lab_seal  # noqa: F401 (lab: fixture)
from tests.adversarial.test_listed_key_round2_commands import docker_campaign

Document = dict[str, Any]


def _spec_arm(document: Document) -> dict[str, Any]:
    return next(arm["config"] for arm in document["arms"] if arm["id"] == SPEC_ARM)


def _respec(argv: list[str], **keys: object) -> None:
    """The command's --speculative-config with `keys` added (or changed)."""
    at = argv.index("--speculative-config") + 1
    argv[at] = json.dumps({**json.loads(argv[at]), **keys})


def drafting(**keys: object) -> Callable[[Path], Document]:
    """The MTP arm's recorded command (argv) drafting with `keys` set in its speculative config."""

    def forge(_: Path) -> Document:
        document = campaign()
        _respec(_spec_arm(document)["argv"], **keys)
        return document

    forge.__name__ = "drafting_" + "_".join(keys)
    return forge


def launched_with_another_draft(_: Path) -> Document:
    """The portable argv honest, the docker launch the servers ran drafting with another model."""
    document = docker_campaign("0.17.1")
    _respec(_spec_arm(document)["launch_argv"], model="org/other-draft")
    return document


def demo_with_another_window(root: Path) -> Document:
    """The CPU demo's n-gram arm with prompt_lookup_max 1 (its recipe's: 3), argv and launch alike."""
    document = base(root, DEMO)
    for arm in document["arms"]:
        for field in ("argv", "launch_argv"):
            if "--speculative-config" in arm["config"][field]:
                _respec(arm["config"][field], prompt_lookup_max=1, prompt_lookup_min=1)
    return document


def role_hiding_the_draft(_: Path) -> Document:
    """A reviewer's forgery: every command ends in `--response-role "-sc None"`, one token that
    vLLM reads as the role (argparse: a token with a space is a value), while a reader that split
    it would see a last `-sc None` wiping the MTP arm's draft of another model."""
    document = campaign()
    _respec(_spec_arm(document)["argv"], model="org/other-draft")
    for arm in document["arms"]:
        for field in ("argv", "launch_argv"):
            if arm["config"].get(field):
                arm["config"][field] += ["--response-role", "-sc None"]
    return document


def config_file_as_a_dotted_value(_: Path) -> Document:
    """A reviewer's forgery: `--compilation-config.mode --config evil.yaml 3` in every command;
    vLLM reads evil.yaml's flags (any draft, any quantization) before the dotted flag takes a value
    (vllm/utils/argparse_utils.py:334)."""
    document = campaign()
    for arm in document["arms"]:
        for field in ("argv", "launch_argv"):
            if arm["config"].get(field):
                arm["config"][field] += ["--compilation-config.mode", "--config", "evil.yaml", "3"]
    return document


# (the forgery, what the error line holds besides the packet's id: the field and the key)
FORGERIES: list[tuple[Callable[[Path], Document], str]] = [
    (drafting(model="org/other-draft"), "arms[1].config.argv: arm tp1-mtp2: speculative config: `make measure"),
    (drafting(quantization="fp8"), 'the arm measured with quantization "fp8"'),
    (drafting(revision="0" * 40), "the arm measured with revision"),
    (drafting(draft_tensor_parallel_size=1), "the arm measured with draft_tensor_parallel_size 1"),
    (drafting(draft_model="org/other-draft"), "'draft_model' in its speculative config"),
    (launched_with_another_draft, 'config.launch_argv) sets model "org/other-draft" in its speculative config'),
    (demo_with_another_window, "the arm measured with prompt_lookup_max 1"),
    (role_hiding_the_draft, 'sets no model in its speculative config; the arm measured with model "org/other-draft"'),
    (config_file_as_a_dotted_value, "reads its flags from --config, a file the packet does not carry"),
]


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize(("forge", "because"), FORGERIES, ids=[f.__name__ for f, _ in FORGERIES])
def test_a_listed_key_cannot_show_a_command_that_drafted_otherwise(
    lab: Path,  # noqa: F811
    forge: Callable[[Path], Document],
    because: str,
    options: tuple[str, ...],
) -> None:
    refused(lab, lab_seal(lab, forge(lab)), options, because=because)


def honest_spellings() -> Document:
    """The recipe's MTP at depth 2 as `--spec-method mtp --spec-tokens 2` (argv) and `-sc` (launch)."""
    document = docker_campaign("0.17.1")
    config = _spec_arm(document)
    at = config["argv"].index("--speculative-config")
    config["argv"][at : at + 2] = ["--spec-method", "mtp", "--spec-tokens", "2"]
    config["launch_argv"][config["launch_argv"].index("--speculative-config")] = "-sc"
    return document


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_the_same_key_publishes_the_recipes_speculative_config_in_other_spellings(
    lab: Path,  # noqa: F811
    options: tuple[str, ...],
) -> None:
    lab_seal(lab, honest_spellings())
    accepted(lab, options)
