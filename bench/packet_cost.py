"""Benchmark 3a: what one committed packet costs to store and to trust.

The committed demo packet (packets/demo-bf16-*.json, a real CPU campaign: 2 arms × 2 fresh
servers × 12 prompts × 512 tokens), measured in a fresh process (`python -m bench.packet_cost`,
timed after the imports, with its own CPU clock, so no other thread of the benchmark counts):
its file size, and the CPU time (time.process_time, median of many runs after a warm-up) to
- read its bytes;
- read and hash-check it (catalog.packets.verify.read_packet without keys: strict validation, the
  canonical-form check, sha256 of the bytes and the name it gives);
- fully verify it (catalog.packets.verify.verify against data/keys.yaml: the above, the DSSE
  signature by a listed measurer key, and every derived figure, gate and canary verdict
  re-derived from the rows), which is what every build and `make verify` pays per packet.
Each is also given per recorded token (token ids over every row of every server).

    python -m bench.packet_cost [RUNS]
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

from bench.common import REPO, Log, spawn_measured
from bench.results import Benchmark, Figure

# Its arms (2 x 2 fresh servers x 12 prompts x 512 tokens) under 300 KB; its three ladders of both arms
# (a load sweep of 16 requests x 8 levels each, concurrency c1-c8, the 2K context depth) add ~60 KB.
SIZE_LIMIT_KB = 400.0
VERIFY_LIMIT_MS = 5.0
RUNS, QUICK_RUNS = 400, 60
WARMUP = 5


def demo_packet() -> Path:
    from catalog.packets.layout import is_signature

    found = sorted(p for p in (REPO / "packets").glob("demo-bf16-*.json") if not is_signature(p))
    if len(found) != 1:
        raise RuntimeError(f"expected one committed demo packet in packets/, found {[p.name for p in found]}")
    return found[0]


def _cpu_ms(action: Callable[[], object], runs: int) -> dict[str, float]:
    for _ in range(WARMUP):
        action()
    samples = []
    for _ in range(runs):
        started = time.process_time()
        action()
        samples.append(1000 * (time.process_time() - started))
    samples.sort()
    return {"median_ms": median(samples), "min_ms": samples[0], "p90_ms": samples[int(0.9 * (len(samples) - 1))]}


def measure(runs: int) -> dict[str, Any]:
    from catalog.packets.keys import load_keys
    from catalog.packets.layout import signature_path
    from catalog.packets.verify import Verified, read_packet, verify

    path = demo_packet()
    keys = load_keys(REPO / "data" / "keys.yaml")
    result = verify(path, keys)
    if not isinstance(result, Verified) or not result.packet.signed:
        problems = [] if isinstance(result, Verified) else result.problems
        raise RuntimeError(f"{path.name} does not verify: {[str(p) for p in problems]}")
    packet = result.packet
    rows = [row for arm in packet.arms for server in arm.servers for row in server.rows]
    return {
        "packet": path.name,
        "bytes": path.stat().st_size,
        "signature_bytes": signature_path(path).stat().st_size,
        "rows": len(rows),
        "tokens": sum(len(row.token_ids) for row in rows),
        "runs": runs,
        "read": _cpu_ms(path.read_bytes, runs),
        "hash_check": _cpu_ms(lambda: read_packet(path, None), runs),
        "verify": _cpu_ms(lambda: verify(path, keys), runs),
    }


def run(quick: bool, log: Log) -> list[Benchmark]:
    child = spawn_measured([sys.executable, "-m", "bench.packet_cost", str(QUICK_RUNS if quick else RUNS)])
    if child["returncode"] != 0:
        raise RuntimeError(f"packet cost failed: {child['stderr'][-2000:]}")
    m: dict[str, Any] = json.loads(child["stdout"].strip().splitlines()[-1])
    tokens = m["tokens"]
    verify_ms = m["verify"]["median_ms"]
    log(
        f"packet: {m['packet']}: {m['bytes'] / 1000:.0f} KB, full verification {verify_ms:.2f} ms CPU "
        f"({1e6 * verify_ms / tokens:.0f} ns per token, median of {m['runs']})"
    )
    return [
        Benchmark(
            id="packet.demo",
            group="builder",
            title=f"One committed packet: {m['packet']} ({m['rows']} rows, {tokens:,} recorded tokens)",
            figures=[
                Figure(
                    name="file size",
                    unit="KB",
                    ours=m["bytes"] / 1000,
                    better="lower",
                    target=f"< {SIZE_LIMIT_KB:.0f} KB",
                    met=m["bytes"] < SIZE_LIMIT_KB * 1000,
                    note=f"{m['bytes']:,} bytes, and {m['signature_bytes']:,} bytes of DSSE signature beside it",
                ),
                Figure(name="file size per recorded token", unit="B", ours=m["bytes"] / tokens, better="lower"),
                Figure(name="read the bytes, CPU", unit="ms", ours=m["read"]["median_ms"], better="lower"),
                Figure(
                    name="read and hash-check (read_packet, no keys), CPU",
                    unit="ms",
                    ours=m["hash_check"]["median_ms"],
                    better="lower",
                    note="strict validation, canonical-form check, sha256 of the bytes, the name it gives",
                ),
                Figure(
                    name="full verification (verify), CPU of one core",
                    unit="ms",
                    ours=verify_ms,
                    better="lower",
                    target=f"< {VERIFY_LIMIT_MS:.0f} ms of one core",
                    met=verify_ms < VERIFY_LIMIT_MS,
                    note=f"time.process_time, median of {m['runs']} runs in a fresh process "
                    f"(min {m['verify']['min_ms']:.2f}, p90 {m['verify']['p90_ms']:.2f} ms): bytes, digest, "
                    "signature against data/keys.yaml, every figure, gate and canary re-derived",
                ),
                Figure(
                    name="full verification per recorded token, CPU",
                    unit="ns",
                    ours=1e6 * verify_ms / tokens,
                    better="lower",
                ),
            ],
            details=m,
        )
    ]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else RUNS
    print(json.dumps(measure(runs)))


if __name__ == "__main__":
    main()
