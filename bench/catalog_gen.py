"""Synthetic catalogs for the builder benchmark, cached under bench/out/catalogs/.

F families × P packets. Each family's recipe is data/models/demo.yaml with a new slug and title.
Each packet is a realistic measured campaign: two arms (oracle and speculative) × two fresh
servers × the twelve strict-suite prompts × 512 tokens, its arms the ones `make measure DEPTHS=0,3`
plans for the demo recipe on cpu_generic (runner.plan.plan_arms, recorded by runner.campaign.arm_parts:
the recipe's command, its VLLM_CPU_KVCACHE_SPACE, n-gram at depth 3), so every command a page shows
beside them is the command that produced them (catalog/checks/commands.py), with token ids and per-token times,
built as parts by testkit.samples (every stored figure computed by catalog.model.metrics, every canary
verdict by catalog.checks.canaries), so load_catalog re-derives and accepts it. Its identity is the demo
recipe's (repo local/demo-qwen3-tiny, synthetic, vLLM on the CPU) under the family's slug.

Each packet gets its own speed (a different time per token, so decode rates vary across packets)
and is sealed through catalog.packets.seal.seal and written by write_packet, exactly as the runner
writes them: canonical bytes, the digest in the name, and a DSSE signature by a bench measurer key.
That key lives under the system temp folder (never in the repository) and the generated data
dir's keys.yaml lists it, so the builder verifies every signature. Every seventh packet's
speculative server diverges, so its arm is withheld.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from bench.common import OUT, REPO
from catalog.model.packet import PacketParts
from catalog.packets.seal import seal, write_packet
from catalog.packets.signing import HostKey, host_key
from catalog.recipes.hardware import HardwareFile
from catalog.recipes.recipe import Recipe
from catalog.store.documents import load_file
from runner.campaign import arm_parts
from runner.plan import CampaignRequest, plan_arms
from testkit.samples import PlannedArm, measured_parts

# 2: schema 2 packets, sealed and signed, created in the past; 3: keys.yaml a test catalog; 4: arms as the
# runner plans and records them for the recipe
GENERATOR_VERSION = 4
TOKENS = 512
HARDWARE = "cpu_generic"
DEPTHS = [0, 3]  # the demo recipe's own campaign (its guide's `make measure MODEL=demo DEPTHS=0,3`)
KEY_DIR = Path(tempfile.gettempdir()) / "llm-serving-catalog-bench" / "keys"
INPUTS = [
    REPO / "data" / "models" / "demo.yaml",
    REPO / "data" / "hardware.yaml",
    REPO / "data" / "suites" / "strict-v1.json",
    REPO / "data" / "suites" / "canaries-v1.json",
    REPO / "catalog" / "model" / "packet.py",
    REPO / "catalog" / "packets" / "seal.py",
    REPO / "catalog" / "model" / "arrays.py",
    REPO / "testkit" / "samples.py",
    REPO / "catalog" / "model" / "metrics.py",
    REPO / "catalog" / "checks" / "canaries.py",
    REPO / "catalog" / "packets" / "canonical.py",
    REPO / "catalog" / "packets" / "signing.py",
    REPO / "catalog" / "recipes" / "compose.py",
    REPO / "catalog" / "recipes" / "recipe.py",
    REPO / "catalog" / "recipes" / "hardware.py",
    REPO / "runner" / "plan.py",
    REPO / "runner" / "campaign.py",
    Path(__file__),
]
# The demo recipe's identity (data/models/demo.yaml and the committed demo packet), under each
# family's slug: a synthetic model served by vLLM on the CPU.
DEMO_IDENTITY: dict[str, dict[str, Any]] = {
    "model": {
        "variant": "default",
        "repo": "local/demo-qwen3-tiny",
        "revision": None,
        "quantization": "bf16",
        "quantization_label": "BF16",
        "weight_bytes": 2_388_832,
        "synthetic": True,
        "synthetic_note": (
            "random weights generated locally by runner/demo_model.py; its speed says nothing about real models"
        ),
    },
    "runtime": {"platform": "cpu", "version": "0.32.0", "label": "vLLM CPU 0.32.0 (local install)"},
    "host": {"card_count": 1, "boot_id": None, "cpu": "bench host"},
}


def cache_key(families: int, packets: int) -> str:
    digest = hashlib.sha256(str(GENERATOR_VERSION).encode())
    for path in INPUTS:
        digest.update(path.read_bytes())
    return f"{families}x{packets}-{digest.hexdigest()[:10]}"


def slug(index: int) -> str:
    return f"bench-{index:04d}"


@cache
def bench_key() -> HostKey:
    """The bench's measurer key, made on first use under the system temp folder."""
    return host_key(role="measurer", config_dir=KEY_DIR)


def bench_keys_yaml(key: HostKey, label: str) -> str:
    """A test catalog's data/keys.yaml listing only the bench's key."""
    return "schema_version: 1\ntest_catalog: true\nkeys:\n" + key.keys_yaml_entry(label, dated=False)


def ensure_catalog(families: int, packets: int, log: Any = print) -> tuple[Path, Path]:
    """(data dir, packets dir) of the catalog, generated once and reused while inputs are unchanged."""
    root = OUT / "catalogs" / cache_key(families, packets)
    data, packet_dir = root / "data", root / "packets"
    if (root / "complete").exists():
        return data, packet_dir
    for stale in (OUT / "catalogs").glob(f"{families}x{packets}-*"):
        shutil.rmtree(stale)
    log(f"builder: generating {families} families × {packets} packets into {root} (cached for reruns)")
    key = bench_key()  # made here, before the workers, which load it
    _write_data(data, families, key)
    packet_dir.mkdir(parents=True)
    jobs = [(family, index, str(packet_dir)) for family in range(families) for index in range(packets)]
    workers = max(1, min(2, os.cpu_count() or 1))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        list(pool.map(_write_packet_job, jobs, chunksize=16))
    (root / "complete").write_text("ok\n")
    return data, packet_dir


def _write_data(data: Path, families: int, key: HostKey) -> None:
    (data / "models").mkdir(parents=True)
    shutil.copy(REPO / "data" / "hardware.yaml", data / "hardware.yaml")
    shutil.copytree(REPO / "data" / "suites", data / "suites")
    keys = bench_keys_yaml(key, "benchmark catalog generator (bench/catalog_gen.py)")
    (data / "keys.yaml").write_text(keys, encoding="utf-8")
    demo = (REPO / "data" / "models" / "demo.yaml").read_text()
    for index in range(families):
        text = demo.replace('slug: "demo"', f'slug: "{slug(index)}"', 1)
        text = text.replace('title: "Demo: tiny synthetic Qwen3 (CPU)"', f'title: "Bench family {index:04d}"', 1)
        (data / "models" / f"{slug(index)}.yaml").write_text(text)


def _write_packet_job(job: tuple[int, int, str]) -> None:
    family, index, directory = job
    write_packet(seal(make_parts(family, index), bench_key()), Path(directory))


@cache
def planned_arms() -> tuple[PlannedArm, ...]:
    """The oracle and the n-gram arm as the runner plans them for the demo recipe on the CPU and
    records them in a packet (every family's recipe is the demo's under another slug: same commands).
    No launch command: these servers never ran, so there is no exact command line to record."""
    recipe = load_file(Recipe, REPO / "data" / "models" / "demo.yaml")
    hardware = load_file(HardwareFile, REPO / "data" / "hardware.yaml").by_id()[HARDWARE]
    request = CampaignRequest(model=recipe.meta.slug, hardware=HARDWARE, depths=DEPTHS, max_tokens=TOKENS)
    plans = plan_arms(request, recipe, hardware, "data/models/demo.yaml")
    recorded = [arm_parts(plan, [], [], request) for plan in plans]
    return tuple(PlannedArm(arm.id, arm.label, arm.config.model_dump(mode="json")) for arm in recorded)


def make_parts(family: int, index: int) -> PacketParts:
    """One campaign's parts: its own decode speed, the withheld kind every seventh packet."""
    # decode speeds vary across packets, 0.6-1.4x the base time per token as before; 23 steps, a
    # prime above the 20 campaigns of a family, so no two of them share a speed (and token timings:
    # a 17-step cycle made 3 of every 20 copies, refused as repeats)
    scale = 0.6 + 0.8 * ((family * 31 + index * 7) % 23) / 22
    parts = measured_parts(
        spec=True,
        g3_diverges=index % 7 == 6,
        title=f"Bench family {family:04d} · campaign {index:02d} · one CPU host",
        ms_per_token=20.0 * scale,
        n_tokens=TOKENS,
        identity_overrides=DEMO_IDENTITY,
        slug=slug(family),
        hardware=HARDWARE,
        planned=planned_arms(),
    )
    created = datetime(2025, 1 + index % 12, 1 + family % 28, 10, index % 60, tzinfo=UTC)
    return parts.model_copy(update={"created": created})
