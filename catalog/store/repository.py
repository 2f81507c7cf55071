"""Load and cross-check everything in `data/` and `packets/`: the first step of every command."""

from __future__ import annotations

import gc
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TypeVar

from catalog.checks.consistency import reproduction_problems
from catalog.checks.cross_check import Reference, data_digest, located
from catalog.checks.lint import lint
from catalog.errors import CatalogError, CatalogErrors
from catalog.model.packet import Packet
from catalog.packets.keys import KeyRing, load_keys
from catalog.packets.layout import SIGNATURE_SUFFIX
from catalog.packets.signing import HOST_KEY_NOTE, host_public_keys
from catalog.packets.verify import read_packet
from catalog.recipes.hardware import Hardware, HardwareFile
from catalog.recipes.overlay import load_overlay
from catalog.recipes.recipe import Recipe
from catalog.recipes.suite import CanarySet, Suite
from catalog.store.cache import KnownDigest, SummaryCache
from catalog.store.documents import load_file
from catalog.store.listing import Listed
from catalog.store.reading import Reader, Summaries, read_packets
from catalog.store.record import is_record

T = TypeVar("T")


class Packets(Mapping[str, Packet]):
    """Every packet by id, in file-name order: those held (whole, or as summaries), and those the
    summary cache holds, each unpickled from it as its record (catalog/store/record.py) on first use.
    So a build reads the records of the families whose views it makes, not of all 20,000."""

    def __init__(
        self, held: dict[str, Packet], listing: dict[str, Listed], paths: dict[str, Path], summaries: Summaries | None
    ):
        self._held = held
        self._listing = listing
        self._paths = paths
        self._summaries = summaries

    def held(self, packet_id: str) -> Packet | None:
        """The packet as held now, without reading its record."""
        return self._held.get(packet_id)

    def __getitem__(self, packet_id: str) -> Packet:
        found = self._held.get(packet_id)
        if found is None:
            if packet_id not in self._listing or self._summaries is None:
                raise KeyError(packet_id)
            with collector_paused():  # as the load: a family's 700 objects, never scanned again
                found = self._held[packet_id] = self._summaries.record(packet_id, self._paths[packet_id])
        return found

    def __contains__(self, packet_id: object) -> bool:
        return packet_id in self._listing

    def __iter__(self) -> Iterator[str]:
        return iter(self._listing)

    def __len__(self) -> int:
        return len(self._listing)


@dataclass(frozen=True)
class Catalog:
    recipes: dict[str, Recipe]
    hardware: dict[str, Hardware]
    suites: dict[str, Suite]
    canary_sets: dict[str, CanarySet]
    packets: Packets
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
    # Where the summaries of packets held as records are (catalog/store/record.py); None: none is.
    summaries: Summaries | None = None
    # What the load leaves for the cache, when kept later (load_catalog's `keep_later`); None: nothing.
    to_keep: Callable[[], None] | None = None

    def summary(self, packet_id: str) -> Packet:
        """The packet with its prompt rows: the one held, or, for a record, its summary read back."""
        held = self.packets.held(packet_id)
        if self.summaries is None or (held is not None and not is_record(held)):
            return self.packets[packet_id]
        return self.summaries.of(packet_id, self.packet_paths[packet_id])

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

    def raise_if_any(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise CatalogErrors(self.errors)


def load_catalog(
    data_dir: Path,
    packets_dir: Path,
    *,
    allow_unsigned: bool = False,
    summaries: bool = False,
    use_cache: bool = False,
    known: KnownDigest | None = None,
    keep_later: bool = False,
    host_keys: bool = False,
) -> Catalog:
    """`allow_unsigned` admits packets without a signature (a local build; pages say so); a
    signature that is present is always checked. `summaries` holds packets as summaries
    (catalog/store/cache.py: what pages show), whole only where a reproduction compares arrays;
    `use_cache` (with summaries) trusts the summary cache for content verified before, and holds
    each cached packet as its listing (catalog/store/listing.py), its record (catalog/store/record.py) read
    on first use and its summary by `Catalog.summary`: the builder's default, never `make
    verify`'s. `known` gives the sha256 of files the caller has already hashed (the builder's
    inputs), which the cache is keyed by. With `keep_later`, what the load would write to the cache
    for the next one (its listings: 5 MB at 20,000 packets) is left in `Catalog.to_keep`, for the
    caller to write when it has a moment (the builder: in a forked process once the site is out).
    `host_keys` (a local build on a measuring host, `make site`) also admits packets signed by this
    host's own key (catalog/packets/signing.py host_public_keys), labelled and warned about."""
    with collector_paused():
        catalog = _load_catalog(data_dir, packets_dir, allow_unsigned, summaries, use_cache, known, host_keys)
    if catalog.to_keep is not None and not keep_later:
        catalog.to_keep()
        catalog = replace(catalog, to_keep=None)
    return catalog


@contextmanager
def collector_paused() -> Iterator[None]:
    """Loading makes hundreds of long-lived objects per packet and frees almost none; Python's cycle
    collector would re-scan every one of them on each full pass, a cost that grows with the square
    of the catalog. Nothing loaded forms a cycle that needs it, so it waits until loading is done,
    and then what was loaded is frozen (never scanned again: one full pass over a 20,000-packet
    catalog costs 4 s, and the rest of a build would make several)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def _load_catalog(
    data_dir: Path,
    packets_dir: Path,
    allow_unsigned: bool,
    summaries: bool,
    use_cache: bool,
    known: KnownDigest | None,
    host_keys: bool = False,
) -> Catalog:
    _require_inputs(data_dir, packets_dir)
    found = _Collector()
    listed_keys = found.attempt(lambda: load_keys(data_dir / "keys.yaml"))
    # keys.yaml in error (a key listed twice, an undated key) is one error: every packet's signature
    # is left unchecked rather than each refused as signed by an unknown key, and nothing is cached
    keys, signatures = (listed_keys, True) if listed_keys is not None else (KeyRing.empty(), False)
    if host_keys and signatures:
        keys = keys.with_host_keys(host_public_keys())
    hardware_file = found.attempt(lambda: load_file(HardwareFile, data_dir / "hardware.yaml"))
    hardware = hardware_file.by_id() if hardware_file else {}
    use_cache = use_cache and signatures
    cache = (
        SummaryCache.for_run(data_dir / "keys.yaml", allow_unsigned, host_keys=keys.host_ids)
        if summaries and use_cache
        else None
    )
    recipes = _load_recipes(data_dir / "models", found, cache)
    _load_overlays(data_dir / "overlays", recipes, hardware, found)
    suites, canary_sets = _load_suites(data_dir / "suites", found)
    # A data file already in error is not reported again through every packet that names it.
    unloaded = {Path(error.file).stem for error in found.errors if error.file}
    if hardware_file is None:
        unloaded.add("*hardware")  # not a valid slug, so no hardware id can collide with it
    reference = Reference(recipes, hardware, suites, canary_sets, frozenset(unloaded), data_digest(data_dir))
    listed_before = cache.listings(reference.digest) if cache is not None and known is not None else {}
    known = known if cache is not None else None
    reader = Reader(keys, allow_unsigned, cache, summaries, reference, known, listed_before, signatures)
    held: dict[str, Packet] = {}
    listing: dict[str, Listed] = {}
    paths: dict[str, Path] = {}
    keys_of_records: dict[str, str] = {}
    names, linked = _json_names(packets_dir)
    names = [name for name in names if name not in linked or not _link_leaves(packets_dir / name, found)]
    packet_files = [packets_dir / name for name in names if not name.endswith(SIGNATURE_SUFFIX)]
    _check_signatures_have_packets(packets_dir, names, found)
    for path, read in zip(packet_files, read_packets(packet_files, reader), strict=True):
        found.errors.extend(read.problems)
        listed = read.listed
        if listed is None:
            continue
        if listed.id in listing:
            found.add(f"same packet as {paths[listed.id].name}", file=path, field="id")
            continue
        listing[listed.id] = listed
        paths[listed.id] = path
        if read.packet is not None:
            held[listed.id] = read.packet
        if read.key is not None:
            keys_of_records[listed.id] = read.key
        found.errors.extend(read.reference_problems)
    if summaries:
        _read_whole(held, listing, paths, keys if signatures else None, allow_unsigned)
    for packet_id, listed in listing.items():
        if listed.reproduces and listed.reproduces not in listing:
            found.add(f"names unknown packet {listed.reproduces!r}", file=paths[packet_id], field="reproduces")
        elif listed.reproduces:
            problems = reproduction_problems(held[packet_id], held[listed.reproduces])
            found.errors.extend(located(problems, paths[packet_id]))
    found.raise_if_any()
    to_keep = None
    if cache is not None and known is not None:
        listed_now: dict[str, object] = {key: listing[packet_id] for packet_id, key in keys_of_records.items()}
        if listed_now != listed_before:
            to_keep = partial(cache.keep_listings, reference.digest, listed_now)
    reproduced_by: dict[str, list[str]] = {}
    by_family: dict[str, list[str]] = {}
    by_hardware: dict[str, dict[str, list[Listed]]] = {}
    for packet_id, listed in sorted(listing.items()):
        by_family.setdefault(listed.slug, []).append(packet_id)
        by_hardware.setdefault(listed.hardware, {}).setdefault(listed.slug, []).append(listed)
        if listed.reproduces:
            reproduced_by.setdefault(listed.reproduces, []).append(packet_id)
    by_hardware = {hw: dict(sorted(families.items())) for hw, families in by_hardware.items()}
    stored = Summaries(reader, keys_of_records) if keys_of_records else None
    return Catalog(
        recipes=recipes,
        hardware=hardware,
        suites=suites,
        canary_sets=canary_sets,
        packets=Packets(held, listing, paths, stored),
        listing=listing,
        keys=keys,
        packet_paths=paths,
        reproduced_by=reproduced_by,
        by_family=by_family,
        warnings=[*lint(recipes, listing), *_host_key_warnings(listing)],
        by_hardware=by_hardware,
        summaries=stored,
        to_keep=to_keep,
    )


def _host_key_warnings(listing: dict[str, Listed]) -> list[str]:
    return [
        f"{packet_id}: {HOST_KEY_NOTE} (key {listed.host_key[:12]}): make check, make verify and CI refuse it "
        "until you add the lines `make measure` printed to data/keys.yaml"
        for packet_id, listed in sorted(listing.items())
        if listed.host_key
    ]


def _require_inputs(data_dir: Path, packets_dir: Path) -> None:
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


def _json_names(folder: Path) -> tuple[list[str], set[str]]:
    """The names `folder.glob("*.json")` finds, sorted, and those of them that are symbolic links:
    listed as strings, since 40,000 Path objects cost a tenth of a second to make and more to sort
    (whether an entry is a link comes with the listing, without a system call per file)."""
    if not folder.is_dir():
        return [], set()
    with os.scandir(folder) as entries:
        found = [(entry.name, entry.is_symlink()) for entry in entries if entry.name.endswith(".json")]
    return sorted(name for name, _ in found), {name for name, link in found if link}


def _link_leaves(path: Path, found: _Collector) -> bool:
    """Whether a packet (or signature) that is a symbolic link leads outside the catalog the build
    was given (the folder holding packets/): refused by name, never read. A link that leads
    nowhere (a loop) is left to the reader, which cannot read it and says so."""
    root = path.parent.resolve().parent
    try:
        target = path.resolve()
    except (OSError, RuntimeError):  # a loop: Python 3.11 raises RuntimeError, later ones OSError
        return False
    if target.is_relative_to(root):
        return False
    found.add(
        f"a symbolic link to {target}, outside the catalog ({root}): a build reads only the catalog it was given",
        file=path,
        field="file",
    )
    return True


def _check_signatures_have_packets(folder: Path, names: list[str], found: _Collector) -> None:
    present = set(names)
    for name in names:
        if name.endswith(SIGNATURE_SUFFIX) and name.removesuffix(SIGNATURE_SUFFIX) + ".json" not in present:
            found.add("a signature for a packet that is not here", file=folder / name, field="subject")


def _read_whole(
    held: dict[str, Packet],
    listing: dict[str, Listed],
    paths: dict[str, Path],
    keys: KeyRing | None,
    allow_unsigned: bool,
) -> None:
    """Reproductions and the packets they name compare whole token arrays: read those few whole
    again (their bytes were verified a moment ago; a file changed since is refused here)."""
    involved = {p.reproduces for p in listing.values() if p.reproduces} | {
        i for i, p in listing.items() if p.reproduces
    }
    for packet_id in sorted(involved & listing.keys()):
        held[packet_id] = read_packet(paths[packet_id], keys, allow_unsigned=allow_unsigned)


def _load_recipes(directory: Path, found: _Collector, cache: SummaryCache | None = None) -> dict[str, Recipe]:
    recipes: dict[str, Recipe] = {}
    origin: dict[str, Path] = {}
    load = cache.load_model if cache is not None else load_file
    for path in sorted(directory.glob("*.yaml")):
        recipe = found.attempt(lambda path=path: load(Recipe, path))  # type: ignore[misc]
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
