"""Read YAML and JSON files into pydantic models with errors that name file, line and field."""

from __future__ import annotations

import json
import re
import stat
import sys
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from catalog.errors import CatalogError
from catalog.model.base import FieldError

ModelT = TypeVar("ModelT", bound=BaseModel)
Loc = tuple[str | int, ...]


# Limits that keep a hostile file from hanging or exhausting memory: nesting is bounded while the
# parser runs (before Python's recursion limit), and aliases may not expand a document past
# MAX_NODES values (a "billion laughs" file is a few lines that expand to billions).
MAX_DEPTH = 64
MAX_NODES = 1_000_000


class PythonParser(Reader, Scanner, Parser):
    """PyYAML's parser in Python, for a PyYAML built without libyaml (no wheel for the platform,
    built from source without its headers): about five times slower. It parses as the composer
    asks, so 100,000 open brackets stop at the composer's MAX_DEPTH, in a tenth of a second."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)


def loader_on(parser: type[Any]) -> type[Any]:
    """A safe loader on `parser` (libyaml's or PyYAML's in Python) that composes in Python,
    refusing a mapping with the same key twice (PyYAML keeps the last), nesting deeper than
    MAX_DEPTH (while the parser runs, before Python's recursion limit) and aliases that expand
    past MAX_NODES values."""

    class UniqueKeyLoader(Composer, SafeConstructor, Resolver, parser):  # type: ignore[misc]
        def __init__(self, stream: str) -> None:
            parser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._depth = 0
            self.nodes = 0  # composed: the document's size when it holds no alias
            self.aliased = False

        def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    event = self.peek_event()
                    mark: Any = event.start_mark if event is not None else None  # libyaml's Mark: line and column alike
                    raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
                self.nodes += 1
                self.aliased = self.aliased or self.check_event(yaml.AliasEvent)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
            try:
                return super().construct_yaml_int(node)
            except ValueError:  # more digits than int() converts
                limit = sys.get_int_max_str_digits()
                raise yaml.constructor.ConstructorError(
                    None, None, f"an integer longer than {limit} digits", node.start_mark
                ) from None

    constructors: list[tuple[str, Any]] = [
        (yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping),
        ("tag:yaml.org,2002:int", UniqueKeyLoader.construct_yaml_int),
    ]
    for tag, constructor in constructors:  # the stubs type add_constructor for PyYAML's own loaders only
        UniqueKeyLoader.add_constructor(tag, constructor)
    return UniqueKeyLoader


def _expanded_size(root: yaml.Node) -> int:
    """How many values the document holds once every alias is expanded, without expanding them."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if children_done or not children:
            sizes[id(node)] = min(1 + sum(sizes[id(child)] for child in children), MAX_NODES + 1)
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _construct_unique_mapping(loader: SafeConstructor, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


try:  # libyaml, not PyYAML's scanner in Python: data/ at 1,000 recipes loaded in 5.1 s, now 0.95 s
    # (bench/FINDINGS.md). libyaml (0.2.6 in PyYAML 6.0.4's wheels) keeps its own stacks, refuses
    # nesting past 1,000 levels itself (src/parser.c, MAX_NESTING_LEVEL) and gives up a possible
    # simple key after 1,024 characters (src/scanner.c, yaml_parser_stale_simple_keys), so 100,000
    # open brackets are refused in a millisecond.
    from yaml._yaml import CParser

    _UniqueKeyLoader = loader_on(CParser)
except ImportError:  # pragma: no cover - PyYAML without libyaml (tests/catalog/test_yaml_limits.py runs it)
    _UniqueKeyLoader = loader_on(PythonParser)


def read_text(path: Path) -> str:
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO named x.yaml would block the read for ever
            raise CatalogError("not a regular file", file=path)
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise CatalogError(f"not UTF-8 text ({error.reason} at byte {error.start})", file=path) from None
    except OSError as error:
        raise CatalogError(f"cannot read: {error.strerror}", file=path) from None


def _load_yaml(text: str) -> Any:
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if (_expanded_size(node) if loader.aliased else loader.nodes) > MAX_NODES:
            holds = "aliases expand to" if loader.aliased else "it holds"
            raise yaml.composer.ComposerError(None, None, f"{holds} more than {MAX_NODES:,} values", node.start_mark)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def parse_yaml(text: str, path: Path) -> Any:
    try:
        return _load_yaml(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        raise CatalogError(f"invalid YAML: {error.problem or error.context}", file=path, line=line) from None
    except yaml.reader.ReaderError as error:  # a control character: no mark, a position instead
        line = text.count("\n", 0, error.position) + 1
        raise CatalogError(f"invalid YAML: {str(error).splitlines()[0]}", file=path, line=line) from None
    except yaml.YAMLError as error:
        raise CatalogError(f"invalid YAML: {str(error).splitlines()[0]}", file=path) from None


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
        data = json.loads(text, object_pairs_hook=_reject_duplicate_json_keys, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise CatalogError(f"invalid JSON: {error.msg}", file=path, line=error.lineno) from None
    except ValueError as error:
        raise CatalogError(f"invalid JSON: {error}", file=path) from None
    except RecursionError:
        raise CatalogError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels", file=path) from None
    if _json_depth(data) > MAX_DEPTH:
        raise CatalogError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels", file=path)
    return data


_CONTAINER_TYPES = frozenset({dict, list})


def _json_depth(value: Any) -> int:
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                children = item.values() if isinstance(item, dict) else item
                # a packet's token arrays are long lists of numbers: skip them at C speed
                if _CONTAINER_TYPES.isdisjoint(map(type, children)):
                    continue
                stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def read_document(path: Path) -> tuple[str, Any]:
    text = read_text(path)
    data = parse_json(text, path) if path.suffix == ".json" else parse_yaml(text, path)
    reject_lone_surrogates(data, path, text)
    return text, data


# The text was decoded as strict UTF-8, so a lone surrogate can only come from an escape:
# JSON and YAML \uD800-\uDFFF, YAML \U0000D800-\U0000DFFF. No such escape, nothing to walk.
_SURROGATE_ESCAPE = re.compile(r"\\(?:u|U0000)[dD][89a-fA-F]")


def reject_lone_surrogates(data: Any, path: Path, text: str | None = None) -> None:
    """An escape such as \\ud800 (half of a UTF-16 pair) parses into a str no encoder accepts:
    hashing and writing the page would fail far from the file, so it is refused here."""
    if text is not None and not _SURROGATE_ESCAPE.search(text):
        return
    stack: list[tuple[Any, Loc]] = [(data, ())]
    while stack:
        item, loc = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                stack.append((key, loc))
                if isinstance(value, dict | list | str):
                    stack.append((value, (*loc, key)))
        elif isinstance(item, list):
            stack.extend((value, (*loc, i)) for i, value in enumerate(item) if isinstance(value, dict | list | str))
        elif isinstance(item, str) and not item.isascii():
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise CatalogError(
                    "holds a lone surrogate escape (such as \\ud800), which is not text",
                    file=path,
                    field=dotted(loc) or None,
                ) from None


_JSON = json.JSONDecoder()
_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _skip_space(text: str, index: int) -> int:
    match = _JSON_SPACE.match(text, index)
    return match.end() if match else index


def _json_line_of(text: str, loc: Loc) -> int | None:
    """line_of for JSON text: walks to `loc`, skipping other values with the C decoder, so a
    megabyte packet takes milliseconds (PyYAML's composer took seconds). ValueError if the text
    is not JSON the walk understands."""
    index = _skip_space(text, 0)
    line = None
    for part in loc:
        if text.startswith("{", index):
            index = _skip_space(text, index + 1)
            while not text.startswith("}", index):
                key, after = json.decoder.scanstring(text, index + 1)  # type: ignore[attr-defined]
                key_at = index
                index = _skip_space(text, _skip_space(text, after) + 1)  # past the colon
                if key == str(part):
                    break
                index = _skip_space(text, _JSON.raw_decode(text, index)[1])
                index = _skip_space(text, index + 1) if text.startswith(",", index) else index
            else:
                break
            line = text.count("\n", 0, key_at) + 1
        elif text.startswith("[", index) and isinstance(part, int):
            index = _skip_space(text, index + 1)
            for _ in range(part):
                if text.startswith("]", index):
                    return line
                index = _skip_space(text, _JSON.raw_decode(text, index)[1])
                index = _skip_space(text, index + 1) if text.startswith(",", index) else index
            if text.startswith("]", index):
                break
            line = text.count("\n", 0, index) + 1
        else:
            break
    return line


def line_of(text: str, loc: Loc) -> int | None:
    """The 1-based line where the value at `loc` starts, found through YAML's node tree.

    JSON is (almost) YAML, so this serves both; None where the path cannot be followed."""
    if text.lstrip().startswith(("{", "[")):
        try:
            return _json_line_of(text, loc)
        except (ValueError, IndexError):
            pass  # YAML in flow style, or not JSON after all
    try:
        node = _UniqueKeyLoader(text).get_single_node()
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
    cause = first.get("ctx", {}).get("error")
    if isinstance(cause, FieldError):
        loc, message = (*loc, *cause.loc), str(cause)
    elif first["type"] == "value_error":
        message = message.removeprefix("Value error, ")
    elif first["type"] == "extra_forbidden":
        message = "unknown key"
    elif first["type"] == "missing":
        message = "required key is missing"
    more = error.error_count() - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    line = line_of(text, loc) if text is not None else None
    return CatalogError(message, file=path, field=dotted(loc) or None, line=line)


def validate_as(model: type[ModelT], data: Any, path: Path, text: str | None = None) -> ModelT:
    if not isinstance(data, dict):  # pydantic would say "Input should be a valid dictionary" with no place
        what = "is empty" if data is None else f"holds a {type(data).__name__}, not a mapping of keys"
        raise CatalogError(f"the document {what}", file=path, line=1)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise validation_error(error, path, text) from None


def load_file(model: type[ModelT], path: Path) -> ModelT:
    text, data = read_document(path)
    return validate_as(model, data, path, text)
