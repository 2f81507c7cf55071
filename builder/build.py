"""`make site`, as five steps and a record (builder/cli.py only parses and prints):

- plan: what this build must do. Nothing, when every input file and every entry of the site has
  the stat the last build recorded (a no-op, proven without reading a byte); the families whose
  packets changed, when the rest is as the last build left it (an incremental build); else all.
- load: data/, then each family on every core: its packets staged into the new site (linked) and
  verified from the staged bytes, checked against data/ and against each other; its view made
  and its pages rendered there, while its packets are held (each packet is read once).
- views: the site's own views, from every packet's listing and every family's index card.
- render: the site's pages (recipes, index, hardware, methodology), the API and the sitemap.
  (load, views and render: builder/assemble.py, imported only when the plan finds work, so a
  no-op imports no model, view or template: 0.7 s of the 1.7 s a no-op took at 1000 x 20.)
- publish: the new site swapped in whole (builder/output.py).
- remember: what proves the new site, for the next build (builder/memory.py).

A page is rendered again in an incremental build when what it depends on changed (pages.py);
tests/builder/test_site_incremental.py holds the result to a full build's bytes.
"""

from __future__ import annotations

import gc
import hashlib
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from stat import S_ISDIR
from typing import TYPE_CHECKING

from builder import TEMPLATES, inputs, routes
from builder.inputs import Walked, digests, roots, seen, settings, site_entries, site_stats, walk
from builder.memory import Cache, FileSeen, Memory, Proof, Stat, stat_of
from builder.output import (
    _write,
    check_output_folder,
    clean_leftovers,
    differences,
    keep_only,
    publish,
    staging,
)
from catalog.errors import CatalogError
from catalog.packets.layout import SIGNATURE_SUFFIX

if TYPE_CHECKING:
    from builder.assemble import Loaded, PacketRead
    from builder.manifest import Manifest
    from builder.pages import Written


@dataclass(frozen=True)
class Options:
    data: Path
    packets: Path
    out: Path
    templates: Path = TEMPLATES
    base_url: str = ""
    check: bool = False
    strict: bool = False
    allow_unsigned: bool = False
    host_key: bool = False  # make site on a measuring host: also admit this host's own key (labelled)
    full: bool = False
    allow_shrink: bool = False


@dataclass
class Costs:
    """CPU seconds and page count by kind of page, summed over every process, and the wall time of
    each step of the build: what `--timings` writes (the benchmark reads it)."""

    seconds: dict[str, float] = field(default_factory=dict)
    count: dict[str, int] = field(default_factory=dict)
    steps: dict[str, float] = field(default_factory=dict)

    def add(self, written: Iterable[Written]) -> None:
        for item in written:
            self.seconds[item.kind] = self.seconds.get(item.kind, 0.0) + item.seconds
            self.count[item.kind] = self.count.get(item.kind, 0) + 1

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        self.steps[name] = round(time.perf_counter() - started, 3)

    def report(self) -> Mapping[str, object]:
        pages = {
            kind: {"pages": self.count[kind], "cpu_ms_per_page": 1000 * self.seconds[kind] / self.count[kind]}
            for kind in sorted(self.count)
        }
        return {"pages": pages, "phases_s": dict(self.steps)}


@dataclass(frozen=True)
class Outcome:
    """What the build did, for the command line to say: its warnings (said once each, in order:
    --strict counts them), the files --check found stale."""

    message: str
    warnings: tuple[str, ...]
    stale: list[str] = field(default_factory=list)
    costs: Costs = field(default_factory=Costs)


class Restart(Exception):
    """An incremental build cannot give a full build's bytes (the build date moved, the site
    changed under it): it starts again as a full build."""


# ---- plan ----


@dataclass(frozen=True)
class Plan:
    named: dict[str, str]
    walked: Walked
    settings: str
    proof: Proof | None
    noop: bool = False
    refreshed: bool = False  # a no-op whose input files were touched, not changed: `proof` holds their new stats
    # an incremental build's: what the last build remembered of the site it updates (None: a full
    # build), and the packet files changed since (by name)
    memory: Memory | None = None
    changed: frozenset[str] = frozenset()
    # the current site's files this build keeps, each with its stat as proven: every file for an
    # incremental build; for a full one, the packets (their bytes do not depend on the templates)
    keep: dict[str, Stat] = field(default_factory=dict)


def plan(options: Options, cache: Cache, out: Path) -> Plan:
    named = roots(options.data, options.packets, options.templates)
    walked = walk(named)
    settings_hash = settings(options.base_url, options.allow_unsigned, options.host_key)
    proof = None if options.full or options.check else cache.recall(Proof)
    if proof is None or proof.settings != settings_hash or walked.irregular:
        return Plan(named, walked, settings_hash, proof)
    now = site_stats(out, proof.site)
    if now == proof.site and walked.unchanged_since(proof.inputs):
        return Plan(named, walked, settings_hash, proof, noop=True)
    if now == proof.site and walked.files.keys() == proof.inputs.keys():  # touched, perhaps not changed
        rehashed = seen(walked, named, proof.inputs)
        if all(rehashed[k].sha256 == was.sha256 for k, was in proof.inputs.items()):
            return Plan(named, walked, settings_hash, replace(proof, inputs=rehashed), noop=True, refreshed=True)
    # a packet of the site is its file in packets/ (a hard link): one changed there moved there too
    changed = frozenset(_packet_name(n) for n in walked.changed(proof.inputs, "packets"))
    moved = {f"{routes.PACKETS_FOLDER}/{name}" for name in changed}
    moved |= {routes.packet_signature(name.removesuffix(".json")) for name in changed}
    files = {r: s for r, s in proof.site.items() if r and not S_ISDIR(s[0]) and r not in moved}
    intact = {r: s for r, s in files.items() if now.get(r) == s}
    packets = {r: s for r, s in intact.items() if r.startswith(routes.PACKETS_FOLDER + "/") and r.count("/") == 1}
    memory = cache.recall(Memory)
    if memory is None or len(intact) < len(files):  # a file of the site edited by hand (a stray is left out)
        return Plan(named, walked, settings_hash, proof, keep=packets)
    context = digests(inputs_seen(named, walked, proof, {}, packets=False), walked, settings_hash)[1]
    if context != memory.manifest.context:
        return Plan(named, walked, settings_hash, proof, keep=packets)
    return Plan(named, walked, settings_hash, proof, memory=memory, changed=changed, keep=intact)


def _packet_name(name: str) -> str:
    """A packet's file name, from its own or its signature's."""
    return name.removesuffix(SIGNATURE_SUFFIX) + ".json" if name.endswith(SIGNATURE_SUFFIX) else name


def inputs_seen(
    named: dict[str, str], walked: Walked, proof: Proof | None, reads: Mapping[str, PacketRead], *, packets: bool = True
) -> dict[str, FileSeen]:
    """Every input file's sha256: a packet's as this build verified it (`reads`, its stat left for
    `remember` to take), any other's as the last build recorded it while its stat holds, else its
    bytes hashed."""
    before = proof.inputs if proof else {}
    others = replace(walked, files={k: s for k, s in walked.files.items() if not k.startswith("packets/")})
    files = seen(others, named, before)
    if not packets:
        return files
    for key, st in walked.files.items():
        if not key.startswith("packets/"):
            continue
        name = key.removeprefix("packets/")
        read = reads.get(_packet_name(name))
        sha = (read.signature_sha256 if name.endswith(SIGNATURE_SUFFIX) else read.sha256) if read else None
        files[key] = seen(Walked({key: st}, (), ()), named, before)[key] if sha is None else FileSeen(None, sha)
    return files


# ---- the build ----


def build(options: Options) -> Outcome:
    started, costs = time.perf_counter(), Costs()
    out = options.out.resolve() if options.out.is_symlink() else options.out  # a link: its target replaced
    try:
        return _build(options, out, costs, started)
    except Restart:
        return _build(replace(options, full=True), out, costs, started)
    finally:
        gc.enable()
        gc.unfreeze()


def _build(options: Options, out: Path, costs: Costs, started: float) -> Outcome:
    cache = Cache.of(out)
    # What the plan recalls and walks lives through the build: made with no collection, then frozen, never
    # scanned. The collector cost one packet added at 1000 x 20 0.47 s of its 5 s; 0.13 s now (FINDINGS).
    gc.disable()
    with costs.timed("plan"):
        if not options.check:
            clean_leftovers(out)
        planned = plan(options, cache, out)
    gc.enable()
    gc.freeze()
    if planned.noop and planned.proof is not None:
        if planned.refreshed:
            cache.keep(planned.proof)
        elapsed = time.perf_counter() - started
        message = f"{options.out} is up to date: inputs and files unchanged ({elapsed:.2f} s)"
        return Outcome(message, planned.proof.warnings, costs=costs)
    # the models, the views and Jinja, imported only once there is work: a no-op never pays for them
    from builder.assemble import assemble
    from builder.manifest import packets_in_site, read_manifest
    from builder.render import make_environment

    env = make_environment(options.templates)
    if options.check:
        with tempfile.TemporaryDirectory(prefix="catalog-check-") as scratch:
            loaded, manifest = assemble(options, planned, Path(scratch), env, costs)
        built = {**manifest.files, routes.BUILD_MANIFEST: hashlib.sha256(manifest.to_bytes()).hexdigest()}
        stale = differences(built, out)
        return Outcome(f"{options.out} is up to date ({len(built)} files)", tuple(manifest.warnings), stale, costs)
    check_output_folder(options.out, [options.data, options.packets, options.templates, Path.cwd()])
    with staging(out, cache.spare) as folder:
        kept = _keep(folder, planned.keep, out)
        loaded, manifest = assemble(options, planned, folder, env, costs)
        if options.strict and manifest.warnings:
            return Outcome("", tuple(manifest.warnings), costs=costs)
        with costs.timed("publish"):
            _prune(folder, kept, manifest)
            _refuse_changed(options, folder, loaded, kept, manifest, out)
            current = read_manifest(out)
            _refuse_shrink(options, manifest.packets, packets_in_site(out, current))
            _write(folder / routes.BUILD_MANIFEST, manifest.to_bytes())  # never through the site's own
            publish(folder, out, cache.spare)
    with costs.timed("remember"):
        remember(cache, planned, loaded, manifest, out)
    elapsed = time.perf_counter() - started
    before = current.files if current is not None else {}
    changed = sum(1 for path, sha in manifest.files.items() if before.get(path) != sha)
    message = f"built {len(manifest.files) + 1} files into {options.out}: {changed} changed ({elapsed:.2f} s)"
    return Outcome(message, tuple(manifest.warnings), costs=costs)


def _keep(folder: Path, keep: Mapping[str, Stat], out: Path) -> dict[str, Linked]:
    """The staging folder made to hold the current site's files this build keeps (the very
    inodes) and nothing else; their stats there. A file that moved since it was proven: a full
    build, which keeps nothing of the site."""
    keep_only(folder, {r: (os.path.join(out, r), s[4]) for r, s in keep.items()})
    kept, root = {}, os.path.join(folder, "")
    for relative, proven in keep.items():
        st = linked_stat(os.lstat(root + relative))
        if st[:3] + st[4:5] != proven[:3] + proven[4:]:  # linking it moved its ctime, nothing else may move
            raise Restart
        kept[relative] = st
    return kept


def _prune(folder: Path, kept: Mapping[str, Linked], manifest: Manifest) -> None:
    """Take out of the staging folder what was kept but the new site no longer holds (a removed
    packet's files and pages, a filter page no packet feeds any more)."""
    for relative in sorted(kept.keys() - manifest.files.keys() - {routes.BUILD_MANIFEST}):
        path = folder / relative
        path.unlink(missing_ok=True)
        parent = path.parent
        while parent != folder and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent


Linked = tuple[int, int, int, int, int, int]  # a Stat and the file's link count
CHANGED = "changed while the site was being built: build again"


def linked_stat(st: os.stat_result) -> Linked:
    return (*stat_of(st), st.st_nlink)


def _moved(was: Linked, path: str) -> bool:
    """Whether the file at `path` changed since its stat was `was`. Linked elsewhere (another
    build of the same packets) moves its ctime and its link count, and nothing else."""
    try:
        now = linked_stat(os.lstat(path))
    except OSError:
        return True
    return now != was and not (now[:3] + now[4:5] == was[:3] + was[4:5] and now[5] != was[5])


def _refuse_changed(
    options: Options, folder: Path, loaded: Loaded, kept: Mapping[str, Linked], manifest: Manifest, out: Path
) -> None:
    """A packet staged and verified, or a file kept from the site being replaced, that changed
    (or went) while the site was built is refused: the pages were made from what was verified."""
    root = os.path.join(folder, "")
    for read in loaded.reads.values():
        if read.staged is None or read.listed is None:
            continue
        relatives = (routes.packet_json(read.listed.id), routes.packet_signature(read.listed.id))
        for relative, was in zip(relatives, read.staged, strict=True):
            if was is not None and _moved(was, root + relative):
                raise CatalogError(CHANGED, file=options.packets / read.name)
    for relative, was in kept.items():  # but those pruned (not in the new site) and those written again
        if relative in manifest.files and relative not in loaded.written and _moved(was, root + relative):
            raise CatalogError(CHANGED, file=out / relative)


def _refuse_shrink(options: Options, packets: int, before: int) -> None:
    """Refuse to replace a site with one holding fewer than half its packets (a wrong --packets
    folder, a half-finished checkout) unless --allow-shrink says it is meant."""
    if packets * 2 < before and not options.allow_shrink:
        raise CatalogError(
            f"refusing to publish {packets} packet(s) over the {before} the site was built from "
            "(fewer than half): pass --allow-shrink if that is meant",
            file=options.out,
        )


# ---- remember ----


def remember(cache: Cache, planned: Plan, loaded: Loaded, manifest: Manifest, out: Path) -> None:
    """What proves the new site for the next build: every input's stat and sha256, every site
    entry's stat; and what an incremental build takes from it. A packet's stat is taken again:
    linking it into the site moved its ctime (its bytes are as verified while its size, mtime and
    inode are). A linked packet's is its site file's, the same inode, so the 40,000 packets are
    not stat'ed twice (0.2 s at 1000 x 20). The racy window is waited out, so that none is taken
    as changed next time."""
    entries = site_entries([*manifest.files, routes.BUILD_MANIFEST])
    site = site_stats(out, entries)
    if len(site) < len(entries):  # a file of it went while it was published: the next build builds whole
        return
    seen_now = inputs_seen(planned.named, planned.walked, planned.proof, loaded.reads)
    now: dict[str, Stat] = {}
    for key, was in planned.walked.files.items():
        if not key.startswith("packets/"):
            continue
        st = site.get(key)
        if st is None or st[4] != was.st_ino:  # copied, not linked (another file system): its own
            with suppress(OSError):
                st = stat_of(os.lstat(os.path.join(planned.named["packets"], key.removeprefix("packets/"))))
        if st is not None and (st[1], st[2], st[4]) == (was.st_size, was.st_mtime_ns, was.st_ino):
            now[key] = st
    wait = max((st[3] for st in now.values()), default=0) + inputs.RACY_NS - time.time_ns()
    if 0 < wait <= 2 * 10**8:  # this build's own links: waited out, so the next build trusts them
        time.sleep(wait / 1e9)
    stamp = time.time_ns()
    for key, st in now.items():
        if stamp - st[3] > inputs.RACY_NS:
            seen_now[key] = FileSeen((st[1], st[2], st[3], st[4]), seen_now[key].sha256)
    cache.keep(
        Proof(planned.settings, seen_now, site, tuple(manifest.warnings)),
        Memory(manifest, loaded.listing, loaded.families),
    )
