"""Benchmark 3: the builder at scale, against its own floor.

For each size (families × packets per family) a synthetic catalog (bench/catalog_gen.py) is
built by `python -m builder build` into an empty folder, as a subprocess: wall time, CPU and
peak RSS of that child (os.wait4). Then the same command again, with nothing changed (the
no-op path through site/.catalog-build.json). The floor is `python -m bench.floor`: every
packet read and verified once with catalog.packet_io.read_packet (bytes, digest, signature),
timed in its own process before and after the build (the mean of the two is the floor).
First, the cost of one committed packet (bench/packet_cost.py): its size and the CPU time to
read, hash-check and fully verify it. Last, how long verify takes to refuse the costliest hostile
files (bench/refusal_bench.py).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from statistics import median
from typing import Any

from bench import packet_cost, refusal_bench
from bench.catalog_gen import ensure_catalog
from bench.common import OUT, Log, child_env, load_average, spawn_measured
from bench.results import Benchmark, Figure

FULL_SIZES = ((10, 20), (100, 20), (1000, 1))
QUICK_SIZES = ((10, 20),)
PAGE_LIMIT_KB = 100.0
NOOP_LIMIT_S = 2.0
FLOOR_FACTOR = 3.0
LARGE_LIMIT_S = 60.0
BROWSER_SITE = OUT / "site-browser"


def _floor(packets: Path, data: Path) -> dict[str, Any]:
    child = spawn_measured([sys.executable, "-m", "bench.floor", str(packets), str(data)])
    if child["returncode"] != 0:
        raise RuntimeError(f"floor failed: {child['stderr'][-2000:]}")
    result: dict[str, Any] = json.loads(child["stdout"].strip().splitlines()[-1])
    return result


def _build(data: Path, packets: Path, out: Path, cache_home: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "builder", "build", "--data", str(data), "--packets", str(packets), "--out", str(out)]
    child = spawn_measured(argv, env={**child_env(), "XDG_CACHE_HOME": str(cache_home)})
    if child["returncode"] != 0:
        raise RuntimeError(f"build failed ({child['returncode']}): {child['stderr'][-3000:]}")
    return child


def _site_stats(out: Path) -> dict[str, Any]:
    files = [p for p in out.rglob("*") if p.is_file()]
    html = [p for p in files if p.suffix == ".html"]
    family_pages = sorted((p.stat().st_size for p in out.glob("models/*/index.html")), reverse=True)
    packet_pages = [p.stat().st_size for p in out.glob("packets/*/index.html")]
    assets = sum(p.stat().st_size for p in (out / "assets").rglob("*") if p.is_file())
    packet_json = sum(p.stat().st_size for p in out.glob("packets/*.json"))
    return {
        "files": len(files),
        "html_pages": len(html),
        "site_bytes": sum(p.stat().st_size for p in files),
        "packet_json_bytes": packet_json,
        "asset_bytes": assets,
        "family_page_max_bytes": family_pages[0] if family_pages else 0,
        "family_page_median_bytes": median(family_pages) if family_pages else 0,
        "packet_page_median_bytes": median(packet_pages) if packet_pages else 0,
    }


def prepare(quick: bool, log: Log) -> None:
    """Generate (or find cached) every catalog this run will build; nothing here is timed."""
    for families, per_family in QUICK_SIZES if quick else FULL_SIZES:
        ensure_catalog(families, per_family, log)


def run(quick: bool, log: Log) -> list[Benchmark]:
    sizes = QUICK_SIZES if quick else FULL_SIZES
    packet = packet_cost.run(quick, log)
    measured = []
    for families, per_family in sizes:
        data, packets = ensure_catalog(families, per_family, log)
        out = OUT / f"site-{families}x{per_family}"
        shutil.rmtree(out, ignore_errors=True)
        cache_home = OUT / f"cache-{families}x{per_family}"
        shutil.rmtree(cache_home, ignore_errors=True)  # a cold build: no fingerprint is known
        load_before = load_average()
        floor_a = _floor(packets, data)
        build = _build(data, packets, out, cache_home)
        noop = _build(data, packets, out, cache_home)
        floor_b = floor_a if quick else _floor(packets, data)  # full runs: floor before and after, mean
        stats = _site_stats(out)
        floor_s = (floor_a["seconds"] + floor_b["seconds"]) / 2
        result = {
            "families": families,
            "packets_per_family": per_family,
            "packets": floor_a["packets"],
            "packet_bytes": floor_a["bytes"],
            "build_s": build["wall_s"],
            "build_cpu_s": build["cpu_s"],
            "build_maxrss_mb": build["maxrss_mb"],
            "noop_s": noop["wall_s"],
            "noop_said": noop["stdout"].strip()[-200:],
            "floor_s": floor_s,
            "floor_runs_s": [floor_a["seconds"], floor_b["seconds"]],
            "load_average_before": load_before,
            "load_average_after": load_average(),
            **stats,
        }
        measured.append(result)
        log(
            f"builder: {families}×{per_family}: build {build['wall_s']:.1f} s (floor {floor_s:.1f} s), "
            f"no-op {noop['wall_s']:.2f} s, peak {build['maxrss_mb']:.0f} MB, "
            f"largest model page {stats['family_page_max_bytes'] / 1024:.0f} KB"
        )
        if (families, per_family) == sizes[0]:
            shutil.rmtree(BROWSER_SITE, ignore_errors=True)
            out.rename(BROWSER_SITE)  # kept for the browser benchmark
        else:
            shutil.rmtree(out, ignore_errors=True)  # gigabytes: do not keep
    sized = [_size_benchmark(m) for m in measured] + [_scaling_benchmark(measured)]
    return packet + sized + refusal_bench.run(quick, log)


def _size_benchmark(m: dict[str, Any]) -> Benchmark:
    families = m["families"]
    large = families >= 1000
    build_target = f"< {LARGE_LIMIT_S:.0f} s" if large else None
    return Benchmark(
        id=f"builder.{families}x{m['packets_per_family']}",
        group="builder",
        title=f"Full build: {families} families × {m['packets_per_family']} packets ({m['packets']} packets, "
        f"{m['packet_bytes'] / 1e9:.2f} GB)",
        peer="floor: catalog.packet_io.read_packet over every packet, once",
        figures=[
            Figure(
                name="full build",
                unit="s",
                ours=m["build_s"],
                peer=m["floor_s"],
                better="closer",
                target=f"≤ {FLOOR_FACTOR:.0f}× floor" + (f"; {build_target}" if build_target else ""),
                met=m["build_s"] <= FLOOR_FACTOR * m["floor_s"] and (not large or m["build_s"] < LARGE_LIMIT_S),
                note="peer column: the floor (read and verify every packet once)",
            ),
            Figure(
                name="full build, CPU time of every process",
                unit="s",
                ours=m["build_cpu_s"],
                peer=m["floor_s"],
                better="closer",
                note="the build verifies packets on every core, the floor in one process: this row compares work",
            ),
            Figure(name="time per HTML page", unit="ms", ours=1000 * m["build_s"] / m["html_pages"], better="lower"),
            Figure(name="time per packet", unit="ms", ours=1000 * m["build_s"] / m["packets"], better="lower"),
            Figure(name="peak memory (ru_maxrss)", unit="MB", ours=m["build_maxrss_mb"], better="lower"),
            Figure(
                name="no-op rebuild",
                unit="s",
                ours=m["noop_s"],
                better="lower",
                target=f"< {NOOP_LIMIT_S:.0f} s",
                met=m["noop_s"] < NOOP_LIMIT_S,
            ),
            Figure(
                name="largest model page (HTML only; assets shared)",
                unit="KB",
                ours=m["family_page_max_bytes"] / 1024,
                better="lower",
                target=f"≤ {PAGE_LIMIT_KB:.0f} KB",
                met=m["family_page_max_bytes"] <= PAGE_LIMIT_KB * 1024,
            ),
            Figure(
                name="whole site",
                unit="MB",
                ours=m["site_bytes"] / 1e6,
                better="lower",
                note=f"of which packet JSON copies {m['packet_json_bytes'] / 1e6:.0f} MB, "
                f"shared assets {m['asset_bytes'] / 1e6:.1f} MB",
            ),
        ],
        details=m,
    )


def _scaling_benchmark(measured: list[dict[str, Any]]) -> Benchmark:
    """Linear growth: the build's time per packet, relative to the floor's time per packet measured
    beside it, should not grow with the size (the ratio cancels the machine's load, which moves
    both alike; the raw times per packet are in the details)."""
    smallest, largest = measured[0], max(measured, key=lambda m: m["packets"])
    growth = (largest["build_s"] / largest["floor_s"]) / (smallest["build_s"] / smallest["floor_s"])
    floor_per_packet = median(m["floor_s"] / m["packets"] for m in measured)
    build_per_packet = median(m["build_s"] / m["packets"] for m in measured)
    bytes_per_packet = median(m["packet_bytes"] / m["packets"] for m in measured)
    return Benchmark(
        id="builder.scaling",
        group="builder",
        title="Growth with catalog size, and the 1000 × 20 catalog by extrapolation",
        figures=[
            Figure(
                name="build / floor, largest size over smallest",
                unit="ratio",
                ours=growth,
                better="lower",
                target="≈ 1 (linear growth; ≤ 1.25)",
                met=growth <= 1.25 if len(measured) > 1 else None,
            ),
            Figure(
                name="1000 families × 20 packets: floor, extrapolated",
                unit="s",
                ours=20_000 * floor_per_packet,
                better="lower",
                note="20,000 packets × the measured floor per packet; not run "
                f"(about {20_000 * bytes_per_packet / 1e9:.1f} GB of packets)",
            ),
            Figure(
                name="1000 families × 20 packets: build, extrapolated",
                unit="s",
                ours=20_000 * build_per_packet,
                better="lower",
                target=f"< {LARGE_LIMIT_S:.0f} s",
                met=20_000 * build_per_packet < LARGE_LIMIT_S,
                note="20,000 packets × the measured build time per packet",
            ),
            Figure(
                name="1000 families × 20 packets: peak memory, extrapolated",
                unit="GB",
                ours=20_000 * largest["build_maxrss_mb"] / largest["packets"] / 1024,
                better="lower",
                note="the builder holds every packet and every output file in memory at once",
            ),
        ],
        details={
            "build_s_per_packet": {
                f"{m['families']}x{m['packets_per_family']}": m["build_s"] / m["packets"] for m in measured
            },
            "floor_s_per_packet": {
                f"{m['families']}x{m['packets_per_family']}": m["floor_s"] / m["packets"] for m in measured
            },
            "build_over_floor": {
                f"{m['families']}x{m['packets_per_family']}": m["build_s"] / m["floor_s"] for m in measured
            },
        },
    )
