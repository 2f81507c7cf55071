"""What vLLM resolved for one server, read back from the server itself (catalog.model.packet.ServerFacts).

Async scheduling, graph capture, batch invariance and the stream interval are decided inside vLLM
(vllm/config/vllm.py `VllmConfig.__post_init__`, the platform's `check_and_update_config`): an
arm's flags say what was asked, not what ran. Sources, best first:
- `GET /server_info?config_format=json` (vllm/entrypoints/serve/dev/server_info/api_router.py),
  served only with VLLM_SERVER_DEV_MODE=1, which every measured server is given (vLLM's own
  benchmark sweep sets it too): `vllm_config` is the resolved config as pydantic dumps it
  (`scheduler_config.async_scheduling`, `scheduler_config.stream_interval`,
  `model_config.enforce_eager`, `compilation_config.mode` as an integer and `.cudagraph_mode` as
  an integer or a pair), `vllm_env` every VLLM_* variable as vLLM read it;
- the startup log: `Initializing a V1 LLM engine (v%s) with config: ...` (vllm/v1/engine/core.py;
  the config's `enforce_eager=`, `'mode': <CompilationMode.X: n>`, `'cudagraph_mode':
  <CUDAGraphMode.X: ...>`), and `Unknown vLLM environment variable detected: NAME`
  (vllm/platforms/interface.py), the one line that says a switch was ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from catalog.model.packet import ServerFacts
from catalog.model.secrets import redact_env

INTROSPECTION_ENV = {"VLLM_SERVER_DEV_MODE": "1"}
SERVER_INFO_TIMEOUT_S = 120.0  # the first answer collects the host's environment (vllm/collect_env.py)
# vllm/config/compilation.py CompilationMode and CUDAGraphMode, by value
COMPILATION_MODES = {0: "NONE", 1: "STOCK_TORCH_COMPILE", 2: "DYNAMO_TRACE_ONCE", 3: "VLLM_COMPILE"}
CUDAGRAPH_MODES = {0: "NONE", 1: "PIECEWISE", 2: "FULL", (2, 0): "FULL_DECODE_ONLY", (2, 1): "FULL_AND_PIECEWISE"}
_UNKNOWN_ENV = re.compile(r"Unknown vLLM environment variable detected: (\w+)")
_ENGINE_LINE = re.compile(r"Initializing a V1 LLM engine \(v[^)]*\) with config: (.*)$", re.MULTILINE)
_EAGER = re.compile(r"\benforce_eager=(True|False)\b")
_MODE = re.compile(r"'mode': <CompilationMode\.(\w+):")
_CUDAGRAPH = re.compile(r"'cudagraph_mode': <CUDAGraphMode\.(\w+):")
LOG_BYTES = 4 * 1024 * 1024


def read_server_facts(base_url: str, log_path: Path, arm_env: Mapping[str, str]) -> ServerFacts | None:
    """The server's own account of what it resolved; None when it gave none."""
    log = _log_head(log_path)
    unknown = sorted(set(_UNKNOWN_ENV.findall(log)))
    info = _server_info(base_url)
    if info is not None:
        facts = from_server_info(info, arm_env, unknown)
        if facts is not None:
            return facts
    return from_log(log, arm_env, unknown)


def _server_info(base_url: str) -> dict[str, Any] | None:
    try:
        with httpx.Client(base_url=base_url, timeout=SERVER_INFO_TIMEOUT_S, trust_env=False) as http:
            response = http.get("/server_info", params={"config_format": "json"})
        loaded = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def from_server_info(info: Mapping[str, Any], arm_env: Mapping[str, str], unknown: list[str]) -> ServerFacts | None:
    config = info.get("vllm_config")
    if not isinstance(config, dict):
        return None
    scheduler = _dict(config.get("scheduler_config"))
    model = _dict(config.get("model_config"))
    compilation = _dict(config.get("compilation_config"))
    read_env = _dict(info.get("vllm_env"))
    asked = [name for name in arm_env if name.startswith("VLLM_")]
    invariant = read_env.get("VLLM_BATCH_INVARIANT")
    return ServerFacts(
        source="server_info",
        async_scheduling=_bool(scheduler.get("async_scheduling")),
        enforce_eager=_bool(model.get("enforce_eager")),
        compilation_mode=_mode(compilation.get("mode"), COMPILATION_MODES),
        cudagraph_mode=_mode(compilation.get("cudagraph_mode"), CUDAGRAPH_MODES),
        batch_invariant=_bool(invariant) if invariant is not None else False,
        stream_interval=_int(scheduler.get("stream_interval")),
        env=redact_env({name: str(read_env[name]) for name in asked if name in read_env}),
        unknown_env=unknown,
    )


def from_log(log: str, arm_env: Mapping[str, str], unknown: list[str]) -> ServerFacts | None:
    engine = _ENGINE_LINE.search(log)
    if engine is None and not unknown:
        return None
    line = engine.group(1) if engine else ""
    eager = _EAGER.search(line)
    mode = _MODE.search(line)
    cudagraph = _CUDAGRAPH.search(line)
    invariant = arm_env.get("VLLM_BATCH_INVARIANT")
    return ServerFacts(
        source="log",
        enforce_eager=None if eager is None else eager.group(1) == "True",
        compilation_mode=mode.group(1) if mode else None,
        cudagraph_mode=cudagraph.group(1) if cudagraph else None,
        batch_invariant=None if invariant is None else invariant.strip().lower() in ("1", "true"),
        unknown_env=unknown,
    )


def _log_head(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            return handle.read(LOG_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "0", "true", "false"):
        return value.strip().lower() in ("1", "true")
    return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _mode(value: object, names: Mapping[Any, str]) -> str | None:
    """An enum as pydantic's JSON dump writes it (an integer, a pair as a list) or by its name."""
    if isinstance(value, list):
        value = tuple(value)
    if isinstance(value, str):
        name = value.rsplit(".", 1)[-1].strip("<>").split(":")[0]
        return name if name in names.values() else None
    return names.get(value) if isinstance(value, int | tuple) else None
