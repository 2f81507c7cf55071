"""The docker side of a campaign: pin the image by digest, name, stop and remove containers.

A killed `docker run` client leaves its container running (and holding the card): every
container the runner starts is named `llmcat-<campaign>-<attempt>`, stopped by name with
`docker stop -t <grace>` (SIGTERM, then SIGKILL once the grace period is over) and removed with
`docker rm -f`. Leftovers of an earlier, interrupted run carry the same prefix and are swept
before a campaign starts.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass

from catalog.errors import UserError
from runner.runtime_probe import PROBE, RuntimeFacts, parse

CONTAINER_PREFIX = "llmcat-"
DOCKER_TIMEOUT_S = 60.0
PULL_TIMEOUT_S = 3600.0
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_.-]")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
INSPECT_FORMAT = (
    "{{.Name}} {{.HostConfig.Privileged}} {{json .HostConfig.Runtime}} {{json .HostConfig.Devices}} "
    "{{json .HostConfig.DeviceRequests}}"
)


class DockerError(UserError):
    """A docker command failed; the message carries docker's own last line."""


def docker(*args: str, timeout: float = DOCKER_TIMEOUT_S, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        out = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise DockerError("docker is not installed or not on PATH", field="RUNTIME") from None
    except subprocess.TimeoutExpired:
        raise DockerError(
            f"`docker {' '.join(args[:2])}` did not answer within {timeout:.0f} s", field="RUNTIME"
        ) from None
    if check and out.returncode != 0:
        last = (out.stderr.strip() or out.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise DockerError(f"`docker {' '.join(args[:2])}` failed: {last[0]}", field="RUNTIME")
    return out


def container_name(campaign: str, attempt: str) -> str:
    return _NAME_CHARS.sub("-", f"{CONTAINER_PREFIX}{campaign}-{attempt}")[:128]


def container_exists(name: str) -> bool:
    out = docker("ps", "-a", "--filter", f"name=^/{name}$", "--format", "{{.Names}}", check=False)
    return name in out.stdout.split()


def stop_container(name: str, grace_s: float) -> None:
    """`docker stop -t N` (SIGTERM, SIGKILL after N s), then `docker rm -f`; raise if it survives."""
    docker("stop", "-t", str(max(0, round(grace_s))), name, timeout=grace_s + DOCKER_TIMEOUT_S, check=False)
    docker("rm", "-f", name, check=False)
    if container_exists(name):
        raise DockerError(f"container {name} survived `docker stop` and `docker rm -f`: it may still hold the card")


def our_containers(prefix: str = CONTAINER_PREFIX) -> list[str]:
    out = docker("ps", "-a", "--filter", f"name=^/{prefix}", "--format", "{{.Names}}")
    return [name for name in out.stdout.split() if name.startswith(prefix)]


def sweep(prefix: str = CONTAINER_PREFIX) -> list[str]:
    """Remove every container an earlier, interrupted run of this runner left behind."""
    names = our_containers(prefix)
    for name in names:
        docker("rm", "-f", name, check=False)
    left = [name for name in names if container_exists(name)]
    if left:
        raise DockerError(f"cannot remove leftover container(s) {', '.join(left)}: `docker rm -f` them by hand")
    return names


def containers_holding_devices() -> list[str]:
    """Running containers that were given a GPU: listed devices (`--device /dev/dri...`), device
    requests (`--gpus`), every host device (`--privileged`) or the legacy NVIDIA runtime
    (`--runtime nvidia`, whose cards come from NVIDIA_VISIBLE_DEVICES and are listed nowhere).
    Keys and values: moby api/types/container/hostconfig.go (tests/runner/smi/docker_inspect_examples.txt)."""
    ids = docker("ps", "-q").stdout.split()
    if not ids:
        return []
    out = docker("inspect", "--format", INSPECT_FORMAT, *ids)
    holders = []
    decoder = json.JSONDecoder()
    for line in out.stdout.splitlines():
        name, _, rest = line.strip().partition(" ")
        privileged, _, rest = rest.partition(" ")
        try:
            runtime, end = decoder.raw_decode(rest)
            rest = rest[end:].lstrip()
            devices, end = decoder.raw_decode(rest)
            requests, _ = decoder.raw_decode(rest[end:].lstrip())
        except ValueError:
            continue
        paths = [str(d.get("PathOnHost", "")) for d in devices or [] if isinstance(d, dict)]
        gpu = any(path.startswith(("/dev/dri", "/dev/nvidia")) for path in paths)
        if privileged == "true" or runtime == "nvidia" or requests or gpu:
            holders.append(name.lstrip("/"))
    return holders


@dataclass(frozen=True)
class PinnedImage:
    image: str  # as the recipe names it, e.g. vllm/vllm-openai-xpu:latest
    digest: str  # sha256:...
    vllm_version: str
    facts: RuntimeFacts | None = None  # what the image's python holds (runner/runtime_probe.py)

    @property
    def pinned(self) -> str:
        """`repo@sha256:...`: what every server of the campaign runs."""
        return f"{repository(self.image)}@{self.digest}"


def repository(image: str) -> str:
    """The image name without its tag or digest (a registry port's colon stays)."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def pin_image(image: str, pull: bool = True) -> PinnedImage:
    """Pull the image, read its repo digest, and the vLLM version inside it and the variables that
    vLLM knows (the image's own python, runner/runtime_probe.py)."""
    if pull:
        pulled = docker("pull", image, timeout=PULL_TIMEOUT_S, check=False)
        if pulled.returncode != 0 and docker("image", "inspect", image, check=False).returncode != 0:
            last = (pulled.stderr.strip() or "no output").splitlines()[-1]
            raise DockerError(f"cannot pull {image} and it is not on this machine: {last}", field="RUNTIME")
    out = docker("image", "inspect", "--format", "{{json .RepoDigests}}", image)
    digests = json.loads(out.stdout.strip() or "null") or []
    repo = repository(image)
    matching = [d for d in digests if repository(d) == repo] or digests
    digest = matching[0].split("@", 1)[1] if matching and "@" in matching[0] else ""
    if not _DIGEST.match(digest):
        raise DockerError(
            f"{image} has no registry digest (built locally?): push it or pull it from a registry, so the "
            "packet can name the exact image",
            field="RUNTIME",
        )
    pinned = f"{repo}@{digest}"
    probe = docker("run", "--rm", "--entrypoint", "python3", pinned, "-c", PROBE, timeout=300, check=False)
    facts = parse(probe.stdout) if probe.returncode == 0 else RuntimeFacts(version="unknown")
    return PinnedImage(image, digest, facts.version, facts)
