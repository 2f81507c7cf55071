"""The JSON Schemas in docs/schema/: current with the models, describing every field, and accepting
the files the catalog actually holds."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from catalog.model import packet
from catalog.packets import keys
from catalog.recipes import hardware, overlay, recipe, suite
from catalog.schema import MODELS, SCHEMA_DIR, schema_texts, write_schemas
from catalog.store.documents import read_document

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data"


def _as_json(path: Path) -> Any:
    """The file's data as a JSON reader would see it: YAML dates become their ISO text."""
    _, data = read_document(path)
    return json.loads(json.dumps(data, default=str))


def _validator(stem: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((REPO / SCHEMA_DIR / f"{stem}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_committed_schemas_are_current(tmp_path: Path) -> None:
    written = write_schemas(tmp_path)
    assert sorted(p.name for p in written) == sorted(schema_texts())
    for path in written:
        committed = REPO / SCHEMA_DIR / path.name
        assert committed.is_file(), f"{committed} is missing: run make schema"
        assert committed.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), (
            f"{committed} is stale: run make schema"
        )


def test_check_names_a_stale_schema(tmp_path: Path) -> None:
    write_schemas(tmp_path)
    (tmp_path / "keys.schema.json").write_text("{}\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "catalog", "schema", "--dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"{tmp_path / 'keys.schema.json'}: stale or missing: run make schema"]


def _models() -> list[type[BaseModel]]:
    modules = (packet, recipe, overlay, hardware, suite, keys)
    return [
        cls
        for module in modules
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, BaseModel) and cls.__module__ == module.__name__
    ]


@pytest.mark.parametrize("model", _models(), ids=lambda m: m.__name__)
def test_every_field_is_described(model: type[BaseModel]) -> None:
    undescribed = [name for name, field in model.model_fields.items() if not (field.description or "").strip()]
    assert not undescribed, f"{model.__name__} fields without a description: {undescribed}"


def test_every_exported_property_carries_its_description() -> None:
    for stem in MODELS:
        schema = json.loads((REPO / SCHEMA_DIR / f"{stem}.schema.json").read_text(encoding="utf-8"))
        objects = [schema, *schema["$defs"].values()]
        for obj in objects:
            for name, prop in obj.get("properties", {}).items():
                assert prop.get("description"), f"{stem}: {obj.get('title')}.{name} has no description"


def _data_files() -> list[tuple[str, Path]]:
    files = [("packet", p) for p in sorted((REPO / "packets").glob("*.json")) if not p.name.endswith(".dsse.json")]
    files += [("recipe", p) for p in sorted((DATA / "models").glob("*.yaml"))]
    files += [("overlay", p) for p in sorted((DATA / "overlays").glob("*.yaml"))]
    files += [("hardware", DATA / "hardware.yaml"), ("keys", DATA / "keys.yaml")]
    return files


@pytest.mark.parametrize(("stem", "path"), _data_files(), ids=lambda v: v.name if isinstance(v, Path) else v)
def test_committed_file_validates_against_its_schema(stem: str, path: Path) -> None:
    errors = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator(stem).iter_errors(_as_json(path))
    ]
    assert not errors, f"{path.name}: {errors[:3]}"


def test_schema_refuses_an_unknown_key() -> None:
    data = _as_json(DATA / "models" / "qwen3.5-9b.yaml")
    data["model"]["flash_mode"] = True
    errors = list(_validator("recipe").iter_errors(data))
    assert [list(e.absolute_path) for e in errors] == [["model"]]
    assert "flash_mode" in errors[0].message


def test_schema_refuses_a_packet_without_its_arms() -> None:
    path = next(p for stem, p in _data_files() if stem == "packet")
    data = _as_json(path)
    data["arms"] = []
    assert [list(e.absolute_path) for e in _validator("packet").iter_errors(data)] == [["arms"]]
