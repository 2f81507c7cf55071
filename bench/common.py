"""Paths, subprocess workers and small measuring helpers shared by the benchmarks."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import median
from typing import IO, Any

from catalog.model.delivery import TOKENS_PER_READ_BOUND
from catalog.model.metrics import DECODE_WINDOW, MIN_COMPLETION_TOKENS
from runner.server import stop_process

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
VLLM_PYTHON = Path(os.environ.get("VLLM_VENV", REPO / ".venv-vllm")) / "bin" / "python"
DEMO_MODEL = REPO / "models" / "demo"
CLK_TCK = os.sysconf("SC_CLK_TCK")

Log = Callable[[str], None]


def ensure_demo_model(log: Log) -> Path:
    """models/demo (the peer's tokenizer, the real server's model), generated once if missing."""
    from runner.measure import ensure_demo_model as generate

    return generate(VLLM_PYTHON, DEMO_MODEL, log)


NO_DECODE_RATE = (
    f"no decode rate: a completion under {MIN_COMPLETION_TOKENS} tokens, or tokens 1..{DECODE_WINDOW} of one read "
    f"in bursts (over {TOKENS_PER_READ_BOUND} tokens a read: the span timed the delivery, not the server; "
    "catalog.model.metrics.no_rate_because)"
)


def median_or_none(values: Sequence[float | None]) -> float | None:
    """The median, or None (a missing figure, said with NO_DECODE_RATE or its own reason) when
    there are no values or any is missing: a figure that cannot be computed never crashes a run."""
    known = [v for v in values if v is not None]
    return float(median(known)) if known and len(known) == len(values) else None


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def process_cpu_s(pid: int) -> float:
    """utime + stime of a live process (all threads), from /proc, in seconds (10 ms ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class CpuSampler:
    """Samples a process's CPU time every `interval_s` in a thread, so the CPU it used over any
    span of perf_counter time can be read afterwards (linear interpolation between samples)."""

    def __init__(self, pid: int, interval_s: float = 0.02) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.perf_counter(), process_cpu_s(self.pid)))
            except (OSError, ValueError, IndexError):
                return
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def cpu_at(self, at: float) -> float:
        samples = self.samples
        if not samples:
            return 0.0
        if at <= samples[0][0]:
            return samples[0][1]
        for (t0, c0), (t1, c1) in itertools.pairwise(samples):
            if t0 <= at <= t1:
                return c0 + (c1 - c0) * (at - t0) / (t1 - t0) if t1 > t0 else c1
        return samples[-1][1]

    def utilisation(self, start: float, end: float) -> float:
        return (self.cpu_at(end) - self.cpu_at(start)) / (end - start) if end > start else 0.0


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for benchmark children: no proxies for loopback, the repo importable."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["PYTHONPATH"] = str(REPO)
    env.update(extra or {})
    return env


def http_json(url: str, payload: Any = None, timeout: float = 60.0) -> Any:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
    request.add_header("content-type", "application/json")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=timeout) as response:
        return json.loads(response.read())


class Worker:
    """A long-lived child that prints READY, then answers one JSON line on stdin with one line
    starting with `prefix` on stdout (other stdout lines are kept in the log file)."""

    def __init__(self, argv: Sequence[str], prefix: str, log_path: Path, env: dict[str, str] | None = None) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.argv = list(argv)
        self.log_path = log_path
        self._log: IO[str] = log_path.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=REPO,
            env=env or child_env(),
        )
        self.started = time.perf_counter()
        self._expect("READY")
        self.ready_s = time.perf_counter() - self.started

    @property
    def pid(self) -> int:
        return self.process.pid

    def _expect(self, prefix: str) -> str:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
            self._log.write(line)
        self._log.flush()
        raise RuntimeError(f"{self.argv[0]} exited (code {self.process.wait()}); see {self.log_path}")

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        result: dict[str, Any] = json.loads(self._expect(self.prefix))
        return result

    def close(self) -> dict[str, float]:
        """Close stdin, wait, and return the child's total CPU and peak memory (wait4)."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        usage = _wait4(self.process, 120.0)
        self._log.close()
        return usage


_PEER: Worker | None = None
_PEER_LOCK = threading.Lock()


def peer_worker() -> Worker:
    """The one `vllm bench serve` worker all benchmarks share: importing vLLM costs 15-40 s."""
    global _PEER
    with _PEER_LOCK:
        if _PEER is None or _PEER.process.poll() is not None:
            argv = [str(VLLM_PYTHON), str(REPO / "bench" / "peer_vllm.py")]
            _PEER = Worker(argv, "PEER-RUN ", OUT / "logs" / "peer.log")
        return _PEER


def close_peer_worker() -> None:
    global _PEER
    with _PEER_LOCK:
        if _PEER is not None:
            _PEER.close()
            _PEER = None


def stop_server(process: subprocess.Popen[Any], log: IO[str]) -> None:
    """Stop a server the benchmark started (SIGTERM, then SIGKILL after 10 s) and close its log."""
    stop_process(process, grace_s=10.0)
    log.close()


def _wait4(process: subprocess.Popen[Any], timeout: float) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        except ChildProcessError:  # already reaped (by Popen.wait after it died)
            return {"cpu_s": float("nan"), "maxrss_mb": float("nan"), "returncode": process.returncode or -1}
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return {
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "maxrss_mb": usage.ru_maxrss / 1024,
                "returncode": process.returncode,
            }
        time.sleep(0.05)
    process.kill()
    process.wait()
    return {"cpu_s": float("nan"), "maxrss_mb": float("nan"), "returncode": -9}


def spawn_measured(
    argv: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 3600.0
) -> dict[str, Any]:
    """Run a child to completion and return wall time, its own CPU time and peak RSS (os.wait4 on
    exactly this child), stdout and stderr (through files, so no pipe can fill up)."""
    OUT.mkdir(parents=True, exist_ok=True)
    with (
        (OUT / "child.stdout").open("w+", encoding="utf-8") as out,
        (OUT / "child.stderr").open("w+", encoding="utf-8") as err,
    ):
        started = time.perf_counter()
        process = subprocess.Popen(list(argv), stdout=out, stderr=err, cwd=REPO, env=env or child_env())
        usage = _wait4(process, timeout)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        return {**usage, "wall_s": wall, "stdout": out.read(), "stderr": err.read()}


def python() -> str:
    return sys.executable
