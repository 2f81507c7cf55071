"""`python -m catalog migrate|verify|schema`."""

from __future__ import annotations

import sys

USAGE = "usage: python -m catalog {migrate,verify,schema} [options]"


def main() -> None:
    command, *rest = sys.argv[1:] or [""]
    sys.argv = [f"python -m catalog {command}", *rest]
    if command == "migrate":
        from catalog.packets.migrate import main as migrate

        migrate()
    elif command == "verify":
        from catalog.verify import main as verify

        verify()
    elif command == "schema":
        from catalog.schema import main as schema

        schema()
    else:
        print(USAGE, file=sys.stderr)
        sys.exit(2)


main()
