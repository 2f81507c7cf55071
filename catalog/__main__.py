"""`python -m catalog migrate|verify`."""

from __future__ import annotations

import sys

USAGE = "usage: python -m catalog {migrate,verify} [options]"


def main() -> None:
    command, *rest = sys.argv[1:] or [""]
    sys.argv = [f"python -m catalog {command}", *rest]
    if command == "migrate":
        from catalog.migrate import main as migrate

        migrate()
    elif command == "verify":
        from catalog.verify import main as verify

        verify()
    else:
        print(USAGE, file=sys.stderr)
        sys.exit(2)


main()
