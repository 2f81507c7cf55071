"""How a vLLM server is started: a local install (module form) or a docker image.

Either way the recorded command is the portable `vllm serve MODEL ARGS` from the recipe; the
runtime only decides how to launch it on this machine, and gives each server exactly what
preflight checked:
- the cards (runner/cards.py): a local server through ZE_AFFINITY_MASK / CUDA_VISIBLE_DEVICES
  and the variable that makes its numbering the vendor tool's; a container through its device
  flags only (each Intel card's card and render node, and a /dev/dri/by-path holding only their
  links; or `--gpus "device=<uuid>"`), never `--device /dev/dri`, `--privileged` or `--gpus all`;
- the weights: `--revision <commit>` of the snapshot preflight hashed, HF_HUB_OFFLINE=1 (the
  server loads what is in the cache, never a newer commit), the hub cache actually used mounted;
- empty compile caches: a local server's point at its own folder (runner/server.py); a
  container's are set with `-e` to container paths on an anonymous volume, new for each
  container and removed with it (`--rm`), so no host cache and no earlier server's is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from catalog.errors import UserError
from catalog.recipes.compose import LaunchCommand
from catalog.recipes.docker_run import PASSED_ENV
from runner.cards import CONTAINER_BY_PATH, CardSelection
from runner.docker import container_name
from runner.runtime_probe import IMAGE_ENTRYPOINT, OPENAI_API_SERVER, entrypoint_name
from runner.server import CACHE_DIRS_BY_ENV_VAR, LOOPBACK
from runner.server_facts import INTROSPECTION_ENV

CONTAINER_MODEL_DIR = "/models"
CONTAINER_HUB_CACHE = "/root/.cache/huggingface/hub"
CONTAINER_COMPILE_CACHE = "/root/.cache/llmcat-compile"  # an anonymous volume: new per container
PORT_PLACEHOLDER = 8000  # the port a recorded launch command shows (each server gets a free one)
SERVER_DIR_PLACEHOLDER = Path("<server-dir>")  # the per-server folder a recorded launch command shows
BY_PATH_FOLDER = "dri-by-path"
OFFLINE = {"HF_HUB_OFFLINE": "1"}


@dataclass(frozen=True)
class LocalRuntime:
    """A vLLM environment's python, started with `entrypoint` (runner/runtime_probe.py chooses
    it: `vllm serve` where the install can run it, else its own API server module)."""

    python: Path
    model_dir: Path | None = None
    entrypoint: tuple[str, ...] = OPENAI_API_SERVER
    cards: CardSelection | None = None
    offline: bool = False  # the weights were found locally: the server never reaches the hub

    @property
    def entrypoint_name(self) -> str:
        return entrypoint_name(self.entrypoint)

    def passed_env(self, environ: dict[str, str]) -> list[str]:
        """Names of the pass-through variables set here (a local server inherits the environment)."""
        return [name for name in PASSED_ENV if name in environ and not (self.offline and name in OFFLINE)]

    def server_env(self) -> dict[str, str]:
        """Set for the server on top of this environment: its cards, offline weights, and
        /server_info (runner/server_facts.py reads what vLLM resolved from it)."""
        env = self.cards.local_env() if self.cards else {}
        return {**env, **(OFFLINE if self.offline else {}), **INTROSPECTION_ENV}

    def prepare(self, server_dir: Path) -> None:
        """Nothing to lay out: the server's compile caches are runner/server.py's."""

    def argv(
        self, command: LaunchCommand, port: int, attempt: str | None = None, server_dir: Path | None = None
    ) -> list[str]:
        model = str(self.model_dir) if self.model_dir else command.model_id
        return [
            str(self.python),
            *self.entrypoint,
            "--model",
            model,
            "--served-model-name",
            command.model_id,
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            *command.args,
        ]


@dataclass(frozen=True)
class DockerRuntime:
    """The recipe's image, pinned by digest, given only the cards preflight checked.

    Every container is named after the campaign and the attempt (runner.docker stops and removes
    it by that name); MODEL_DIR, when given, is mounted read-only and served, so the folder the
    packet hashes is the folder the container loads; else the hub cache is mounted."""

    hf_cache: Path  # the hub cache (HF_HUB_CACHE, else $HF_HOME/hub) mounted as the container's
    campaign: str = "adhoc"
    image: str | None = None  # repo@sha256:..., in place of the recipe's tag
    model_dir: Path | None = None
    environ: tuple[str, ...] = ()  # names of pass-through variables set on this host
    cards: CardSelection | None = None
    offline: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)

    entrypoint_name = IMAGE_ENTRYPOINT

    def passed_env(self, environ: dict[str, str]) -> list[str]:
        return [name for name in PASSED_ENV if name in environ and name not in self.container_env()]

    def server_env(self) -> dict[str, str]:
        """Nothing for the `docker run` client itself: the container's variables are in its argv."""
        return {}

    def container_env(self) -> dict[str, str]:
        """Set with `-e` as container values: caches, cards, hub cache, offline weights, /server_info."""
        env = {name: f"{CONTAINER_COMPILE_CACHE}/{sub}" for name, sub in CACHE_DIRS_BY_ENV_VAR.items()}
        env.update(INTROSPECTION_ENV)
        env["HF_HUB_CACHE"] = CONTAINER_HUB_CACHE
        if self.cards:
            env.update(self.cards.container_env())
        if self.offline:
            env.update(OFFLINE)
        return {**env, **self.extra_env}

    def prepare(self, server_dir: Path) -> None:
        """The /dev/dri/by-path the container sees: the chosen cards' links only (Level Zero and
        oneCCL look for cards there; the host's would name every card)."""
        links = self.cards.by_path_links() if self.cards else {}
        if not links:
            return
        folder = server_dir / BY_PATH_FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        for name, target in links.items():
            link = folder / name
            if link.is_symlink() or link.exists():
                link.unlink()
            os.symlink(target, link)

    def argv(
        self, command: LaunchCommand, port: int, attempt: str | None = None, server_dir: Path | None = None
    ) -> list[str]:
        mount = None
        if self.model_dir is not None:
            mount = (str(self.model_dir.resolve()), f"{CONTAINER_MODEL_DIR}/{self.model_dir.resolve().name}")
        mounts = [CONTAINER_COMPILE_CACHE]  # anonymous: a new volume for each container
        if self.model_dir is None:
            mounts.append(f"{self.hf_cache}:{CONTAINER_HUB_CACHE}")
        if self.cards and self.cards.by_path_links():
            folder = (server_dir or SERVER_DIR_PLACEHOLDER) / BY_PATH_FOLDER
            mounts.append(f"{folder}:{CONTAINER_BY_PATH}:ro")
        argv = command.docker_argv(
            publish=f"{LOOPBACK}:{port}:8000",
            mount_hf_home=False,
            name=container_name(self.campaign, attempt or f"p{port}"),
            image=self.image,
            model_mount=mount,
            pass_env=self.environ,
            device_options=self.cards.docker_options() if self.cards else None,
            runtime_env=self.container_env(),
            mounts=mounts,
            served_name=self.offline,
        )
        if argv is None:
            raise UserError("the recipe names no docker image for this hardware", field="RUNTIME")
        return argv


Runtime = LocalRuntime | DockerRuntime
