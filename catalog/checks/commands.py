"""A command shown beside a result is evidence too: its facts must be the arm's.

Every command the site shows beside an arm (catalog/recipes/shown.py) is held to what the arm
recorded (catalog/recipes/command_facts.py): graph capture or eager, the image, the environment
switches, the speculative method and depth, the card count, the context length, the KV cache dtype
(a command without `--kv-cache-dtype` runs vLLM's "auto", the model's own dtype, whatever the
config says) and the weights: a `--quantization` must be a method that serves the packet's
quantization scheme (none for BF16), or the servers ran other weights than the packet names. The
rest of the speculative config (a draft model, its quantization, revision or TP, an n-gram window)
an arm records in its command alone (`argv`, else `launch_argv`): every other command of the arm
and every command shown beside it must set the same keys to the same values, key for key.

- A recorded command (`launch_argv`, `argv`) must agree with its own arm in every fact; so must the
  command a ladder's own server recorded (`ladders[i].argv`), which differs only in `--max-num-seqs`.
- An overlay configuration that lists a packet says it reproduces that packet's arms: its command
  must agree too. The one difference allowed is an image no one can pull again (the source's
  patched build): the page then says which image the source ran, and `make reproduce` refuses.
- A `make measure` line measures the packet's configuration afresh: every fact but the image must
  be the measured arm's (it pulls the recipe's image as it is now; the page says which, beside the
  line, when that is not the image the packet ran). So a measured arm's command runs the speculative
  config its overlay configuration, else the recipe's speculative feature, declares, at the arm's
  depth. For an imported arm, where the page lists each difference, only a configuration's line is
  held to it.

A closest command composed for an imported arm without a configuration is not a claim: the page
lists, line by line, how it differs from what the source measured (ShownCommand.differences).
Runs where the packet is read against data/ (catalog/checks/cross_check.py), so `make verify` and
every build fail naming the packet file, the arm and the field: the recorded field a composed command
contradicts (`arms[i].config.graph_capture`, `identity.runtime` for the image,
`identity.model.quantization` for the weights, `arms[i].config.argv` for the speculative config),
or, for a recorded command that contradicts its own arm, `arms[i].config` with both fields named in
the message.

The context a packet's rows and ladders may reach is catalog/checks/workload.py's (the server's
max_model_len, and the model's own context length as the recipe knows it); the second needs the
recipe, so it is run from here (`model_context_problems`), where every packet meets its recipe.
"""

from __future__ import annotations

from dataclasses import replace

from catalog.checks.consistency import Problem
from catalog.checks.workload import model_context_problems
from catalog.model.packet import Arm, Packet
from catalog.recipes.command_facts import HF_OVERRIDES_FLAG, command_facts, option_value
from catalog.recipes.compose import split_joined
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe
from catalog.recipes.recorded import Disagreement, disagreements, recorded_facts
from catalog.recipes.served_model import recorded_commands, same_overrides, served_model
from catalog.recipes.shown import (
    arm_configuration,
    composed_for_arm,
    measure_line_differences,
    measure_lines,
    unrunnable_image,
)


def _where(index: int, found: Disagreement) -> str:
    """The recorded field the fact lives in: the arm's config, or the packet's own (its runtime for
    the image, its model's quantization for the weights)."""
    return found.packet_field or f"arms[{index}].config.{found.config_field}"


def _problem(index: int, arm: Arm, what: str, found: Disagreement) -> Problem:
    return (_where(index, found), f"arm {arm.id}: {found.field}: {found.words(what)}")


_COMMANDS = {"launch_argv": "launch command", "argv": "vllm serve command"}


def _recorded_problem(index: int, arm: Arm, field: str, found: Disagreement) -> Problem:
    """A recorded command contradicting its own arm: both sides are the arm's record, so the field
    named is the arm's config, and the message names the two fields that disagree."""
    where = f" ({found.where})" if found.where not in found.recorded else ""
    words = f"its recorded {_COMMANDS[field]} (config.{field}) {found.shown}; the arm records {found.recorded}{where}"
    return (f"arms[{index}].config", f"arm {arm.id}: {found.field}: {words}")


def _ladder_problems(packet: Packet, index: int, arm: Arm) -> list[Problem]:
    """A ladder ran on its own server, started with the arm's command and room for many sequences
    (runner/plan.py ladder_command): the command it records (`ladders[i].argv`) must state every
    fact the arm recorded. Its `--max-num-seqs` is no such fact; a ladder recording no command
    (packets sealed before it was recorded) is not held to one."""
    recorded = replace(recorded_facts(packet, arm), image=None)  # a vllm serve command names no image
    problems: list[Problem] = []
    for at, ladder in enumerate(packet.ladders):
        if ladder.arm != arm.id or not ladder.argv:
            continue
        facts = command_facts(ladder.argv, arm.config.env)  # the ladder server ran with the arm's environment
        for found in disagreements(facts, recorded, graph_label=arm.config.graph_capture):
            where = f" ({found.where})" if found.where not in found.recorded else ""
            words = f"its recorded vllm serve command (ladders[{at}].argv) {found.shown}; the arm records "
            problems.append(
                (
                    f"ladders[{at}].argv",
                    f"arm {arm.id}, {ladder.kind} ladder: {found.field}: {words}{found.recorded}{where}",
                )
            )
    return problems


def command_problems(packet: Packet, recipe: Recipe | None, hardware: Hardware | None) -> list[Problem]:
    problems: list[Problem] = model_context_problems(packet, recipe)
    for index, arm in enumerate(packet.arms):
        recorded = recorded_facts(packet, arm)
        label = arm.config.graph_capture
        config = arm.config
        if config.launch_argv:
            env = {} if config.launch_argv[0] == "docker" else config.env
            for found in disagreements(command_facts(config.launch_argv, env), recorded, graph_label=label):
                problems.append(_recorded_problem(index, arm, "launch_argv", found))
        if config.argv:
            local = replace(recorded, image=None)  # a vllm serve command names no image
            for found in disagreements(command_facts(config.argv, config.env), local, graph_label=label):
                problems.append(_recorded_problem(index, arm, "argv", found))
        problems.extend(_ladder_problems(packet, index, arm))
        if recipe is None or packet.identity.model.variant not in recipe.variants:
            continue
        name = arm_configuration(recipe, packet, arm) if not (config.launch_argv or config.argv) else None
        if name is not None:
            command, _ = composed_for_arm(recipe, packet, arm, hardware)
            docker = command.docker_argv() if packet.identity.runtime.image else None
            facts = command_facts(docker, command.env) if docker else command_facts(command.argv(), command.env)
            allowed = {"image"} if unrunnable_image(packet) is not None else set()
            for found in disagreements(facts, recorded, graph_label=label):
                if found.field not in allowed:
                    problems.append(_problem(index, arm, f"configuration {name}'s command", found))
    problems.extend(_measure_line_problems(packet, recipe, hardware))
    return problems + _overrides_problems(packet, recipe)


def _overrides_problems(packet: Packet, recipe: Recipe | None) -> list[Problem]:
    """A recorded command's `--hf-overrides` edits the model's config (`{"num_hidden_layers": 8}`
    serves another model under the packet's name): it must be one a feature of the recipe adds
    (YaRN's rope scaling), which the recipe page shows and explains."""
    if recipe is None:
        return []
    known = [
        value
        for feature in recipe.features.values()
        if (value := option_value(split_joined(feature.args), HF_OVERRIDES_FLAG))
    ]
    problems: list[Problem] = []
    for where, argv, _ in recorded_commands(packet):
        overrides = served_model(argv).hf_overrides if argv else None
        if overrides is not None and not any(same_overrides(overrides, value) for value in known):
            problems.append(
                (
                    where,
                    f"sets {HF_OVERRIDES_FLAG} {overrides}, which no feature of recipe {recipe.meta.slug!r} adds:"
                    " a model config edited so serves another model than the packet names",
                )
            )
    return problems


def _measure_line_problems(packet: Packet, recipe: Recipe | None, hardware: Hardware | None) -> list[Problem]:
    if recipe is None or packet.identity.model.variant not in recipe.variants:
        return []
    measured = packet.provenance.kind == "measured"
    index_of = {arm.id: i for i, arm in enumerate(packet.arms)}
    problems: list[Problem] = []
    for line in measure_lines(packet, recipe):
        if not measured and line.configuration is None:
            continue  # an imported arm's page lists how the recipe's command differs from the source's
        for arm, found in measure_line_differences(recipe, packet, line, hardware):
            if found.field == "image":
                continue  # a fresh measurement pulls the recipe's image now: the page says which, beside the line
            problems.append(_problem(index_of[arm.id], arm, f"`{line.text}`", found))
    return problems
