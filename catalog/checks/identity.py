"""Identity is one story: the model, runtime and card a packet names agree with each other, with
the commands its servers ran and with data/.

A packet names its model (recipe variant), its runtime (engine version, image tag, digest, the
image as pinned) and its card; it also records the commands its servers ran (`argv`,
`launch_argv`) and what each server answered on GET /version. Each of these is a claim, and
together they are one story or none: a digest the pinned image does not carry, a `docker run` of
another image, a command serving another model (catalog/recipes/served_model.py: another
checkpoint, name, tokenizer or commit, in an arm's commands or a ladder's), a server that
answered another version, a vLLM older than the recipe needs, a PyTorch build for another
platform, or a device the card's entry does not name did not happen as written. (Dates are
catalog/checks/dates.py's.)

`identity_problems(packet, recipe, hardware)` returns `(field, message)` problems.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from pathlib import PurePosixPath

from catalog.model.packet import Packet
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe
from catalog.recipes.served_model import recorded_commands, served_model_problems

Problem = tuple[str, str]

_PINNED = re.compile(r"^(?P<repository>[^@\s]+)@(?P<digest>sha256:[0-9a-f]{64})$")
_VERSION = re.compile(r"^(\d+(?:\.\d+)*)")
_COMMIT = re.compile(r"[0-9a-f]{40}")
# a tag naming a release: 0.17.1, v0.17.1, 0.17.1-xpu, 0.17 (major.minor at least; what follows no digit or dot)
_TAG_VERSION = re.compile(r"^v?(?P<release>\d+\.\d+(?:\.\d+)*)(?![\d.])")
_VLLM_PROJECT = re.compile(r"(^|/)vllm/[^/]+$")
# PyTorch's local version tag names the platform it was built for: 2.13.0+cpu, 2.8.0+xpu, 2.9.0+cu128
_TORCH_PLATFORM = (("cpu", "cpu"), ("xpu", "xpu"), ("cu", "cuda"))


def identity_problems(packet: Packet, recipe: Recipe | None, hardware: Hardware | None) -> list[Problem]:
    return [
        *_model_problems(packet, recipe),
        *_commit_problems(packet),
        *_card_problems(packet, hardware),
        *_image_problems(packet),
        *_image_version_problems(packet),
        *_command_problems(packet),
        *_version_problems(packet, recipe),
    ]


def _model_problems(packet: Packet, recipe: Recipe | None) -> list[Problem]:
    """The packet's model is its recipe variant's; a synthetic model only of a synthetic recipe."""
    if recipe is None:
        return []
    problems: list[Problem] = []
    model = packet.identity.model
    if model.variant is not None and model.variant in recipe.variants:
        expected = recipe.variant_model_id(model.variant)
        if model.repo != expected:
            problems.append(
                (
                    "identity.model.repo",
                    f"is {model.repo!r}, but recipe {model.slug!r} variant {model.variant!r} serves {expected!r}",
                )
            )
    if model.synthetic != recipe.model.synthetic:
        problems.append(
            (
                "identity.model.synthetic",
                f"is {str(model.synthetic).lower()}, but recipe {model.slug!r} model.synthetic is"
                f" {str(recipe.model.synthetic).lower()}",
            )
        )
    return problems


def _commit_problems(packet: Packet) -> list[Problem]:
    """The checkpoint's revision (the hub snapshot the server loaded) and the runner's own are git
    commits: 40 hex digits, never a branch name that points elsewhere tomorrow."""
    commits = (
        ("identity.model.revision", packet.identity.model.revision),
        ("identity.host.repo_revision", packet.identity.host.repo_revision),
    )
    return [
        (field, f"is {value!r}, not a commit (40 lowercase hex digits)")
        for field, value in commits
        if value is not None and not _COMMIT.fullmatch(value)
    ]


def _card_problems(packet: Packet, hardware: Hardware | None) -> list[Problem]:
    """On the platform of its card, a device the card's entry names, within its cards."""
    problems: list[Problem] = []
    host = packet.identity.host
    if hardware is not None:
        if packet.identity.runtime.platform != hardware.platform:
            problems.append(
                (
                    "identity.runtime.platform",
                    f"is {packet.identity.runtime.platform!r}, but hardware {hardware.id!r} is a"
                    f" {hardware.platform!r} platform",
                )
            )
        if host.device_name is not None and hardware.device_names and not hardware.names_device(host.device_name):
            problems.append(
                (
                    "identity.host.device_name",
                    f"is {host.device_name!r}, but hardware {hardware.id!r} is a device named"
                    f" {' or '.join(repr(n) for n in hardware.device_names)}",
                )
            )
    for index, arm in enumerate(packet.arms):
        if arm.config.tensor_parallel_size > host.card_count:
            problems.append(
                (
                    f"arms[{index}].config.tensor_parallel_size",
                    f"tensor_parallel_size {arm.config.tensor_parallel_size} exceeds the host's card_count"
                    f" {host.card_count}",
                )
            )
    return problems


# A card's model word, as its name and device names spell it: B70, B60, H100, H200 (a letter or
# three, then its number), which no other text of a title is likely to hold.
_MODEL_WORD = re.compile(r"(?<![\w-])[A-Za-z]{1,3}\d{2,4}[A-Za-z]?(?![\w-])")


def _model_words(card: Hardware) -> set[str]:
    return {word.lower() for text in (card.name, *card.device_names) for word in _MODEL_WORD.findall(text)}


def card_claim_problems(packet: Packet, cards: Mapping[str, Hardware]) -> list[Problem]:
    """A title or arm label names no accelerator of data/hardware.yaml other than the packet's own
    card (its model word: "one B70" of a packet run on a CPU host, "H200" of a B70 run): the page
    shows them as written, over the figures of the card the packet names."""
    host = packet.identity.host.hardware
    own = cards.get(host)
    if own is None:
        return []  # a card data/ does not hold is refused as such (catalog/checks/cross_check.py)
    own_words = _model_words(own)
    others = {
        word: card
        for card in cards.values()
        if card.id != host and card.platform != "cpu"
        for word in _model_words(card) - own_words
    }
    problems: list[Problem] = []
    texts = [("title", packet.title), *((f"arms[{i}].label", arm.label) for i, arm in enumerate(packet.arms))]
    for field, text in texts:
        for word in _MODEL_WORD.findall(unicodedata.normalize("NFKC", text)):
            card = others.get(word.lower())
            if card is not None:
                problems.append((field, f"names {word!r}, the {card.name}; the packet ran on the {own.name} ({host})"))
                break
    return problems


def image_repository(image: str) -> str:
    """An image name without its tag or digest (a registry port's colon stays)."""
    name = image.split("@", 1)[0]
    slash, colon = name.rfind("/"), name.rfind(":")
    return name[:colon] if colon > slash else name


def _image_problems(packet: Packet) -> list[Problem]:
    """The image as pinned is `repository@sha256:...` of the image named, with its digest."""
    runtime = packet.identity.runtime
    if runtime.image_pinned is None:
        return []
    pinned = _PINNED.match(runtime.image_pinned)
    if pinned is None:
        return [
            ("identity.runtime.image_pinned", f"is {runtime.image_pinned!r}, not repository@sha256:<64 hex digits>")
        ]
    problems: list[Problem] = []
    if runtime.image is not None and image_repository(runtime.image) != pinned["repository"]:
        problems.append(
            (
                "identity.runtime.image_pinned",
                f"is {runtime.image_pinned!r}, an image of {pinned['repository']!r}, but identity.runtime.image is"
                f" {runtime.image!r}",
            )
        )
    if runtime.image_digest != pinned["digest"]:
        problems.append(
            (
                "identity.runtime.image_digest",
                f"is {runtime.image_digest!r}, but the image as pinned is {pinned['digest']!r}",
            )
        )
    return problems


def _image_version_problems(packet: Packet) -> list[Problem]:
    """An image of the vLLM project (Docker Hub's `vllm/` namespace: vllm/vllm-openai,
    vllm/vllm-openai-xpu, ...) tagged with a version (`0.17.1`, `v0.17.1`, `0.17.1-xpu`, `0.17`) is an
    image of that vLLM release: identity.runtime.version's. A tag that is no version (`latest`,
    `nightly-...`) says nothing; another project's image (intel/llm-scaler-vllm) numbers its tags by
    its own releases, not vLLM's."""
    runtime = packet.identity.runtime
    if runtime.image is None:
        return []
    repository = image_repository(runtime.image)
    tag = runtime.image.split("@", 1)[0][len(repository) + 1 :]
    found = _TAG_VERSION.match(tag)
    version = _version(runtime.version)
    if not _VLLM_PROJECT.search(repository) or found is None or version is None:
        return []
    release = tuple(int(part) for part in found["release"].split("."))
    if version[: len(release)] == release:
        return []
    return [
        (
            "identity.runtime.image",
            f"is {runtime.image!r}, an image of vLLM {found['release']}, but identity.runtime.version is"
            f" {runtime.version!r}",
        )
    ]


def _command_problems(packet: Packet) -> list[Problem]:
    """Each arm's commands serve the packet's model, and its launch runs the runtime named: the
    image as pinned under `docker run`, no image outside one."""
    runtime, model = packet.identity.runtime, packet.identity.model
    problems: list[Problem] = [
        (where, f"{found} (identity.model): {_shown(argv)}")
        for where, argv, portable in recorded_commands(packet)
        if argv
        for found in served_model_problems(
            argv, model.repo, model.revision, portable=portable, synthetic=model.synthetic
        )
    ]
    for i, arm in enumerate(packet.arms):
        where = f"arms[{i}].config"
        launch = arm.config.launch_argv
        if not launch:
            continue
        in_docker = PurePosixPath(launch[0]).name == "docker"
        image = runtime.image_pinned or runtime.image
        if in_docker and (image is None or image not in launch):
            problems.append(
                (
                    f"{where}.launch_argv",
                    f"runs docker, but not the image identity.runtime names ({image!r}): {_shown(launch)}"
                    if image
                    else f"runs docker, but identity.runtime names no image: {_shown(launch)}",
                )
            )
        if not in_docker and runtime.image_pinned is not None:
            problems.append(
                (
                    f"{where}.launch_argv",
                    f"runs {launch[0]!r}, no image, but identity.runtime.image_pinned is {runtime.image_pinned!r}",
                )
            )
        elif not in_docker and (runtime.image is not None or runtime.image_digest is not None):
            # a launch that is not `docker run` ran a local install: it names no image and no digest
            named = [
                f"{value!r} ({name})"
                for name, value in (("image", runtime.image), ("image_digest", runtime.image_digest))
                if value
            ]
            problems.append(
                (
                    f"{where}.launch_argv",
                    f"runs {launch[0]!r}, not `docker run`, but identity.runtime names the image {' and '.join(named)}",
                )
            )
    return problems


def _shown(argv: list[str]) -> str:
    text = " ".join(argv)
    return text if len(text) <= 160 else text[:157] + "..."


def _version(text: str) -> tuple[int, ...] | None:
    found = _VERSION.match(text)
    return tuple(int(part) for part in found.group(1).split(".")) if found else None


def _version_problems(packet: Packet, recipe: Recipe | None) -> list[Problem]:
    """Every server answered the version the runtime names, which its label shows and which is
    no older than the recipe needs; PyTorch was built for the runtime's platform."""
    runtime = packet.identity.runtime
    version = _version(runtime.version)
    if version is None:
        return []  # "unknown" (a local install whose package metadata was not found): nothing claimed
    problems: list[Problem] = []
    for i, arm in enumerate(packet.arms):
        for j, server in enumerate(arm.servers):
            answered = server.server_version
            # a build's local tag (+cpu, +xpu) may be on one side only: the release is what must agree
            if answered is not None and answered.split("+")[0] != runtime.version.split("+")[0]:
                problems.append(
                    (
                        f"arms[{i}].servers[{j}].server_version",
                        f"is {answered!r} (its GET /version), but identity.runtime.version is {runtime.version!r}",
                    )
                )
    if runtime.version not in runtime.label:
        problems.append(
            ("identity.runtime.label", f"is {runtime.label!r}, which does not show version {runtime.version!r}")
        )
    needed = _needed_version(packet, recipe)
    if needed is not None and version < (_version(needed) or ()):
        problems.append(
            (
                "identity.runtime.version",
                f"is {runtime.version!r}, older than the {needed!r} recipe {packet.identity.model.slug!r} needs",
            )
        )
    tag = (runtime.torch_version or "").partition("+")[2]
    built_for = next((platform for prefix, platform in _TORCH_PLATFORM if tag.startswith(prefix)), None)
    if built_for is not None and built_for != runtime.platform:
        problems.append(
            (
                "identity.runtime.torch_version",
                f"is {runtime.torch_version!r}, a PyTorch built for {built_for}, but the runtime ran on"
                f" {runtime.platform}",
            )
        )
    return problems


def _needed_version(packet: Packet, recipe: Recipe | None) -> str | None:
    """The variant's min_vllm_version, else the recipe's."""
    if recipe is None:
        return None
    variant = packet.identity.model.variant
    if variant is not None and variant in recipe.variants and recipe.variants[variant].min_vllm_version:
        return recipe.variants[variant].min_vllm_version
    return recipe.model.min_vllm_version
