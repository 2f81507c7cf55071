"""Benchmark 3a: what one committed packet costs to store and to trust, against its floor.

The committed demo packet (packets/demo-bf16-*.json, a real CPU campaign: 2 arms × 2 fresh
servers × 12 prompts × 512 tokens), measured in a fresh process (`python -m bench.packet_cost`,
timed after the imports, with its own CPU clock, so no other thread of the benchmark counts):
its file size, and the CPU time (time.process_time) of
- the floor (`verify.floor`), each part on the same bytes: read them; sha256 of them; the fastest
  JSON decode installed (orjson or msgspec, whichever is faster this run); the Ed25519 check of
  its DSSE signature (cryptography's, over DSSE's pre-authentication encoding of the payload);
  and decoding its base64 token arrays into integers (binascii, the C decoder the packet reader
  uses). No verifier can do less: these are reading, hashing, parsing, checking the signature and
  decoding what is signed;
- the full verification (catalog.packets.verify.verify against data/keys.yaml: strict types, the
  canonical-bytes rule, the digest and name, the signature by a listed key, every figure, gate
  and check re-derived from the rows), which is what every build and `make verify` pays;
- reading and hash-checking it alone (read_packet without keys);
- the same packet without its load sweeps (`_without_load_sweeps`), its floor and its full
  verification: what the sweeps' requests cost, and what the rest costs against its own floor.
Every part and the full verification alternate run by run (one of each per round, after a
warm-up), so the load of this shared machine falls on both alike; the figures are medians, and
the target is the ratio of the full verification to the sum of the floor's parts.

    python -m bench.packet_cost [RUNS]
"""

from __future__ import annotations

import argparse
import binascii
import hashlib
import json
import shutil
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

from bench.common import REPO, Log, spawn_measured
from bench.results import Benchmark, Figure

# Its arms (2 x 2 fresh servers x 12 prompts x 512 tokens) under 300 KB; its three ladders of both arms
# (a load sweep of 16 requests x 8 levels each, concurrency c1-c8, the 2K context depth) add ~60 KB.
SIZE_LIMIT_KB = 400.0
FLOOR_FACTOR = 2.0
RUNS, QUICK_RUNS = 400, 60
WARMUP = 5


def demo_packet() -> Path:
    from catalog.packets.layout import is_signature

    found = sorted(p for p in (REPO / "packets").glob("demo-bf16-*.json") if not is_signature(p))
    if len(found) != 1:
        raise RuntimeError(f"expected one committed demo packet in packets/, found {[p.name for p in found]}")
    return found[0]


def _arrays(document: Any) -> list[str]:
    """Every base64 token array of a packet document, as text."""
    return [
        row[name]
        for arm in document["arms"]
        for server in arm["servers"]
        for row in server["rows"]
        for name in ("token_ids", "token_times_us")
    ]


def _floor_parts(path: Path, data_dir: Path = REPO / "data") -> dict[str, Callable[[], object]]:
    """The floor's parts, each a call on this packet's bytes (what they need made beforehand)."""
    import msgspec
    import orjson
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from securesystemslib.dsse import Envelope

    from catalog.packets.keys import load_keys
    from catalog.packets.layout import signature_path

    data = path.read_bytes()
    envelope = Envelope.from_dict(json.loads(signature_path(path).read_bytes()))
    keyid, signature = next(iter(envelope.signatures.items()))
    public = Ed25519PublicKey.from_public_bytes(
        bytes.fromhex(load_keys(data_dir / "keys.yaml").by_id()[keyid].public_key)
    )
    signed = envelope.pae()
    sig = bytes.fromhex(signature.signature)
    texts = _arrays(orjson.loads(data))

    def decode_arrays() -> None:
        for text in texts:
            array("I").frombytes(binascii.a2b_base64(text))

    return {
        "read": path.read_bytes,
        "sha256": lambda: hashlib.sha256(data).hexdigest(),
        "json orjson": lambda: orjson.loads(data),
        "json msgspec": lambda: msgspec.json.decode(data),
        "ed25519": lambda: public.verify(sig, signed),
        "arrays": decode_arrays,
    }


LEAN = "without load sweeps:"  # the prefix of that packet's measurements
STAGES = ("validation", "canonical", "sha256", "signature", "evidence", "consistency", "against data")


def _stages(path: Path, packet: Any, keys: Any, reference: Any) -> dict[str, Callable[[], object]]:
    """The full verification's stages, each alone on this packet (catalog/packets/verify.py calls
    them in this order), so the report says where its time goes beyond the floor."""
    from datetime import UTC, datetime

    from catalog.checks.consistency import packet_problems
    from catalog.checks.cross_check import cross_check
    from catalog.checks.dates import signed_day
    from catalog.checks.evidence import evidence_problems
    from catalog.model.packet import Packet
    from catalog.packets.canonical import sha256_hex
    from catalog.packets.layout import signature_path
    from catalog.packets.seal import packet_bytes
    from catalog.packets.signing import verify_packet_signature

    data, envelope = path.read_bytes(), signature_path(path).read_bytes()
    digest, now, made_on = sha256_hex(data), datetime.now(UTC), signed_day(packet)
    return {
        "stage validation": lambda: Packet.model_validate_json(data, strict=True),
        "stage canonical": lambda: packet_bytes(packet, as_read=True) == data,
        "stage sha256": lambda: sha256_hex(data),
        "stage signature": lambda: verify_packet_signature(
            envelope, digest, path.name, keys, role="measurer", file=signature_path(path), made_on=made_on
        ),
        "stage evidence": lambda: evidence_problems(packet),
        "stage consistency": lambda: packet_problems(packet, now),
        "stage against data": lambda: cross_check(packet, path, reference),
    }


def _without_load_sweeps(packet: Any, root: Path) -> tuple[Path, Any]:
    """The demo packet without its load sweeps, sealed again by the bench's key (bench/catalog_gen.py)
    beside a copy of data/ whose keys.yaml lists that key: the same packet, less the sweeps' requests,
    so the figure says what they cost verification and what the rest costs against its own floor."""
    from bench.catalog_gen import bench_key, bench_keys_yaml
    from catalog.packets.seal import parts_of, seal, write_packet
    from catalog.store.repository import load_data

    shutil.copytree(REPO / "data", root / "data")
    key = bench_key()
    keys = bench_keys_yaml(key, "bench/packet_cost.py")
    (root / "data" / "keys.yaml").write_text(keys, encoding="utf-8")
    parts = parts_of(packet)
    parts = parts.model_copy(update={"ladders": [ladder for ladder in parts.ladders if ladder.kind != "load"]})
    (root / "packets").mkdir()
    return write_packet(seal(parts, key), root / "packets"), load_data(root / "data")


def measure(runs: int) -> dict[str, Any]:
    from catalog.packets.layout import signature_path
    from catalog.packets.verify import Verified, read_packet, verify
    from catalog.store.repository import load_data

    path = demo_packet()
    data = load_data(REPO / "data")
    keys, reference = data.keys, data.reference
    result = verify(path, keys, reference=reference)
    if not isinstance(result, Verified) or not result.packet.signed:
        problems = [] if isinstance(result, Verified) else [*result.problems, *result.against_data]
        raise RuntimeError(f"{path.name} does not verify: {[str(p) for p in problems]}")
    packet = result.packet
    rows = [row for arm in packet.arms for server in arm.servers for row in server.rows]
    with tempfile.TemporaryDirectory() as temporary:
        lean, lean_data = _without_load_sweeps(packet, Path(temporary))
        if not isinstance(verify(lean, lean_data.keys, reference=lean_data.reference), Verified):
            raise RuntimeError(f"{path.name} without its load sweeps does not verify")
        actions: dict[str, Callable[[], object]] = {
            **_floor_parts(path),
            **_stages(path, packet, keys, reference),
            "hash_check": lambda: read_packet(path, None),
            "verify": lambda: verify(path, keys, reference=reference),
            **{f"{LEAN} {name}": part for name, part in _floor_parts(lean, Path(temporary) / "data").items()},
            f"{LEAN} verify": lambda: verify(lean, lean_data.keys, reference=lean_data.reference),
        }
        samples: dict[str, list[float]] = {name: [] for name in actions}
        for round_ in range(WARMUP + runs):
            for name, action in actions.items():
                started = time.process_time()
                action()
                if round_ >= WARMUP:
                    samples[name].append(1000 * (time.process_time() - started))
        lean_bytes = lean.stat().st_size
    cpu = {name: _summary(values) for name, values in samples.items()}
    parts = _floor_of(cpu, "")
    lean_parts = _floor_of(cpu, f"{LEAN} ")
    return {
        "without_load_sweeps": {
            "bytes": lean_bytes,
            "requests": sum(
                len(level.requests) for ladder in packet.ladders if ladder.load for level in ladder.load.levels
            ),
            "floor_ms": sum(lean_parts.values()),
            "verify_ms": cpu[f"{LEAN} verify"]["median_ms"],
        },
        "packet": path.name,
        "bytes": path.stat().st_size,
        "signature_bytes": signature_path(path).stat().st_size,
        "rows": len(rows),
        "arrays": len(rows) * 2,
        "tokens": sum(len(row.token_ids) for row in rows),
        "runs": runs,
        "cpu": cpu,
        "floor_parts_ms": parts,
        "floor_ms": sum(parts.values()),
        "stages_ms": {name: cpu[f"stage {name}"]["median_ms"] for name in STAGES},
        "json_decoder": "orjson" if parts["json"] == cpu["json orjson"]["median_ms"] else "msgspec",
    }


def _floor_of(cpu: dict[str, dict[str, float]], prefix: str) -> dict[str, float]:
    """The floor's parts' medians, the faster JSON decoder's."""
    parts = {name: cpu[prefix + name]["median_ms"] for name in ("read", "sha256", "ed25519", "arrays")}
    parts["json"] = min(cpu[prefix + "json orjson"]["median_ms"], cpu[prefix + "json msgspec"]["median_ms"])
    return parts


def _summary(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    return {"median_ms": median(values), "min_ms": values[0], "p90_ms": values[int(0.9 * (len(values) - 1))]}


def run(quick: bool, log: Log) -> list[Benchmark]:
    child = spawn_measured([sys.executable, "-m", "bench.packet_cost", str(QUICK_RUNS if quick else RUNS)])
    if child["returncode"] != 0:
        raise RuntimeError(f"packet cost failed: {child['stderr'][-2000:]}")
    m: dict[str, Any] = json.loads(child["stdout"].strip().splitlines()[-1])
    tokens = m["tokens"]
    verify_ms, floor_ms = m["cpu"]["verify"]["median_ms"], m["floor_ms"]
    parts, stages, lean = m["floor_parts_ms"], m["stages_ms"], m["without_load_sweeps"]
    log(
        f"packet: {m['packet']}: {m['bytes'] / 1000:.0f} KB, full verification {verify_ms:.2f} ms CPU, "
        f"floor {floor_ms:.2f} ms (ratio {verify_ms / floor_ms:.2f}, median of {m['runs']})"
    )
    return [
        Benchmark(
            id="packet.demo",
            group="builder",
            title=f"One committed packet: {m['packet']} ({m['rows']} rows, {tokens:,} recorded tokens)",
            peer="verify.floor: read + sha256 + fastest JSON decode + Ed25519 check + array decode, same bytes",
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
                Figure(
                    name="verify.floor",
                    unit="ms",
                    ours=floor_ms,
                    better="lower",
                    note=f"read {parts['read']:.3f} + sha256 {parts['sha256']:.3f} + {m['json_decoder']} "
                    f"{parts['json']:.3f} + Ed25519 {parts['ed25519']:.3f} + {m['arrays']} arrays "
                    f"{parts['arrays']:.3f} ms",
                ),
                Figure(
                    name="read and hash-check (read_packet, no keys), CPU",
                    unit="ms",
                    ours=m["cpu"]["hash_check"]["median_ms"],
                    better="lower",
                    note="strict validation, canonical-form check, sha256 of the bytes, the name it gives",
                ),
                Figure(
                    name="full verification (verify), CPU of one core",
                    unit="ms",
                    ours=verify_ms,
                    peer=floor_ms,
                    better="closer",
                    target=f"≤ {FLOOR_FACTOR:.0f}× verify.floor",
                    met=verify_ms <= FLOOR_FACTOR * floor_ms,
                    note=f"time.process_time, median of {m['runs']} runs alternating with the floor's parts "
                    f"(min {m['cpu']['verify']['min_ms']:.2f}, p90 {m['cpu']['verify']['p90_ms']:.2f} ms): strict "
                    "types, canonical bytes, digest, signature against data/keys.yaml, every figure, gate and "
                    "check re-derived, and every claim checked against data/ (model facts, physics, commands, "
                    "suite, canaries judged again), as every reader verifies; peer column: the floor",
                ),
                Figure(
                    name="full verification of the demo packet without its load sweeps, CPU of one core",
                    unit="ms",
                    ours=lean["verify_ms"],
                    peer=lean["floor_ms"],
                    better="closer",
                    note=f"ratio {lean['verify_ms'] / lean['floor_ms']:.2f}: the demo packet less its load sweeps' "
                    f"{lean['requests']} requests ({lean['bytes'] / 1000:.0f} KB), sealed again by the bench's key; "
                    f"those requests cost {verify_ms - lean['verify_ms']:.2f} ms of the full verification; "
                    "peer column: this packet's own floor",
                ),
                Figure(
                    name="verification's stages, each alone, summed",
                    unit="ms",
                    ours=sum(stages.values()),
                    peer=floor_ms,
                    better="lower",
                    note=" + ".join(f"{name} {ms:.2f}" for name, ms in stages.items())
                    + " ms (catalog/packets/verify.py's order); peer column: the floor",
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


def _runs(text: str) -> int:
    """RUNS on the command line: a whole number, at least 1 (the figures are medians of the runs)."""
    try:
        runs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"RUNS must be a whole number, not {text!r}") from None
    if runs < 1:
        raise argparse.ArgumentTypeError(f"RUNS must be at least 1 (the figures are medians of the runs), not {runs}")
    return runs


def main(argv: list[str] | None = None) -> None:
    top = argparse.ArgumentParser(prog="python -m bench.packet_cost", description=__doc__.splitlines()[0])
    top.add_argument("runs", metavar="RUNS", nargs="?", type=_runs, default=RUNS, help=f"rounds (default {RUNS})")
    print(json.dumps(measure(top.parse_args(argv).runs)))


if __name__ == "__main__":
    main()
