"""`python -m catalog migrate`: re-seal schema 1 packets as schema 2.

A schema 1 file is migrated only if its own seal still holds (sha256 of its canonical JSON
without `id` and `sha256`): migration must not launder an edited file into a signed one.
What schema 1 did not record is not invented: canary verdicts without their answers are
dropped (the arm's note says so), and every derived number is re-derived from the rows.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from catalog.errors import CatalogError, exit_on_user_error
from catalog.model.arrays import to_uint32
from catalog.model.metrics import server_decode_rate, server_ttft_ms
from catalog.model.packet import ArmParts, PacketParts, PromptRow
from catalog.packets.canonical import canonical_sha256
from catalog.packets.seal import made_from, seal, write_packet
from catalog.packets.signing import host_key
from catalog.store.documents import read_document

V1_HASH_EXCLUDED = ("id", "sha256")
CANARIES_DROPPED = "schema 1 recorded canary verdicts without the answers they judged; they were dropped in migration"


def v1_document(path: Path) -> dict[str, Any]:
    _, data = read_document(path)
    if not isinstance(data, dict) or data.get("schema_version") != 1:
        raise CatalogError("not a schema 1 packet", file=path, field="schema_version")
    body = {k: v for k, v in data.items() if k not in V1_HASH_EXCLUDED}
    if canonical_sha256(body) != data.get("sha256"):
        raise CatalogError("its schema 1 seal does not hold (edited after sealing): not migrated", file=path)
    return data


def migrated_parts(data: dict[str, Any], new_ids: dict[str, str]) -> PacketParts:
    arms = [_arm(arm) for arm in data["arms"]]
    reproduces = data.get("reproduces")
    body = {k: v for k, v in data.items() if k not in (*V1_HASH_EXCLUDED, "schema_version", "state", "arms")}
    return PacketParts.model_validate(
        {**body, "arms": arms, "reproduces": new_ids.get(reproduces, reproduces) if reproduces else None}
    )


def _arm(arm: dict[str, Any]) -> ArmParts:
    servers = [_server(server) for server in arm["servers"]]
    dropped = any(server.get("canaries") for server in arm["servers"])
    note = "; ".join(n for n in (arm.get("note"), CANARIES_DROPPED if dropped else None) if n) or None
    fields = {k: v for k, v in arm.items() if k != "state"}
    return ArmParts.model_validate({**fields, "servers": servers, "note": note})


def _server(server: dict[str, Any]) -> dict[str, Any]:
    rows = [_row(row) for row in server.get("rows", [])]
    migrated = {**server, "rows": rows, "canaries": []}
    if rows and server.get("status", "ok") == "ok":
        migrated["decode_tok_s"] = server_decode_rate(rows)
        migrated["ttft_ms"] = server_ttft_ms(rows)
    return migrated


def _row(row: dict[str, Any]) -> PromptRow:
    times_us = [round(t * 1000) for t in row["token_times_ms"]]
    return PromptRow(
        prompt_id=row["prompt_id"],
        class_id=row["class_id"],
        token_ids=to_uint32(row["token_ids"]),
        token_times_us=to_uint32(times_us),
        prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"],
        cached_tokens=row.get("cached_tokens"),
        finish_reason=row.get("finish_reason"),
    )


def migrate(packets_dir: Path, *, sign: bool = True) -> list[tuple[Path, Path]]:
    """Migrate every schema 1 packet in the folder; originals first, so a reproduction names
    its original's new id. Returns (old path, new path) pairs."""
    documents = {}
    for path in sorted(packets_dir.glob("*.json")):
        if path.name.endswith(".dsse.json"):
            continue
        _, data = read_document(path)
        if isinstance(data, dict) and data.get("schema_version") == 1:
            documents[path] = v1_document(path)
    new_ids: dict[str, str] = {}
    done = []
    for path, data in sorted(documents.items(), key=lambda item: item[1].get("reproduces") is not None):
        try:
            parts = migrated_parts(data, new_ids)
        except ValidationError as error:
            raise made_from(path, error) from None
        role = "measurer" if parts.provenance.kind == "measured" else "importer"
        sealed = seal(parts, host_key(role=role) if sign else None)
        new_path = write_packet(sealed, packets_dir)
        new_ids[data["id"]] = sealed.packet.id
        if new_path != path:
            path.unlink()
        done.append((path, new_path))
    return done


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m catalog migrate", description=__doc__)
    parser.add_argument("--packets", type=Path, default=Path("packets"), help="packets folder (default: packets)")
    parser.add_argument("--unsigned", action="store_true", help="do not sign (a local catalog only)")
    options = parser.parse_args(argv)
    done = migrate(options.packets, sign=not options.unsigned)
    for old, new in done:
        print(f"{old.name} -> {new.name}")
    print(f"migrated {len(done)} packet(s) to schema 2")
    return 0


main = exit_on_user_error(run)
