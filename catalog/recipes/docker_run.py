"""`docker run` read as docker reads it: its options, the image, the model after it, and what of the
container's setup the command says (the variables it sets) or leaves unsaid (`unread`).

Every option takes a value but the booleans docker/cli declares, so an option the catalog does not
know swallows the token after it, as docker's pflag parser does, instead of hiding the image there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# docker run's options that take no value (BoolVar/BoolVarP in docker/cli's
# cli/command/container/opts.go addFlags and run.go NewRunCommand, with --disable-content-trust from
# AddTrustVerificationFlags and 28.x's --use-api-socket). Every other option takes one (`--opt value`,
# `--opt=value`, `-eVALUE`, pflag's rules), so an option the catalog does not know swallows the token
# after it instead of hiding the image there: the image read is then another than the one named.
_DOCKER_FLAGS_LONG = frozenset(
    {"--rm", "--privileged", "--init", "--read-only", "--interactive", "--tty", "--publish-all", "--detach"}
    | {"--no-healthcheck", "--oom-kill-disable", "--sig-proxy", "--quiet", "--disable-content-trust", "--help"}
    | {"--use-api-socket"}
)
_DOCKER_FLAGS_SHORT = frozenset("itPdq")
# What `docker run -e NAME` may hand through from the caller by name (runner/runtime.py): read by
# vLLM (and huggingface_hub inside it) from the environment, the hub's credentials, endpoint and
# offline switch, whose values appear in no command line, log line or packet. Any other name handed
# through so has a value the command does not say.
PASSED_ENV = ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HUGGING_FACE_HUB_TOKEN")


@dataclass(frozen=True)
class DockerRun:
    """A `docker run` argv in its parts: options, image, model, and the vLLM arguments after them."""

    head: list[str]
    options: list[str]
    image: str
    model: str | None
    args: list[str]

    @classmethod
    def parse(cls, argv: Sequence[str]) -> DockerRun | None:
        tokens = list(argv)
        if not tokens or Path(tokens[0]).name not in ("docker", "podman") or tokens[1:2] != ["run"]:
            return None
        index = 2
        while index < len(tokens) and tokens[index].startswith("-") and tokens[index] != "-":
            index += 2 if _docker_takes_next(tokens[index]) else 1
        if index >= len(tokens):
            return None
        model = tokens[index + 1] if index + 1 < len(tokens) else None
        return cls(tokens[:2], tokens[2:index], tokens[index], model, tokens[index + 2 :])

    @property
    def env(self) -> dict[str, str]:
        """What `-e NAME=VALUE` sets (`-e NAME` hands a host variable through by name: no value)."""
        return {name: value for name, value in self._env_settings() if value is not None}

    @property
    def unread(self) -> list[str]:
        """What of the container's setup the command does not say: variables from a file or handed
        through by a name other than PASSED_ENV's, and an entrypoint in place of the image's."""
        found = [
            f"hands {name} through from the caller (-e {name}): its value is not in the command"
            for name, value in self._env_settings()
            if value is None and name not in PASSED_ENV
        ]
        for option, value in self._option_values():
            if option == "--env-file":
                found.append(f"reads variables from --env-file {value}, a file the packet does not carry")
            elif option == "--entrypoint":
                found.append(f"runs --entrypoint {value} in place of the image's own")
        return found

    def _option_values(self) -> list[tuple[str, str]]:
        """Each valued option as (its name, its value): `--env X`, `--env=X`, `-e X`, `-eX`."""
        found: list[tuple[str, str]] = []
        index = 0
        while index < len(self.options):
            token = self.options[index]
            index += 1
            name, eq, attached = token.partition("=")
            if token.startswith("--"):
                if eq:
                    found.append((name, attached))
                elif _docker_takes_next(token) and index < len(self.options):
                    found.append((token, self.options[index]))
                    index += 1
                continue
            for at, letter in enumerate(token[1:], start=1):
                if letter in _DOCKER_FLAGS_SHORT:
                    continue
                rest = token[at + 1 :].removeprefix("=")
                if not rest and index < len(self.options):
                    rest, index = self.options[index], index + 1
                found.append(("--env" if letter == "e" else "-" + letter, rest))
                break
        return found

    def _env_settings(self) -> list[tuple[str, str | None]]:
        settings: list[tuple[str, str | None]] = []
        for option, value in self._option_values():
            if option == "--env":
                name, eq, setting = value.partition("=")
                settings.append((name, setting if eq else None))
        return settings


def _docker_takes_next(token: str) -> bool:
    """Whether a docker run option token takes the next token as its value (pflag: a long option
    without `=`, unless a flag; a run of short flags ending in one that takes a value, with no
    value attached)."""
    if token.startswith("--"):
        return "=" not in token and token not in _DOCKER_FLAGS_LONG
    letters = token[1:]
    for at, letter in enumerate(letters):
        if letter not in _DOCKER_FLAGS_SHORT:
            return at == len(letters) - 1
    return False
