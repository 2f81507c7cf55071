"""The builder's floor: read and verify every packet once (catalog.packets.verify.read_packet: canonical
bytes, digest and signature against the catalog's keys.yaml), in a fresh process, timed after
the imports. Prints one JSON line.

    python -m bench.floor PACKETS_DIR DATA_DIR [LIMIT]

With LIMIT, only the first LIMIT packets (sorted by name) are read: "packets" and "bytes" still
count all of them, "read" says how many were, and the caller scales the time.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from catalog.packets.keys import load_keys
from catalog.packets.layout import is_signature
from catalog.packets.verify import read_packet


def main() -> None:
    packets, data = Path(sys.argv[1]), Path(sys.argv[2])
    keys = load_keys(data / "keys.yaml")
    paths = sorted(p for p in packets.glob("*.json") if not is_signature(p))
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else len(paths)
    started = time.perf_counter()
    for path in paths[:limit]:
        read_packet(path, keys)
    seconds = time.perf_counter() - started
    size = sum(p.stat().st_size for p in paths)
    print(json.dumps({"seconds": seconds, "packets": len(paths), "bytes": size, "read": min(limit, len(paths))}))


if __name__ == "__main__":
    main()
