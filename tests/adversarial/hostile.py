"""A hostile copy of the real catalog: every free-text field of every recipe, hardware entry,
suite and packet carries markup, script, a `javascript:` link, attribute-breaking quotes and
template syntax, and every packet is re-sealed (signed with the test session's key, which the
hostile data/keys.yaml lists) so the catalog still verifies.

Fields the schema constrains (slugs, hashes, dates, literals) refuse the payload; those are put
back field by field from the validation errors, so whatever the loader accepts carries it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from catalog.errors import CatalogError, CatalogErrors
from catalog.packets.layout import is_signature, signature_path
from catalog.packets.seal import write_packet
from catalog.recipes.hardware import HardwareFile
from catalog.recipes.recipe import Recipe
from catalog.recipes.suite import CanarySet, Suite
from catalog.store.repository import load_catalog
from tests.catalog.factories import draft_of, sealed, signed_data

REPO = Path(__file__).resolve().parents[2]
MARK = "pwn3d"  # every payload names it, so a page that shows the text can be counted
PAYLOAD = (
    f"<script>window.__pwned=1</script>\"'><img src=x onerror=window.__pwned=1 alt={MARK}>"
    '[x](javascript:window.__pwned=1)<a href="javascript:window.__pwned=1">a</a>'
    "<svg onload=window.__pwned=1></svg>{{7*7}}%{x}${7*7}</textarea></title><!--"
)
# Keys whose values other files point at: changing them would only break the cross-references.
# The runtime's version is compared with the recipe's minimum and shown inside the runtime's label
# (catalog/checks/identity.py), which carries the payload instead.
PACKET_REFERENCES = {
    "slug",
    "variant",
    "hardware",
    "suite_id",
    "canary_set_id",
    "reproduces",
    "quantization",
    "version",
}

Loc = tuple[str | int, ...]


def walk_strings(value: Any, loc: Loc = ()) -> Iterator[Loc]:
    if isinstance(value, dict):
        for key, child in value.items():
            yield from walk_strings(child, (*loc, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from walk_strings(child, (*loc, index))
    elif isinstance(value, str):
        yield loc


def get(value: Any, loc: Loc) -> Any:
    for part in loc:
        value = value[part]
    return value


def put(value: Any, loc: Loc, new: Any) -> None:
    for part in loc[:-1]:
        value = value[part]
    value[loc[-1]] = new


def poison(data: Any, skip: Callable[[Loc], bool] = lambda loc: False) -> tuple[Any, list[Loc]]:
    """A copy of `data` with PAYLOAD appended to every string not skipped, and the locations."""
    hostile = copy.deepcopy(data)
    changed = [loc for loc in walk_strings(data) if not skip(loc)]
    for loc in changed:
        put(hostile, loc, get(hostile, loc) + PAYLOAD)
    return hostile, changed


def _restore(hostile: Any, original: Any, loc: Loc, changed: list[Loc]) -> bool:
    """Put back every changed string at or under the longest prefix of `loc` that exists."""
    for cut in range(len(loc), -1, -1):
        prefix = loc[:cut]
        hits = [c for c in changed if c[: len(prefix)] == prefix]
        if hits:
            for hit in hits:
                put(hostile, hit, get(original, hit))
                changed.remove(hit)
            return True
    return False


def accepted(validate: Callable[[Any], Any], original: Any, skip: Callable[[Loc], bool] = lambda loc: False) -> Any:
    """Poison `original`, then take back what `validate` refuses until it passes."""
    hostile, changed = poison(original, skip)
    for _ in range(len(changed) + 1):
        try:
            validate(hostile)
            return hostile
        except ValidationError as error:
            progress = False
            for problem in error.errors():
                loc = tuple(p for p in problem["loc"] if not (isinstance(p, str) and p.startswith("function-")))
                progress |= _restore(hostile, original, loc, changed)
            if not progress:  # a model-level check: take the strings back one by one from the end
                _restore(hostile, original, changed[-1], changed)
    raise AssertionError("could not make a hostile copy validate")


def _field_loc(field: str) -> Loc:
    loc: list[str | int] = []
    for part in field.replace("]", "").replace("[", ".").split("."):
        loc.append(int(part) if part.isdigit() else part)
    return tuple(loc)


def hostile_catalog(root: Path) -> tuple[Path, Path, int]:
    """Write a hostile copy of data/ and packets/ under `root`; returns both folders and how many
    string fields carry the payload."""
    data, packets = root / "data", root / "packets"
    signed_data(data)
    packets.mkdir()
    carried = 0
    for path in sorted((data / "models").glob("*.yaml")):
        original = yaml.safe_load(path.read_text())
        hostile = accepted(Recipe.model_validate, original)
        carried += sum(get(hostile, loc) != get(original, loc) for loc in walk_strings(original))
        path.write_text(yaml.safe_dump(hostile, allow_unicode=True, sort_keys=False))
    hw_path = data / "hardware.yaml"
    original = yaml.safe_load(hw_path.read_text())
    # vendor and generation are references too: the keys of the recipes' and overlays' hardware
    # overrides (data/overlays refuses an override key that names no card, vendor or generation)
    hostile = accepted(
        HardwareFile.model_validate, original, skip=lambda loc: loc[-1:] in (("vendor",), ("generation",))
    )
    carried += sum(get(hostile, loc) != get(original, loc) for loc in walk_strings(original))
    hw_path.write_text(yaml.safe_dump(hostile, allow_unicode=True, sort_keys=False))
    suites: dict[str, str] = {}
    clean: dict[str, dict[str, Any]] = {}
    for path in sorted((data / "suites").glob("*.json")):
        model: type[BaseModel] = CanarySet if path.stem.startswith("canaries-") else Suite
        original = json.loads(path.read_text())
        # canary expectations are data the runner compares, not text the site shows
        hostile = accepted(model.model_validate, original, skip=lambda loc: "expect" in loc or "expect_keys" in loc)
        carried += sum(get(hostile, loc) != get(original, loc) for loc in walk_strings(original))
        path.write_text(json.dumps(hostile, indent=2, ensure_ascii=False))
        suites[path.stem] = model.model_validate(hostile).sha256  # type: ignore[attr-defined]
    for path in sorted((REPO / "packets").glob("*.json")):
        if is_signature(path):
            continue
        draft = draft_of(json.loads(path.read_text()))
        workload = draft["workload"]
        if workload.get("suite_sha256"):
            workload["suite_sha256"] = suites[workload["suite_id"]]
        if workload.get("canary_set_sha256"):
            workload["canary_set_sha256"] = suites[workload["canary_set_id"]]
        hostile = accepted(sealed, draft, _packet_skip)
        carried += sum(get(hostile, loc) != get(draft, loc) for loc in walk_strings(draft))
        written = write_packet(sealed(hostile), packets)
        clean[written.stem] = draft
    _settle(data, packets, clean)
    return data, packets, carried


def _packet_skip(loc: Loc) -> bool:
    # token arrays are base64 the schema decodes; the checkpoint's file names are what the weight
    # bytes are summed from (catalog/checks/facts.py): neither is text a page shows as written
    if any(part in ("token_ids", "token_times_us", "weight_files") for part in loc if isinstance(part, str)):
        return True
    return any(part in PACKET_REFERENCES for part in loc if isinstance(part, str))


def _settle(data: Path, packets: Path, clean: dict[str, dict[str, Any]]) -> None:
    """Cross-file checks (evidence re-derivation, gate pairs) the model alone cannot see: put back
    what load_catalog names, re-seal, until the catalog verifies."""
    for _ in range(20):
        try:
            load_catalog(data, packets)
            return
        except CatalogError as error:
            problems = error.errors if isinstance(error, CatalogErrors) else [error]
        by_file: dict[str, list[str]] = {}
        for problem in problems:
            assert problem.file and problem.field, str(problem)
            by_file.setdefault(problem.file, []).append(problem.field)
        for file, fields in by_file.items():
            path = Path(file)
            stored = draft_of(json.loads(path.read_text()))
            original = clean.pop(path.stem)
            for field in fields:
                loc = _field_loc(field)
                for changed in list(walk_strings(get(stored, loc))):
                    full = (*loc, *changed)
                    put(stored, full, get(original, full))
            signature_path(path).unlink(missing_ok=True)
            path.unlink()
            written = write_packet(sealed(stored), packets)
            clean[written.stem] = original
    raise AssertionError("hostile catalog does not settle")
