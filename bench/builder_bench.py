"""Benchmark 3: the builder at scale, against its own floor and the targets of issues 14 and 30.

For each size (families × packets per family) a synthetic catalog (bench/catalog_gen.py) is
built by `python -m builder build` as a subprocess (wall time, CPU and peak RSS of that child and
its workers, os.wait4):
- cold: an empty output folder and an empty cache (`XDG_CACHE_HOME` of its own): every packet
  verified, every page rendered, nothing remembered from any build before;
- one packet added: a new packet sealed into the catalog, then the build run on the current site
  (the packet is removed afterwards, so the cached catalog stays as generated);
- no-op: the same command again with nothing changed.
CPU per page kind comes from the cold build's own account (`--timings`), where every view is
made. The floor is `python -m bench.floor`: every packet read and verified once with
catalog.packets.verify.read_packet (bytes, digest, signature), in its own process (full runs:
before and after the builds, the mean; the 1000 × 20 floor over 2,000 packets, scaled). The load
average is recorded before and after each size. First, the cost of one committed packet against
its floor (bench/packet_cost.py); then the line count of the build machinery (issue 30); last,
how long verify takes to refuse the costliest hostile files (bench/refusal_bench.py).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from statistics import median
from typing import Any

from bench import packet_cost, refusal_bench
from bench.catalog_gen import bench_key, ensure_catalog, make_parts
from bench.common import OUT, REPO, Log, child_env, load_average, spawn_measured
from bench.results import Benchmark, Figure
from catalog.packets.layout import signature_path
from catalog.packets.seal import seal, write_packet

FULL_SIZES = ((10, 20), (100, 20), (1000, 20))
QUICK_SIZES = ((10, 20),)
PAGE_LIMIT_KB = 100.0
NOOP_LIMIT_S = 2.0
FLOOR_FACTOR = 3.0
# Issue 14's targets, for the 1000 × 20 catalog (about 21,000 pages)
LARGE = (1000, 20)
LARGE_LIMIT_S = 60.0
LARGE_MEMORY_MB = 2048.0
ADD_ONE_LIMIT_S = 5.0
LARGE_NOOP_LIMIT_S = 1.0
PAGE_CPU_LIMIT_MS = 3.0
LARGE_FLOOR_SAMPLE = 2000
BROWSER_SITE = OUT / "site-browser"
BROWSER_SIZE = QUICK_SIZES[0]  # the smallest catalog, in both runs: its site is the browser benchmark's
# Issue 30: the build machinery (builder/ outside views/, but for the features charts, format,
# markdown, seo and api; and the catalog's summary cache and forked helpers) falls by 30 % from
# its count on the day the issue was taken up (builder 2,734 lines, catalog/store/cache.py 290
# and catalog/forked.py 92, at 29753d3).
MACHINERY_BEFORE = 3116
MACHINERY_FEATURES = ("charts.py", "format.py", "markdown.py", "seo.py", "api.py")
MACHINERY_CATALOG = ("catalog/store/cache.py", "catalog/forked.py")


def _floor(packets: Path, data: Path, limit: int | None = None) -> dict[str, Any]:
    """The floor's seconds for every packet; with `limit`, measured over that many and scaled."""
    argv = [sys.executable, "-m", "bench.floor", str(packets), str(data)] + ([str(limit)] if limit else [])
    child = spawn_measured(argv)
    if child["returncode"] != 0:
        raise RuntimeError(f"floor failed: {child['stderr'][-2000:]}")
    result: dict[str, Any] = json.loads(child["stdout"].strip().splitlines()[-1])
    result["seconds"] *= result["packets"] / result["read"]
    return result


def _build(data: Path, packets: Path, out: Path, cache_home: Path, timings: Path | None = None) -> dict[str, Any]:
    argv = [sys.executable, "-m", "builder", "build", "--data", str(data), "--packets", str(packets), "--out", str(out)]
    argv += ["--strict"]  # a warning fails the run: a catalog the build flags is not the one measured
    argv += ["--timings", str(timings)] if timings is not None else []
    child = spawn_measured(argv, env={**child_env(), "XDG_CACHE_HOME": str(cache_home)})
    if child["returncode"] != 0:
        raise RuntimeError(f"build failed ({child['returncode']}): {child['stderr'][-3000:]}")
    return child


def _add_one_then_noop(
    data: Path, packets: Path, out: Path, cache_home: Path, per_family: int, timings: Path
) -> tuple[Any, Any]:
    """Seal one more campaign into the first family and rebuild the current site, then the same
    build again (the no-op); then take the packet out, so the cached catalog stays as generated."""
    added = write_packet(seal(make_parts(0, per_family), bench_key()), packets)
    try:
        return _build(data, packets, out, cache_home, timings), _build(data, packets, out, cache_home)
    finally:
        added.unlink()
        signature_path(added).unlink(missing_ok=True)


def machinery_lines() -> dict[str, int]:
    """Lines of each module of the build machinery, as issue 30 counts it."""
    found = {
        path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted((REPO / "builder").glob("*.py"))
        if path.name not in MACHINERY_FEATURES
    }
    for name in MACHINERY_CATALOG:
        if (REPO / name).is_file():
            found[name] = len((REPO / name).read_text(encoding="utf-8").splitlines())
    return found


def _machinery_benchmark() -> Benchmark:
    lines = machinery_lines()
    total = sum(lines.values())
    limit = 0.7 * MACHINERY_BEFORE
    return Benchmark(
        id="builder.machinery",
        group="builder",
        title="The build machinery, in lines (issue 30)",
        figures=[
            Figure(
                name="build machinery",
                unit="lines",
                ours=total,
                peer=MACHINERY_BEFORE,
                better="lower",
                target=f"≤ {limit:,.0f} (30 % under {MACHINERY_BEFORE:,})",
                met=total <= limit,
                note="builder/*.py but charts, format, markdown, seo and api, and catalog/forked.py (and the "
                "summary cache, catalog/store/cache.py, while it existed); peer column: the count at 29753d3",
            )
        ],
        details={"lines": lines},
    )


def _hard_linked(out: Path, packets: Path) -> tuple[int, int]:
    """How many of the site's packet files are the very files of `packets/` (hard links)."""
    linked = total = 0
    for path in (out / "packets").glob("*.json"):
        total += 1
        source = packets / path.name
        linked += source.exists() and path.stat().st_ino == source.stat().st_ino
    return linked, total


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
        shutil.rmtree(cache_home, ignore_errors=True)  # a cold build: nothing remembered, no spare
        load_before = load_average()
        # the 1000 x 20 floor alone is minutes of one core: measured over its first 2,000 packets
        floor_a = _floor(packets, data, LARGE_FLOOR_SAMPLE if (families, per_family) == LARGE else None)
        cold_timings = OUT / f"timings-{families}x{per_family}-cold.json"
        cold = _build(data, packets, out, cache_home, cold_timings)
        linked, packet_files = _hard_linked(out, packets)
        load_cold = load_average()
        added_timings = OUT / f"timings-{families}x{per_family}-one-added.json"
        added, noop = _add_one_then_noop(data, packets, out, cache_home, per_family, added_timings)
        once = quick or (families, per_family) == LARGE
        floor_b = floor_a if once else _floor(packets, data)  # full runs: floor before and after, mean
        stats = _site_stats(out)
        floor_s = (floor_a["seconds"] + floor_b["seconds"]) / 2
        added_report = json.loads(added_timings.read_text())
        result = {
            "families": families,
            "packets_per_family": per_family,
            "packets": floor_a["packets"],
            "packet_bytes": floor_a["bytes"],
            "build_s": cold["wall_s"],
            "build_cpu_s": cold["cpu_s"],
            "build_maxrss_mb": cold["maxrss_mb"],
            "packet_files_linked": linked,
            "packet_files": packet_files,
            "add_one_s": added["wall_s"],
            "add_one_cpu_s": added["cpu_s"],
            "add_one_said": added["stdout"].strip()[-200:],
            "add_one_pages_rendered": {k: v["pages"] for k, v in added_report["pages"].items()},
            "add_one_phases_s": added_report["phases_s"],
            "noop_s": noop["wall_s"],
            "noop_said": noop["stdout"].strip()[-200:],
            "page_cpu_ms": json.loads(cold_timings.read_text())["pages"],
            "cold_phases_s": json.loads(cold_timings.read_text())["phases_s"],
            "floor_s": floor_s,
            "floor_runs_s": [floor_a["seconds"], floor_b["seconds"]],
            "floor_read": floor_a["read"],
            "load_average_before": load_before,
            "load_average_after_cold": load_cold,
            "load_average_after": load_average(),
            **stats,
        }
        measured.append(result)
        log(
            f"builder: {families}×{per_family}: cold {cold['wall_s']:.1f} s ({cold['cpu_s']:.1f} s CPU; floor "
            f"{floor_s:.1f} s), one added {added['wall_s']:.1f} s, no-op {noop['wall_s']:.2f} s, peak "
            f"{cold['maxrss_mb']:.0f} MB, packets linked {linked}/{packet_files}, load {load_before} -> "
            f"{load_average()}"
        )
        if (families, per_family) == BROWSER_SIZE:
            _keep_for_browser(out)
        else:
            shutil.rmtree(out, ignore_errors=True)  # gigabytes: do not keep
        shutil.rmtree(cache_home, ignore_errors=True)
    sized = [_size_benchmark(m) for m in measured] + [_scaling_benchmark(measured)]
    return [*packet, _machinery_benchmark(), *sized, *refusal_bench.run(quick, log)]


def _keep_for_browser(out: Path) -> None:
    shutil.rmtree(BROWSER_SITE, ignore_errors=True)
    out.rename(BROWSER_SITE)


def ensure_browser_site(log: Log) -> Path:
    """The browser benchmark's site: the one the builder group keeps, or, where no builder run left
    one (a fresh checkout's `--only browser`), built here as the builder group builds it, untimed:
    the smallest catalog built cold, then with one packet added (the site the group keeps)."""
    if any(BROWSER_SITE.glob("models/*/index.html")):
        return BROWSER_SITE
    families, per_family = BROWSER_SIZE
    log(f"browser: no site at {BROWSER_SITE}: building the {families}×{per_family} catalog's as the builder group does")
    data, packets = ensure_catalog(families, per_family, log)
    out, cache_home = OUT / "site-browser-building", OUT / "cache-browser"
    for folder in (out, cache_home):
        shutil.rmtree(folder, ignore_errors=True)
    _build(data, packets, out, cache_home)
    _add_one_then_noop(data, packets, out, cache_home, per_family, OUT / "timings-browser-one-added.json")
    _keep_for_browser(out)
    shutil.rmtree(cache_home, ignore_errors=True)
    return BROWSER_SITE


def _size_benchmark(m: dict[str, Any]) -> Benchmark:
    families, per_family = m["families"], m["packets_per_family"]
    large = (families, per_family) == LARGE

    def target(limit: str, met: bool) -> dict[str, Any]:
        return {"target": limit, "met": met} if large else {}

    kinds = m["page_cpu_ms"]
    page_figures = [
        Figure(
            name=f"CPU per page: {kind} ({info['pages']:,} pages)",
            unit="ms",
            ours=info["cpu_ms_per_page"],
            better="lower",
            **target(f"< {PAGE_CPU_LIMIT_MS:.0f} ms", info["cpu_ms_per_page"] < PAGE_CPU_LIMIT_MS),
        )
        for kind, info in sorted(kinds.items(), key=lambda item: -item[1]["pages"])
    ]
    noop_limit = LARGE_NOOP_LIMIT_S if large else NOOP_LIMIT_S
    return Benchmark(
        id=f"builder.{families}x{per_family}",
        group="builder",
        title=f"Full build: {families} families × {per_family} packets ({m['packets']:,} packets, "
        f"{m['packet_bytes'] / 1e9:.2f} GB, {m['html_pages']:,} pages)",
        peer="floor: catalog.packets.verify.read_packet over every packet, once",
        figures=[
            Figure(
                name="full build",
                unit="s",
                ours=m["build_s"],
                peer=m["floor_s"],
                better="closer",
                target=f"≤ {FLOOR_FACTOR:.0f}× floor" + (f"; < {LARGE_LIMIT_S:.0f} s" if large else ""),
                met=m["build_s"] <= FLOOR_FACTOR * m["floor_s"] and (not large or m["build_s"] < LARGE_LIMIT_S),
                note="cold: empty output and empty cache, every packet verified, every page rendered; peer column: "
                "the floor"
                + (f" (measured over {m['floor_read']:,} packets, scaled)" if m["floor_read"] < m["packets"] else ""),
            ),
            Figure(
                name="full build, CPU time of every process",
                unit="s",
                ours=m["build_cpu_s"],
                peer=m["floor_s"],
                better="closer",
                note="the build verifies and renders on every core, the floor reads in one process",
            ),
            Figure(
                name="packet files hard-linked into the site",
                unit="files",
                ours=m["packet_files_linked"],
                peer=m["packet_files"],
                better="closer",
                note="site/packets/*.json that are the very files of packets/: publishing copies no packet",
            ),
            Figure(
                name="one packet added, rebuild",
                unit="s",
                ours=m["add_one_s"],
                better="lower",
                **target(f"< {ADD_ONE_LIMIT_S:.0f} s", m["add_one_s"] < ADD_ONE_LIMIT_S),
                note="its family verified and made again; the pages that depend on it rendered, the rest kept",
            ),
            Figure(
                name="peak memory (ru_maxrss)",
                unit="MB",
                ours=m["build_maxrss_mb"],
                better="lower",
                **target(f"< {LARGE_MEMORY_MB / 1024:.0f} GB", m["build_maxrss_mb"] < LARGE_MEMORY_MB),
                note="the largest process of the cold build (os.wait4)",
            ),
            Figure(
                name="no-op rebuild",
                unit="s",
                ours=m["noop_s"],
                better="lower",
                target=f"< {noop_limit:.0f} s",
                met=m["noop_s"] < noop_limit,
            ),
            *page_figures,
            Figure(name="time per HTML page (wall, cold)", unit="ms", ours=1000 * m["build_s"] / m["html_pages"]),
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

    def by_size(value: Any) -> dict[str, float]:
        return {f"{m['families']}x{m['packets_per_family']}": value(m) for m in measured}

    return Benchmark(
        id="builder.scaling",
        group="builder",
        title="Growth with catalog size",
        figures=[
            Figure(
                name="build / floor, largest size over smallest",
                unit="ratio",
                ours=growth,
                better="lower",
                target="≈ 1 (linear growth; ≤ 1.25)",
                met=growth <= 1.25 if len(measured) > 1 else None,
            ),
        ],
        details={
            "build_s_per_packet": by_size(lambda m: m["build_s"] / m["packets"]),
            "floor_s_per_packet": by_size(lambda m: m["floor_s"] / m["packets"]),
            "build_over_floor": by_size(lambda m: m["build_s"] / m["floor_s"]),
        },
    )
