"""JSON Schemas of the files the catalog reads, exported to docs/schema/ for other tools.

`python -m catalog schema --write` (`make schema`) writes them; `python -m catalog schema` checks
the committed files are current. The pydantic models stay the one definition: these files are
generated from them, field descriptions included, and never edited by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import BaseModel

from catalog.model.packet import Packet
from catalog.packets.keys import KeyRing
from catalog.recipes.hardware import HardwareFile
from catalog.recipes.overlay import Overlay
from catalog.recipes.recipe import Recipe

SCHEMA_DIR = Path("docs/schema")
DIALECT = "https://json-schema.org/draft/2020-12/schema"

# file stem -> the model that reads such a file
MODELS: dict[str, type[BaseModel]] = {
    "packet": Packet,
    "recipe": Recipe,
    "overlay": Overlay,
    "hardware": HardwareFile,
    "keys": KeyRing,
}


def schema_of(model: type[BaseModel]) -> dict[str, object]:
    """The JSON Schema of a file the model reads (validation mode: what a file may hold)."""
    return {"$schema": DIALECT, **model.model_json_schema(mode="validation")}


def schema_texts() -> dict[str, str]:
    """File name -> the exact text committed in docs/schema/."""
    return {
        f"{stem}.schema.json": json.dumps(schema_of(model), indent=2, ensure_ascii=False) + "\n"
        for stem, model in MODELS.items()
    }


def write_schemas(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schema_texts().items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def stale_schemas(folder: Path) -> list[Path]:
    """Schema files that are missing or differ from what the models generate."""
    stale = []
    for name, text in schema_texts().items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(path)
    return stale


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m catalog schema", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the schemas (default: check they are current)")
    parser.add_argument("--dir", type=Path, default=SCHEMA_DIR, help=f"schema folder (default: {SCHEMA_DIR})")
    options = parser.parse_args()
    if options.write:
        for path in write_schemas(options.dir):
            print(f"wrote {path}")
        return
    stale = stale_schemas(options.dir)
    for path in stale:
        print(f"{path}: stale or missing: run make schema", file=sys.stderr)
    sys.exit(1 if stale else 0)
