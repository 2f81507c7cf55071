"""Benchmark: how long `python -m catalog.verify` takes to refuse the hostile files that cost the
most to read (alias bombs, deep nesting, huge numbers, a 5 MB string; testkit/hostile_files.py),
each planted into a copy of data/ and the committed Qwen packets, in its own process: wall time
and peak RSS. The adversarial tests check each is refused cleanly; the time bound lives here."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from bench.common import REPO, Log, spawn_measured
from bench.results import Benchmark, Figure
from testkit.hostile_files import CASES, plant

LIMIT_S = 30.0
LIMIT_MB = 400.0
COSTLY = (
    "billion laughs (YAML aliases)",
    "alias bomb inside accepted fields",
    "100,000 nested brackets in YAML",
    "100,000 nested brackets in JSON",
    "100,000-digit integer in YAML",
    "100,000-digit integer in JSON",
    "huge string (5 MB title)",
)
QUICK = COSTLY[:2]


def _tree(root: Path) -> Path:
    shutil.copytree(REPO / "data", root / "data")
    (root / "packets").mkdir()
    for path in sorted((REPO / "packets").glob("qwen*.json")):
        shutil.copy(path, root / "packets" / path.name)
    return root


def _refusal(name: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        tree = _tree(Path(folder))
        plant(tree, *CASES[name])
        data, packets = str(tree / "data"), str(tree / "packets")
        argv = [sys.executable, "-m", "catalog.verify", "--data", data, "--packets", packets]
        child = spawn_measured(argv, timeout=10 * LIMIT_S)
    if child["returncode"] != 1 or "Traceback" in child["stderr"]:
        raise RuntimeError(f"{name}: not a clean refusal ({child['returncode']}): {child['stderr'][-1000:]}")
    return {"wall_s": child["wall_s"], "maxrss_mb": child["maxrss_mb"]}


def run(quick: bool, log: Log) -> list[Benchmark]:
    measured = {name: _refusal(name) for name in (QUICK if quick else COSTLY)}
    slowest = max(measured, key=lambda name: measured[name]["wall_s"])
    hungriest = max(measured, key=lambda name: measured[name]["maxrss_mb"])
    log(f"refusals: slowest {slowest} {measured[slowest]['wall_s']:.1f} s, most memory {hungriest}")
    wall, rss = measured[slowest]["wall_s"], measured[hungriest]["maxrss_mb"]
    return [
        Benchmark(
            id="builder.refusals",
            group="builder",
            title="`python -m catalog.verify` refusing the costliest hostile files",
            figures=[
                Figure(
                    name="slowest refusal",
                    unit="s",
                    ours=wall,
                    better="lower",
                    target=f"< {LIMIT_S:.0f} s",
                    met=wall < LIMIT_S,
                    note=slowest,
                ),
                Figure(
                    name="largest peak memory",
                    unit="MB",
                    ours=rss,
                    better="lower",
                    target=f"< {LIMIT_MB:.0f} MB",
                    met=rss < LIMIT_MB,
                    note=hungriest,
                ),
            ],
            details={"refusals": measured},
        )
    ]
