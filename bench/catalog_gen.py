"""Synthetic catalogs for the builder benchmark, cached under bench/out/catalogs/.

F families × P packets. Each family's recipe is data/models/demo.yaml with a new slug and title.
Each packet is a realistic measured campaign: two arms (oracle and speculative) × two fresh
servers × the twelve strict-suite prompts × 512 tokens, with token ids and per-token times,
every stored figure computed by catalog.metrics (as tests/catalog/factories.py builds them), so
load_catalog re-derives and accepts it. About 1.2 MB per packet, as the runner writes them.

Two templates are sealed through catalog.packet_io.seal (one published, one whose speculative
server diverges so its arm is withheld); each packet then rescales the template's token times
(a different speed per packet), recomputes the derived figures, re-hashes and is written with
catalog.canonical.pretty_json, the runner's own format. Every seventh packet is the withheld kind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.common import OUT, REPO
from catalog.canonical import pretty_json
from catalog.metrics import decode_rate, server_decode_rate, server_ttft_ms
from catalog.packet import packet_hash, packet_id

GENERATOR_VERSION = 1
TOKENS = 512
HARDWARE = "cpu_generic"
INPUTS = [
    REPO / "data" / "models" / "demo.yaml",
    REPO / "data" / "hardware.yaml",
    REPO / "data" / "suites" / "strict-v1.json",
    REPO / "data" / "suites" / "canaries-v1.json",
    REPO / "catalog" / "packet.py",
    REPO / "catalog" / "metrics.py",
    REPO / "catalog" / "canonical.py",
    Path(__file__),
]


def cache_key(families: int, packets: int) -> str:
    digest = hashlib.sha256(str(GENERATOR_VERSION).encode())
    for path in INPUTS:
        digest.update(path.read_bytes())
    return f"{families}x{packets}-{digest.hexdigest()[:10]}"


def slug(index: int) -> str:
    return f"bench-{index:04d}"


def ensure_catalog(families: int, packets: int, log: Any = print) -> tuple[Path, Path]:
    """(data dir, packets dir) of the catalog, generated once and reused while inputs are unchanged."""
    root = OUT / "catalogs" / cache_key(families, packets)
    data, packet_dir = root / "data", root / "packets"
    if (root / "complete").exists():
        return data, packet_dir
    for stale in (OUT / "catalogs").glob(f"{families}x{packets}-*"):
        shutil.rmtree(stale)
    log(f"builder: generating {families} families × {packets} packets into {root} (cached for reruns)")
    _write_data(data, families)
    packet_dir.mkdir(parents=True)
    jobs = [(family, index, str(packet_dir)) for family in range(families) for index in range(packets)]
    workers = max(1, min(2, os.cpu_count() or 1))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        list(pool.map(_write_packet_job, jobs, chunksize=16))
    (root / "complete").write_text("ok\n")
    return data, packet_dir


def _write_data(data: Path, families: int) -> None:
    (data / "models").mkdir(parents=True)
    shutil.copy(REPO / "data" / "hardware.yaml", data / "hardware.yaml")
    shutil.copytree(REPO / "data" / "suites", data / "suites")
    demo = (REPO / "data" / "models" / "demo.yaml").read_text()
    for index in range(families):
        text = demo.replace('slug: "demo"', f'slug: "{slug(index)}"', 1)
        text = text.replace('title: "Demo: tiny synthetic Qwen3 (CPU)"', f'title: "Bench family {index:04d}"', 1)
        (data / "models" / f"{slug(index)}.yaml").write_text(text)


@cache
def _templates() -> tuple[dict[str, Any], dict[str, Any]]:
    """Two sealed packets (dumped to JSON form), built by the test factories with 512 tokens."""
    import sys

    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from catalog.packet_io import seal
    from tests.catalog import factories

    original = factories.token_ids
    factories.token_ids = lambda prompt_index, n=TOKENS: original(prompt_index, n)
    try:
        kinds = []
        for diverges in (False, True):
            draft = factories.measured_draft(
                spec=True, g3_diverges=diverges, slug="bench-template", hardware=HARDWARE, ms_per_token=20.0
            )
            kinds.append(seal(draft).model_dump(mode="json"))
    finally:
        factories.token_ids = original
    return kinds[0], kinds[1]


def _write_packet_job(job: tuple[int, int, str]) -> None:
    family, index, directory = job
    packet = make_packet(family, index)
    Path(directory, f"{packet['id']}.json").write_text(pretty_json(packet), encoding="utf-8")


def make_packet(family: int, index: int) -> dict[str, Any]:
    published, withheld = _templates()
    template = withheld if index % 7 == 6 else published
    scale = 0.6 + 0.05 * ((family * 31 + index * 7) % 17)  # decode speeds vary across packets
    arms = []
    for arm in template["arms"]:
        servers = []
        for server in arm["servers"]:
            rows = [_scaled_row(row, scale) for row in server["rows"]]
            views = [
                SimpleNamespace(token_times_ms=r["token_times_ms"], class_id=r["class_id"], ttft_ms=r["ttft_ms"])
                for r in rows
            ]
            servers.append(
                {**server, "rows": rows, "decode_tok_s": server_decode_rate(views), "ttft_ms": server_ttft_ms(views)}  # type: ignore[arg-type]
            )
        arms.append({**arm, "servers": servers})
    model = {**template["identity"]["model"], "slug": slug(family)}
    packet = {
        **template,
        "title": f"Bench family {family:04d} · campaign {index:02d} · one CPU host",
        "created": f"2026-{1 + index % 12:02d}-{1 + family % 28:02d}T10:{index % 60:02d}:00Z",
        "identity": {**template["identity"], "model": model},
        "arms": arms,
    }
    digest = packet_hash(packet)
    packet["sha256"] = digest
    packet["id"] = packet_id(model["slug"], model["quantization"], digest)
    return packet


def _scaled_row(row: dict[str, Any], scale: float) -> dict[str, Any]:
    times = [round(t * scale, 3) for t in row["token_times_ms"]]
    return {**row, "token_times_ms": times, "ttft_ms": times[0], "decode_tok_s": decode_rate(times)}
