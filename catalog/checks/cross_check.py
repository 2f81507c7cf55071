"""A packet against data/: its recipe and variant, its card, its suite and canary set.

These checks need the data files but no other packet, so they run where the packet is read (on
every core), and their verdict is kept with the packet's summary under a key that also covers
every data file's bytes (`Reference.digest`): a recipe edited since is another key.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from catalog.checks.commands import command_problems
from catalog.checks.consistency import Problem, reference_problems
from catalog.checks.evidence import canary_problems
from catalog.checks.identity import card_claim_problems
from catalog.checks.load_sweep import load_prompt_problems
from catalog.checks.workload import concurrency_oracle_problems, context_class_problems
from catalog.errors import CatalogError
from catalog.files import read_bytes
from catalog.model.packet import Packet
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe
from catalog.recipes.suite import CanarySet, Suite

DATA_PATTERNS = ("hardware.yaml", "models/*.yaml", "overlays/*.yaml", "suites/*.json")


@dataclass(frozen=True)
class Reference:
    """data/ as loaded; `unloaded` names the data files already in error (reported once, not again
    through every packet that names them); `digest` is the sha256 of every data file's bytes."""

    recipes: dict[str, Recipe]
    hardware: dict[str, Hardware]
    suites: dict[str, Suite]
    canary_sets: dict[str, CanarySet]
    unloaded: frozenset[str]
    digest: str = ""


def data_digest(data_dir: Path) -> str:
    digest = hashlib.sha256()
    for pattern in DATA_PATTERNS:
        for path in sorted(data_dir.glob(pattern)):
            try:
                content = read_bytes(path)  # refuses a FIFO, which would block
            except CatalogError:
                content = b"unreadable"  # reported by the loader, which reads it too
            digest.update(f"{path.relative_to(data_dir).as_posix()}\0".encode())
            digest.update(hashlib.sha256(content).digest())
    return digest.hexdigest()


def located(problems: list[Problem], path: Path) -> list[CatalogError]:
    return [CatalogError(message, file=path, field=where) for where, message in problems]


def cross_check(packet: Packet, path: Path, ref: Reference) -> list[CatalogError]:
    found: list[CatalogError] = []
    model = packet.identity.model
    recipe = ref.recipes.get(model.slug)
    if recipe is None:
        if model.slug not in ref.unloaded:
            found.append(
                CatalogError(
                    f"model {model.slug!r} has no recipe in data/models", file=path, field="identity.model.slug"
                )
            )
    elif model.variant is None and packet.provenance.kind == "measured":
        found.append(
            CatalogError("a measured packet names its recipe variant", file=path, field="identity.model.variant")
        )
    elif model.variant is not None and model.variant not in recipe.variants:
        found.append(
            CatalogError(
                f"recipe {model.slug!r} has no variant {model.variant!r}", file=path, field="identity.model.variant"
            )
        )
    card = packet.identity.host.hardware
    if card not in ref.hardware and "*hardware" not in ref.unloaded:
        found.append(
            CatalogError(f"hardware {card!r} is not in data/hardware.yaml", file=path, field="identity.host.hardware")
        )
    if model.slug not in ref.unloaded and "*hardware" not in ref.unloaded:
        # a recipe, overlay or hardware file in error is reported once; what the packet says of its
        # model and card is checked against them once they load
        found.extend(located(reference_problems(packet, recipe, ref.hardware.get(card)), path))
        found.extend(located(command_problems(packet, recipe, ref.hardware.get(card)), path))
    if "*hardware" not in ref.unloaded:
        found.extend(located(card_claim_problems(packet, ref.hardware), path))
    if packet.provenance.kind == "measured":
        found.extend(_workload_problems(packet, path, ref))
    return found


def _workload_problems(packet: Packet, path: Path, ref: Reference) -> list[CatalogError]:
    workload = packet.workload
    found: list[CatalogError] = []
    suite = ref.suites.get(workload.suite_id)
    if suite is None:
        if workload.suite_id not in ref.unloaded:
            found.append(
                CatalogError(f"suite {workload.suite_id!r} is not in data/suites", file=path, field="workload.suite_id")
            )
    elif workload.suite_sha256 != suite.sha256:
        found.append(
            CatalogError(
                "suite hash differs from data/suites: the suite changed", file=path, field="workload.suite_sha256"
            )
        )
    else:
        found.extend(_coverage_problems(packet, path, suite))
        found.extend(located(prompt_size_problems(packet, suite), path))
        found.extend(located(load_prompt_problems(packet, suite), path))
        found.extend(located(concurrency_oracle_problems(packet, [prompt.id for prompt in suite.prompts]), path))
        found.extend(located(context_class_problems(packet, suite), path))
    if workload.canary_set_id is None:
        return found
    canaries = ref.canary_sets.get(workload.canary_set_id)
    if canaries is None:
        if workload.canary_set_id not in ref.unloaded:
            found.append(
                CatalogError(
                    f"canary set {workload.canary_set_id!r} is not in data/suites",
                    file=path,
                    field="workload.canary_set_id",
                )
            )
    elif workload.canary_set_sha256 != canaries.sha256:
        found.append(
            CatalogError("canary set hash differs from data/suites", file=path, field="workload.canary_set_sha256")
        )
    else:
        found.extend(located(canary_problems(packet, canaries), path))
    return found


PROMPT_TOKENS_ADDED = 8
"""Tokens a tokenizer may add around a prompt's text for /v1/completions: a beginning-of-sequence
token, a leading space. Every other token spells at least one byte of the text (a byte-level BPE's
tokens are byte sequences; a SentencePiece vocabulary falls back to one token per byte)."""


def prompt_size_problems(packet: Packet, suite: Suite) -> list[Problem]:
    """No row counts more prompt tokens than its suite prompt has UTF-8 bytes (+ PROMPT_TOKENS_ADDED):
    a row's prompt size sets its prefill floor and the energy per total token, so a larger one
    flatters both. The first such row of each server."""
    sizes = {prompt.id: len(prompt.prompt.encode("utf-8")) for prompt in suite.prompts}
    problems: list[Problem] = []
    for i, arm in enumerate(packet.arms):
        for j, server in enumerate(arm.servers):
            for k, row in enumerate(server.rows):
                size = sizes.get(row.prompt_id)
                if size is not None and row.prompt_tokens > size + PROMPT_TOKENS_ADDED:
                    problems.append(
                        (
                            f"arms[{i}].servers[{j}].rows[{k}].prompt_tokens",
                            f"{row.prompt_tokens:,} prompt tokens for prompt {row.prompt_id!r}, whose text is"
                            f" {size:,} bytes of UTF-8: a tokenizer makes at most one token per byte, and adds at"
                            f" most {PROMPT_TOKENS_ADDED} of its own",
                        )
                    )
                    break  # one per server
    return problems


def _listed(items: list[str]) -> str:
    return ", ".join(items[:3]) + (f" and {len(items) - 3} more" if len(items) > 3 else "")


def _coverage_problems(packet: Packet, path: Path, suite: Suite) -> list[CatalogError]:
    """Every server that published rows ran the whole suite, each prompt once under its own class:
    a median over a chosen subset of prompts would not be the suite's figure."""
    class_of = suite.class_of()
    found: list[CatalogError] = []
    for arm_index, arm in enumerate(packet.arms):
        for server_index, server in enumerate(arm.servers):
            if server.status != "ok" or not server.rows:
                continue  # publishes nothing from rows; a gate that claims rows is caught by evidence
            where = f"arms[{arm_index}].servers[{server_index}].rows"
            ids = [row.prompt_id for row in server.rows]
            missing = sorted(set(class_of) - set(ids))
            unknown = sorted(set(ids) - set(class_of))
            repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
            misfiled = [
                r.prompt_id for r in server.rows if r.prompt_id in class_of and r.class_id != class_of[r.prompt_id]
            ]
            for problem, items in [
                (f"misses prompts of suite {suite.id!r}", missing),
                (f"has prompts that are not in suite {suite.id!r}", unknown),
                ("has prompts more than once", repeated),
                ("files prompts under another class than the suite's", misfiled),
            ]:
                if items:
                    found.append(CatalogError(f"{problem}: {_listed(items)}", file=path, field=where))
    return found
