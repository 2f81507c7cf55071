"""`python -m catalog verify|migrate|schema`; `--help` also prints where each part of the catalog lives."""

from __future__ import annotations

import argparse
import sys

# The questions a newcomer asks first, each answered by one module (docs/architecture.md has the map).
MAP = """where each answer lives:
  how is a packet verified?         catalog/packets/verify.py (verify: bytes, name, signature, evidence, consistency)
  how is a packet made?             catalog/packets/seal.py (seal, write_packet); signing: catalog/packets/signing.py
  what does a packet hold?          catalog/model/packet.py (and its states: State, arm_state)
  what is "published"?              catalog/model/packet.py (State.published)
  what is the load sweep?           catalog/model/load_sweep.py; its checks: catalog/checks/load_sweep.py
  what is checked against data/?    catalog/checks/cross_check.py; physics and figures: catalog/checks/consistency.py
  how are numbers re-derived?       catalog/checks/evidence.py with catalog/model/metrics.py
  how is the grade decided?         catalog/checks/grade.py; the headline: catalog/checks/selection.py
  how is a command composed?        catalog/recipes/compose.py
  how are files read?               catalog/store/documents.py; the whole catalog: catalog/store/repository.py
  how are files written?            catalog/files.py (write_file, file_sha256)
  what does a user error look like? catalog/errors.py (UserError, CatalogError)
"""

COMMANDS = {
    "verify": "re-validate every data file and re-compute every packet hash, signature and number (make verify)",
    "migrate": "re-seal schema 1 packets as schema 2",
    "schema": "write the JSON Schemas of the files the catalog reads into docs/schema/ (make schema)",
}


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m catalog",
        description="The data model shared by the runner and the builder.",
        epilog=MAP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    for name, summary in COMMANDS.items():
        commands.add_parser(name, help=summary, add_help=False)
    known, rest = parser.parse_known_args()
    if known.command is None:
        parser.print_usage(sys.stderr)
        sys.exit(2)
    sys.argv = [f"python -m catalog {known.command}", *rest]
    if known.command == "migrate":
        from catalog.packets.migrate import main as migrate

        migrate()
    elif known.command == "verify":
        from catalog.verify import main as verify

        verify()
    else:
        from catalog.schema import main as schema

        schema()


main()
