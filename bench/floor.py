"""The builder's floor: read and verify every packet once (catalog.packet_io.read_packet), in a
fresh process, timed after the imports. Prints one JSON line.

    python -m bench.floor PACKETS_DIR
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from catalog.packet_io import read_packet


def main() -> None:
    paths = sorted(Path(sys.argv[1]).glob("*.json"))
    started = time.perf_counter()
    for path in paths:
        read_packet(path)
    seconds = time.perf_counter() - started
    size = sum(p.stat().st_size for p in paths)
    print(json.dumps({"seconds": seconds, "packets": len(paths), "bytes": size}))


if __name__ == "__main__":
    main()
