"""catalog.checks.identity: image tag, digest, pinned image, launch command, each server's
/version, the runtime's version and PyTorch build, and the device tell one story. One test per
refusal (the field and both values named); a docker campaign as the runner records one accepted."""

from __future__ import annotations

from typing import Any

import pytest

from catalog.checks.identity import identity_problems, image_repository
from catalog.model.packet import Packet
from tests.catalog.factories import catalog_recipe
from tests.catalog.test_consistency import B70, Draft, edited

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
IMAGE = "vllm/vllm-openai-xpu:0.17.1"
PINNED = f"vllm/vllm-openai-xpu@{DIGEST}"


def identity(packet: Packet) -> dict[str, str]:
    return dict(identity_problems(packet, catalog_recipe("qwen3.5-9b"), B70))


def docker_campaign(d: Draft, **runtime: Any) -> None:
    """The runtime and launch command the runner records for a docker campaign."""
    d["identity"]["runtime"].update({"image": IMAGE, "image_digest": DIGEST, "image_pinned": PINNED, **runtime})
    d["identity"]["host"]["device_name"] = "Intel(R) Arc(TM) Pro B70 Graphics"
    for arm in d["arms"]:
        launch = ["docker", "run", "--rm", "--name", "llmcat-x", "--device", "/dev/dri", PINNED, "Qwen/Qwen3.5-9B"]
        arm["config"]["launch_argv"] = launch + arm["config"]["argv"][3:]
        for server in arm["servers"]:
            server["server_version"] = d["identity"]["runtime"]["version"]


def campaign(change: Any = None, **runtime: Any) -> Packet:
    def both(d: Draft) -> None:
        docker_campaign(d, **runtime)
        if change is not None:
            change(d)

    return edited(both)


def test_a_docker_campaign_as_the_runner_records_it() -> None:
    assert identity(campaign()) == {}


@pytest.mark.parametrize(
    ("image", "repository"),
    [("vllm/vllm-openai-xpu:latest", "vllm/vllm-openai-xpu"), ("localhost:5000/vllm:1", "localhost:5000/vllm")],
)
def test_an_images_repository(image: str, repository: str) -> None:
    assert image_repository(image) == repository


def test_a_pinned_image_of_another_repository() -> None:
    problems = identity(campaign(image="vllm/vllm-openai:latest"))
    assert problems["identity.runtime.image_pinned"] == (
        f"is {PINNED!r}, an image of 'vllm/vllm-openai-xpu', but identity.runtime.image is 'vllm/vllm-openai:latest'"
    )


def test_a_digest_the_pinned_image_does_not_carry() -> None:
    problems = identity(campaign(image_digest=OTHER))
    assert problems == {"identity.runtime.image_digest": f"is {OTHER!r}, but the image as pinned is {DIGEST!r}"}


def test_a_pinned_image_that_is_no_digest() -> None:
    problems = identity(campaign(lambda d: d["identity"]["runtime"].update(image_pinned=IMAGE)))
    assert problems["identity.runtime.image_pinned"] == f"is {IMAGE!r}, not repository@sha256:<64 hex digits>"


def test_docker_run_of_another_image() -> None:
    def other(d: Draft) -> None:
        d["arms"][0]["config"]["launch_argv"][7] = f"vllm/vllm-openai-xpu@{OTHER}"

    problems = identity(campaign(other))
    assert set(problems) == {"arms[0].config.launch_argv"}
    assert problems["arms[0].config.launch_argv"].startswith(
        f"runs docker, but not the image identity.runtime names ({PINNED!r}): docker run --rm"
    )


def test_a_local_launch_under_a_pinned_image() -> None:
    def local(d: Draft) -> None:
        d["arms"][1]["config"]["launch_argv"] = [".venv-vllm/bin/python", "-m", "vllm", "--model", "Qwen/Qwen3.5-9B"]

    assert identity(campaign(local)) == {
        "arms[1].config.launch_argv": f"runs '.venv-vllm/bin/python', no image, but identity.runtime.image_pinned is"
        f" {PINNED!r}"
    }


def test_a_command_that_serves_another_model() -> None:
    def other_model(d: Draft) -> None:
        d["arms"][0]["config"]["argv"][2] = "Qwen/Qwen3.5-4B"

    problems = identity(campaign(other_model))
    assert problems == {
        "arms[0].config.argv": "loads 'Qwen/Qwen3.5-4B', not the packet's model 'Qwen/Qwen3.5-9B' (identity.model):"
        " vllm serve Qwen/Qwen3.5-4B --no-enable-prefix-caching --max-num-seqs 1"
    }


def test_a_server_that_answered_another_version() -> None:
    problems = identity(campaign(lambda d: d["arms"][1]["servers"][0].update(server_version="0.11.0")))
    assert problems == {
        "arms[1].servers[0].server_version": "is '0.11.0' (its GET /version), but identity.runtime.version is '0.17.1'"
    }


def test_a_servers_version_with_a_local_build_tag_is_the_same_release() -> None:
    """vLLM's own __version__ may carry the build's tag (+cpu) where package metadata does not."""
    assert identity(campaign(lambda d: d["arms"][1]["servers"][0].update(server_version="0.17.1+xpu"))) == {}
    unknown = edited(lambda d: d["identity"]["runtime"].update(version="unknown", label="vLLM"))
    assert identity(unknown) == {}  # a local install whose version was not found claims none


def test_a_label_that_shows_another_version() -> None:
    problems = identity(campaign(lambda d: d["identity"]["runtime"].update(label="vLLM 0.32.0 XPU")))
    assert problems == {"identity.runtime.label": "is 'vLLM 0.32.0 XPU', which does not show version '0.17.1'"}


def test_a_vllm_older_than_the_recipe_needs() -> None:
    problems = identity(edited(lambda d: d["identity"]["runtime"].update(version="0.10.2", label="vLLM 0.10.2")))
    assert problems == {"identity.runtime.version": "is '0.10.2', older than the '0.17.0' recipe 'qwen3.5-9b' needs"}


def test_a_pytorch_built_for_another_platform() -> None:
    problems = identity(edited(lambda d: d["identity"]["runtime"].update(torch_version="2.9.0+cu128")))
    assert problems == {
        "identity.runtime.torch_version": "is '2.9.0+cu128', a PyTorch built for cuda, but the runtime ran on xpu"
    }
    assert identity(edited(lambda d: d["identity"]["runtime"].update(torch_version="2.9.0+xpu"))) == {}


def test_a_device_the_card_is_not() -> None:
    """The CPU demo's host device relabelled as an Arc Pro B70 campaign."""
    problems = identity(edited(lambda d: d["identity"]["host"].update(device_name="AMD EPYC")))
    assert problems == {
        "identity.host.device_name": "is 'AMD EPYC', but hardware 'arc_pro_b70' is a device named 'Arc Pro B70'"
    }
    assert identity(edited(lambda d: d["identity"]["host"].update(device_name="Intel Arc Pro B700"))) != {}


def test_revisions_that_are_no_commits() -> None:
    """A branch name points at other weights tomorrow: the snapshot loaded is a commit."""
    problems = identity(
        edited(
            lambda d: (
                d["identity"]["model"].update(revision="main"),
                d["identity"]["host"].update(repo_revision="HEAD~1"),
            )
        )
    )
    assert problems == {
        "identity.model.revision": "is 'main', not a commit (40 lowercase hex digits)",
        "identity.host.repo_revision": "is 'HEAD~1', not a commit (40 lowercase hex digits)",
    }
