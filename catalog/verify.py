"""`make verify`: re-validate every data file and re-compute every packet hash and number."""

from __future__ import annotations

import argparse
from pathlib import Path

from catalog.checks.lint import report
from catalog.errors import exit_on_user_error
from catalog.store.repository import load_catalog


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def run() -> int:
    parser = argparse.ArgumentParser(prog="python -m catalog.verify", description=__doc__)
    parser.add_argument("--data", type=Path, default=Path("data"), help="data folder (default: data)")
    parser.add_argument("--packets", type=Path, default=Path("packets"), help="packets folder (default: packets)")
    parser.add_argument(
        "--allow-unsigned", action="store_true", help="admit packets with no signature (a local catalog only)"
    )
    parser.add_argument("--strict", action="store_true", help="fail on any data warning")
    options = parser.parse_args()
    catalog = load_catalog(options.data, options.packets, allow_unsigned=options.allow_unsigned)
    failed_strict = report(catalog.warnings, options.strict)
    print(
        f"verified {_count(len(catalog.packets), 'packet')}, {_count(len(catalog.recipes), 'recipe')}, "
        f"{_count(len(catalog.hardware), 'hardware entry', 'hardware entries')}, "
        f"{_count(len(catalog.suites), 'suite')}: every hash re-computes, "
        f"{_count(sum(p.signed for p in catalog.listing.values()), 'signature')} verify"
        + (f", {len(catalog.warnings)} warning(s)" if catalog.warnings else "")
    )
    return 1 if failed_strict else 0


main = exit_on_user_error(run)

if __name__ == "__main__":
    main()
