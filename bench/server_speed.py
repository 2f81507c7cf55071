"""Why the client benchmarks have their own server: the tests' fake vLLM (testkit/fake_vllm)
and bench/fastserver.py each serve the client benchmark's throughput runs to our client, in turn.

Both stream vLLM's chunks (testkit/fake_vllm/wire.py) as fast as the client reads, with the same
HTTP layer (testkit/fake_vllm/http.py). The fake plays each request as a script, one socket
write per event (what the client tests need: every chunk reaches the socket as written); the
fast server's engine writes 64 events per write. Per level: tokens/s absorbed, our client's CPU
per token and the server's CPU utilisation (near 100 %: the server, not the client, set the
pace). Sizes: client_bench.ClientPlan (--quick: its quick sizes).

    python -m bench.server_speed [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

from bench.client_bench import MODEL, ClientPlan, FastServer, _ours_request
from bench.common import OUT, REPO, CpuSampler, Worker, child_env, http_json, load_average, stop_server
from runner.server import find_free_port
from testkit.fake_vllm import PYTHONPATH


class FakeVllmProcess:
    """The tests' fake vLLM as its own process, as the runner starts it, answering max_tokens."""

    def __init__(self, log_path: Path, answer_tokens: int) -> None:
        self.port = find_free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        env = child_env({"PYTHONPATH": PYTHONPATH, "FAKE_VLLM_TOKEN_DELAY": "0"})
        env["FAKE_VLLM_ANSWER_TOKENS"] = str(answer_tokens)
        argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL, "--port", str(self.port)]
        self._log = log_path.open("w", encoding="utf-8")
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
        self.pid = self.process.pid
        deadline = time.monotonic() + 30
        while True:
            try:
                http_json(self.base_url + "/v1/models", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"the fake vLLM did not start; see {log_path}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        stop_server(self.process, self._log)


def run(quick: bool) -> dict[str, dict[int, dict[str, float]]]:
    plan = ClientPlan.quick() if quick else ClientPlan()
    logs = OUT / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    servers: dict[str, FastServer | FakeVllmProcess] = {
        "fastserver": FastServer(logs / "speed-fastserver.log"),
        "fake": FakeVllmProcess(logs / "speed-fake.log", plan.max_tokens),
    }
    samplers = {name: CpuSampler(server.pid) for name, server in servers.items()}
    ours = Worker([sys.executable, "-m", "bench.client_worker"], "OURS-RUN ", logs / "speed-ours.log")
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    try:
        for round_index in range(plan.rounds):
            order = list(servers) if round_index % 2 == 0 else list(reversed(servers))
            for level, prompts in zip(plan.levels, plan.prompts, strict=True):
                for name in order:
                    server = servers[name]
                    label = f"speed-r{round_index}-c{level}-{name}"
                    request = _ours_request(server, label, level, prompts, plan.max_tokens, plan, paced=False)
                    request["mark_url"] = None  # the fake has no segments to mark
                    result = ours.run(request)
                    time.sleep(2.5 * samplers[name].interval_s)  # a sample after the window's end
                    sample = {
                        "tok_s": result["tokens"] / result["wall_s"],
                        "cpu_us_per_token": result["cpu_s"] / result["tokens"] * 1e6,
                        "server_cpu_util": samplers[name].utilisation(result["started"], result["finished"]),
                    }
                    runs.setdefault((name, level), []).append(sample)
                    print(
                        f"round {round_index + 1}/{plan.rounds} c={level} {name}: {sample['tok_s']:,.0f} tok/s, "
                        f"client {sample['cpu_us_per_token']:.1f} µs CPU/token, "
                        f"server CPU {sample['server_cpu_util']:.0%}",
                        flush=True,
                    )
    finally:
        ours.close()
        for name, server in servers.items():
            samplers[name].stop()
            server.stop()
    return {
        name: {
            level: {key: float(median(s[key] for s in runs[(name, level)])) for key in runs[(name, level)][0]}
            for level in plan.levels
        }
        for name in servers
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.server_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the client benchmark's quick sizes")
    options = parser.parse_args(argv)
    started = load_average()
    medians = run(options.quick)
    print(f"medians; load average at start {started}, at end {load_average()}; {os.cpu_count()} CPUs")
    for level in medians["fake"]:
        print(f"c={level}: " + "; ".join(_shown(name, medians[name][level]) for name in ("fastserver", "fake")))


def _shown(name: str, figures: dict[str, float]) -> str:
    per_token = figures["server_cpu_util"] / figures["tok_s"] * 1e6
    return (
        f"{name} {figures['tok_s']:,.0f} tok/s, server {per_token:.1f} µs CPU/token "
        f"({figures['server_cpu_util']:.0%} of a core), client {figures['cpu_us_per_token']:.1f} µs CPU/token"
    )


if __name__ == "__main__":
    main()
