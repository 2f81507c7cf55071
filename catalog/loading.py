"""Read YAML and JSON files into pydantic models with errors that name file, line and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from catalog.errors import CatalogError

ModelT = TypeVar("ModelT", bound=BaseModel)
Loc = tuple[str | int, ...]


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with the same key twice (PyYAML keeps the last)."""


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise CatalogError(f"not UTF-8 text ({error.reason} at byte {error.start})", file=path) from None
    except OSError as error:
        raise CatalogError(f"cannot read: {error.strerror}", file=path) from None


def parse_yaml(text: str, path: Path) -> Any:
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        raise CatalogError(f"invalid YAML: {error.problem or error.context}", file=path, line=line) from None
    except yaml.YAMLError as error:
        raise CatalogError(f"invalid YAML: {error}", file=path) from None


def _reject_duplicate_json_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicate_json_keys, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise CatalogError(f"invalid JSON: {error.msg}", file=path, line=error.lineno) from None
    except ValueError as error:
        raise CatalogError(f"invalid JSON: {error}", file=path) from None


def read_document(path: Path) -> tuple[str, Any]:
    text = read_text(path)
    data = parse_json(text, path) if path.suffix == ".json" else parse_yaml(text, path)
    return text, data


def line_of(text: str, loc: Loc) -> int | None:
    """The 1-based line where the value at `loc` starts, found through YAML's node tree.

    JSON is (almost) YAML, so this serves both; None where the path cannot be followed."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if k.value == str(part)]
            if not match:
                break
            key_node, node = match[0]
            line = key_node.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validation_error(error: ValidationError, path: Path, text: str | None) -> CatalogError:
    """The first problem pydantic found, as one line; the count of the others is appended."""
    first = error.errors()[0]
    loc: Loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    elif first["type"] == "missing":
        message = "required key is missing"
    more = error.error_count() - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    line = line_of(text, loc) if text is not None else None
    return CatalogError(message, file=path, field=dotted(loc) or None, line=line)


def validate_as(model: type[ModelT], data: Any, path: Path, text: str | None = None) -> ModelT:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise validation_error(error, path, text) from None


def load_file(model: type[ModelT], path: Path) -> ModelT:
    text, data = read_document(path)
    return validate_as(model, data, path, text)
