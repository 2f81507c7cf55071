"""Load and cross-check everything in `data/` and `packets/`: the first step of every command.

`load_catalog` holds every packet whole (`make verify`, the runner). The builder takes the parts:
`load_data` once, each packet read where its family's pages are made (catalog/store/reading.py),
`reproduction_errors` among a family's packets, and `Data.catalog` of the listings of them all.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from catalog.checks.consistency import reproduction_problems
from catalog.checks.cross_check import Reference, located
from catalog.checks.lint import lint
from catalog.errors import CatalogError, CatalogErrors
from catalog.model.packet import Packet
from catalog.packets.keys import KeyRing, load_keys
from catalog.packets.layout import SIGNATURE_SUFFIX
from catalog.packets.signing import HOST_KEY_NOTE, host_public_keys
from catalog.recipes.hardware import Hardware, HardwareFile
from catalog.recipes.overlay import load_overlay
from catalog.recipes.recipe import Recipe
from catalog.recipes.suite import CanarySet, Suite
from catalog.store.documents import load_file
from catalog.store.listing import Listed
from catalog.store.reading import read_packets

T = TypeVar("T")


@dataclass(frozen=True)
class Catalog:
    recipes: dict[str, Recipe]
    hardware: dict[str, Hardware]
    suites: dict[str, Suite]
    canary_sets: dict[str, CanarySet]
    # The packets held whole, by id. The builder's catalog of the whole site holds none (each
    # family's packets are held where its pages are made) and names them all in `listing`.
    packets: dict[str, Packet]
    # Every packet's line (catalog/store/listing.py): what pages other than its family's read of it.
    listing: dict[str, Listed] = field(default_factory=dict)
    keys: KeyRing = field(default_factory=KeyRing.empty)
    packet_paths: dict[str, Path] = field(default_factory=dict)
    reproduced_by: dict[str, list[str]] = field(default_factory=dict)  # packet id -> ids reproducing it
    by_family: dict[str, list[str]] = field(default_factory=dict)  # family slug -> its packet ids
    # Data warnings (catalog/checks/lint.py): shown by verify and the builder, fatal under --strict.
    warnings: list[str] = field(default_factory=list)
    # card id -> family slug -> its packets on that card, in id order (the hardware pages' rows)
    by_hardware: dict[str, dict[str, list[Listed]]] = field(default_factory=dict)

    def family_ids(self, slug: str) -> list[str]:
        return self.by_family.get(slug, [])

    def packets_of(self, slug: str) -> list[Packet]:
        return [self.packets[packet_id] for packet_id in self.family_ids(slug)]

    def families_on(self, hardware_id: str) -> dict[str, list[Listed]]:
        """Each family measured on the card, by slug, with its packets there: looked up, not scanned."""
        return self.by_hardware.get(hardware_id, {})

    def reproduction_ids(self, packet_ids: Iterable[str]) -> list[str]:
        return [r for p in packet_ids for r in self.reproduced_by.get(p, [])]

    def reproductions(self, packets: Iterable[Packet]) -> list[Packet]:
        """The packets that reproduce any of `packets`: all a grade needs to see, looked up, not scanned."""
        return [self.packets[r] for r in self.reproduction_ids(p.id for p in packets)]


@dataclass(frozen=True)
class Data:
    """data/ as loaded, and the problems found loading it (each naming its file)."""

    recipes: dict[str, Recipe]
    hardware: dict[str, Hardware]
    suites: dict[str, Suite]
    canary_sets: dict[str, CanarySet]
    keys: KeyRing
    reference: Reference  # what a packet is checked against (catalog/checks/cross_check.py)
    errors: list[CatalogError]
    # False only when data/keys.yaml failed to load: that one error fails the load, and every
    # packet's signature is left unchecked rather than each refused as signed by an unknown key
    signatures: bool = True

    def catalog(self, packets: dict[str, Packet], listing: dict[str, Listed], paths: dict[str, Path]) -> Catalog:
        """The catalog of these packets (`listing`: every packet's line, held whole or not)."""
        reproduced_by: dict[str, list[str]] = {}
        by_family: dict[str, list[str]] = {}
        by_hardware: dict[str, dict[str, list[Listed]]] = {}
        for packet_id, listed in sorted(listing.items()):
            by_family.setdefault(listed.slug, []).append(packet_id)
            by_hardware.setdefault(listed.hardware, {}).setdefault(listed.slug, []).append(listed)
            if listed.reproduces:
                reproduced_by.setdefault(listed.reproduces, []).append(packet_id)
        return Catalog(
            recipes=self.recipes,
            hardware=self.hardware,
            suites=self.suites,
            canary_sets=self.canary_sets,
            packets=packets,
            listing=listing,
            keys=self.keys,
            packet_paths=paths,
            reproduced_by=reproduced_by,
            by_family=by_family,
            warnings=[*lint(self.recipes, listing), *_host_key_warnings(listing)],
            by_hardware={hw: dict(sorted(families.items())) for hw, families in by_hardware.items()},
        )


def _host_key_warnings(listing: Mapping[str, Listed]) -> list[str]:
    return [
        f"{packet_id}: {HOST_KEY_NOTE} (key {listed.host_key[:12]}): make check, make verify and CI refuse it "
        "until you add the lines `make measure` printed to data/keys.yaml"
        for packet_id, listed in sorted(listing.items())
        if listed.host_key
    ]


class _Collector:
    """Gathers independent problems so one run reports them all, each naming its file."""

    def __init__(self) -> None:
        self.errors: list[CatalogError] = []

    def attempt(self, load: Callable[[], T]) -> T | None:
        try:
            return load()
        except CatalogErrors as many:
            self.errors.extend(many.errors)
        except CatalogError as error:
            self.errors.append(error)
        return None

    def add(self, message: str, *, file: Path, field: str) -> None:
        self.errors.append(CatalogError(message, file=file, field=field))


def raise_if_any(errors: list[CatalogError]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise CatalogErrors(errors)


def load_catalog(
    data_dir: Path, packets_dir: Path, *, allow_unsigned: bool = False, host_keys: bool = False
) -> Catalog:
    """Every data file and every packet, validated and checked, each packet held whole.
    `allow_unsigned` admits packets without a signature (a local build; pages say so); a signature
    that is present is always checked. `host_keys` (a local build on a measuring host, `make site`)
    also admits packets signed by this host's own key (catalog/packets/signing.py
    host_public_keys), labelled and warned about."""
    require_inputs(data_dir, packets_dir)
    data = load_data(data_dir, host_keys=host_keys)
    errors = [*data.errors]
    names, leaving = packet_names(packets_dir)
    errors += leaving
    errors += signatures_without_packets(packets_dir, names)
    held: dict[str, Packet] = {}
    paths: dict[str, Path] = {}
    files = [packets_dir / name for name in names if not name.endswith(SIGNATURE_SUFFIX)]
    reads = read_packets(files, data.keys, allow_unsigned, data.reference, signatures=data.signatures)
    for path, read in zip(files, reads, strict=True):
        errors += read.problems
        if read.packet is None:
            continue
        if read.packet.id in held:
            errors.append(CatalogError(f"same packet as {paths[read.packet.id].name}", file=path, field="id"))
            continue
        errors += read.reference_problems
        if read.problems:
            continue
        held[read.packet.id] = read.packet
        paths[read.packet.id] = path
    errors += reproduction_errors(held, paths, held)
    raise_if_any(errors)
    return data.catalog(held, {i: Listed.of(p) for i, p in held.items()}, paths)


def reproduction_errors(
    packets: Mapping[str, Packet], paths: Mapping[str, Path], known: Collection[str]
) -> list[CatalogError]:
    """Each reproduction among `packets` against the packet it names (held in `packets` too):
    unknown to the catalog (`known`: every packet id), or not a reproduction of it."""
    errors: list[CatalogError] = []
    for packet_id, packet in sorted(packets.items()):
        original = packet.reproduces
        if original and original not in known:
            errors.append(CatalogError(f"names unknown packet {original!r}", file=paths[packet_id], field="reproduces"))
        elif original:
            errors += located(reproduction_problems(packet, packets[original]), paths[packet_id])
    return errors


def load_data(data_dir: Path, *, host_keys: bool = False) -> Data:
    """data/: keys, hardware, recipes with their overlays, suites and canary sets; every problem
    collected (a data file already in error is not reported again through each packet naming it).
    `host_keys`: this host's own keys join the listed ones, marked (KeyRing.with_host_keys)."""
    found = _Collector()
    listed_keys = found.attempt(lambda: load_keys(data_dir / "keys.yaml"))
    # keys.yaml in error (a key listed twice, an undated key) is one error (Data.signatures)
    keys, signatures = (listed_keys, True) if listed_keys is not None else (KeyRing.empty(), False)
    if host_keys and signatures:
        keys = keys.with_host_keys(host_public_keys())
    hardware_file = found.attempt(lambda: load_file(HardwareFile, data_dir / "hardware.yaml"))
    hardware = hardware_file.by_id() if hardware_file else {}
    recipes = _load_recipes(data_dir / "models", found)
    _load_overlays(data_dir / "overlays", recipes, hardware, found)
    suites, canary_sets = _load_suites(data_dir / "suites", found)
    unloaded = {Path(error.file).stem for error in found.errors if error.file}
    if hardware_file is None:
        unloaded.add("*hardware")  # not a valid slug, so no hardware id can collide with it
    reference = Reference(recipes, hardware, suites, canary_sets, frozenset(unloaded))
    return Data(recipes, hardware, suites, canary_sets, keys, reference, found.errors, signatures)


def require_inputs(data_dir: Path, packets_dir: Path) -> None:
    """A missing or unreadable input folder is an error, never an empty catalog: a build from a
    mistyped --packets would otherwise publish a site with every packet gone."""
    for folder in (data_dir, data_dir / "models", data_dir / "suites", packets_dir):
        try:
            if not stat.S_ISDIR(folder.stat().st_mode):
                raise CatalogError("not a folder", file=folder)
            with os.scandir(folder):
                pass  # an unreadable folder would otherwise list as empty
        except FileNotFoundError:
            raise CatalogError("no such folder", file=folder) from None
        except OSError as error:
            raise CatalogError(f"cannot read the folder: {error.strerror}", file=folder) from None
    if not (data_dir / "hardware.yaml").exists():
        raise CatalogError("no such file", file=data_dir / "hardware.yaml")


def packet_names(folder: Path) -> tuple[list[str], list[CatalogError]]:
    """The names `folder.glob("*.json")` finds, sorted, less the symbolic links that lead outside
    the catalog, each refused by name (`_link_leaves`): listed as strings, since 40,000 Path
    objects cost a tenth of a second to make and more to sort (whether an entry is a link comes
    with the listing, without a system call per file)."""
    if not folder.is_dir():
        return [], []
    with os.scandir(folder) as entries:
        found = [(entry.name, entry.is_symlink()) for entry in entries if entry.name.endswith(".json")]
    names: list[str] = []
    leaving: list[CatalogError] = []
    for name, link in sorted(found):
        refused = _link_leaves(folder / name) if link else None
        if refused is None:
            names.append(name)
        else:
            leaving.append(refused)
    return names, leaving


def _link_leaves(path: Path) -> CatalogError | None:
    """Why a packet (or signature) that is a symbolic link is refused by name, never read: it leads
    outside the catalog the build was given (the folder holding packets/). A link that leads
    nowhere (a loop) is left to the reader, which cannot read it and says so."""
    root = path.parent.resolve().parent
    try:
        target = path.resolve()
    except (OSError, RuntimeError):  # a loop: Python 3.11 raises RuntimeError, later ones OSError
        return None
    if target.is_relative_to(root):
        return None
    return CatalogError(
        f"a symbolic link to {target}, outside the catalog ({root}): a build reads only the catalog it was given",
        file=path,
        field="file",
    )


def signatures_without_packets(folder: Path, names: list[str]) -> list[CatalogError]:
    present = set(names)
    return [
        CatalogError("a signature for a packet that is not here", file=folder / name, field="subject")
        for name in names
        if name.endswith(SIGNATURE_SUFFIX) and name.removesuffix(SIGNATURE_SUFFIX) + ".json" not in present
    ]


def _load_recipes(directory: Path, found: _Collector) -> dict[str, Recipe]:
    recipes: dict[str, Recipe] = {}
    origin: dict[str, Path] = {}
    for path in sorted(directory.glob("*.yaml")):
        recipe = found.attempt(lambda path=path: load_file(Recipe, path))  # type: ignore[misc]
        if recipe is None:
            continue
        slug = recipe.meta.slug
        if slug != path.stem:
            found.add(f"slug {slug!r} must match the file name {path.stem!r}", file=path, field="meta.slug")
        elif slug in recipes:
            found.add(f"duplicate slug, also in {origin[slug].name}", file=path, field="meta.slug")
        else:
            recipes[slug] = recipe
            origin[slug] = path
    return recipes


def _load_overlays(
    directory: Path, recipes: dict[str, Recipe], hardware: dict[str, Hardware], found: _Collector
) -> dict[str, Path]:
    """Merge each data/overlays/<slug>.yaml into its recipe (catalog/recipes/overlay.py); their paths."""
    paths: dict[str, Path] = {}
    for path in sorted(directory.glob("*.yaml")) if directory.is_dir() else []:
        if not hardware or (path.stem not in recipes and (directory.parent / "models" / path.name).exists()):
            continue  # its recipe or data/hardware.yaml is in error, reported once already
        merged = found.attempt(lambda path=path: load_overlay(path, recipes, hardware.values()))  # type: ignore[misc]
        if merged is not None:
            recipes[merged.meta.slug] = merged
            paths[merged.meta.slug] = path
    return paths


def _load_suites(directory: Path, found: _Collector) -> tuple[dict[str, Suite], dict[str, CanarySet]]:
    suites: dict[str, Suite] = {}
    canary_sets: dict[str, CanarySet] = {}
    for path in sorted(directory.glob("*.json")):
        if path.stem.startswith("canaries-"):
            canaries = found.attempt(lambda path=path: load_file(CanarySet, path))  # type: ignore[misc]
            if canaries is not None:
                _file_named_by_id(canaries.id, path, found)
                canary_sets[canaries.id] = canaries
        else:
            suite = found.attempt(lambda path=path: load_file(Suite, path))  # type: ignore[misc]
            if suite is not None:
                _file_named_by_id(suite.id, path, found)
                suites[suite.id] = suite
    return suites, canary_sets


def _file_named_by_id(item_id: str, path: Path, found: _Collector) -> None:
    if item_id != path.stem:
        found.add(f"id {item_id!r} must match the file name {path.stem!r}", file=path, field="id")
