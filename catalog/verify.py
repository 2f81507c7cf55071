"""`make verify`: re-validate every data file and re-compute every packet hash and number."""

from __future__ import annotations

import argparse
from pathlib import Path

from catalog.errors import exit_on_catalog_error
from catalog.repository import load_catalog


def run() -> int:
    parser = argparse.ArgumentParser(prog="python -m catalog.verify", description=__doc__)
    parser.add_argument("--data", type=Path, default=Path("data"), help="data folder (default: data)")
    parser.add_argument("--packets", type=Path, default=Path("packets"), help="packets folder (default: packets)")
    parser.add_argument(
        "--allow-unsigned", action="store_true", help="admit packets with no signature (a local catalog only)"
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="accepted for symmetry with the builder: verify never trusts the summary cache",
    )
    options = parser.parse_args()
    catalog = load_catalog(options.data, options.packets, allow_unsigned=options.allow_unsigned)
    print(
        f"verified {len(catalog.packets)} packets, {len(catalog.recipes)} recipes, "
        f"{len(catalog.hardware)} hardware entries, {len(catalog.suites)} suites: every hash re-computes, "
        f"{sum(p.signed for p in catalog.packets.values())} signatures verify"
    )
    return 0


main = exit_on_catalog_error(run)

if __name__ == "__main__":
    main()
