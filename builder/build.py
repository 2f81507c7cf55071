"""`make site`, as five steps and a record (builder/cli.py only parses and prints):

- plan: what this build must do. Nothing, when every input file and every entry of the site has
  the stat the last build recorded (a no-op, proven without reading a byte); the families whose
  packets changed, when the rest is as the last build left it (an incremental build); else all.
- load: data/, then each family on every core: its packets staged into the new site (linked) and
  verified from the staged bytes, checked against data/ and against each other; its view made
  and its pages rendered there, while its packets are held (each packet is read once).
- views: the site's own views, from every packet's listing and every family's index card.
- render: the site's pages (recipes, index, hardware, methodology), the API and the sitemap.
- publish: the new site swapped in whole (builder/output.py).
- remember: what proves the new site, for the next build (builder/memory.py).

A page is rendered again in an incremental build when what it depends on changed (pages.py);
tests/builder/test_site_incremental.py holds the result to a full build's bytes.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from functools import partial
from pathlib import Path
from stat import S_ISDIR

from jinja2 import Environment

from builder import TEMPLATES, inputs, routes
from builder.api import family_api, models_api, models_entry
from builder.inputs import Walked, digests, roots, seen, settings, site_entries, site_stats, walk
from builder.manifest import Manifest, packets_in_site, read_manifest
from builder.memory import Cache, FamilyMade, FileSeen, Memory, Proof, Stat, stat_of
from builder.output import (
    Targets,
    _write,
    check_output_folder,
    clean_leftovers,
    differences,
    keep_only,
    publish,
    real_output,
    stage,
    staging,
)
from builder.pages import ANY_PACKET, Costs, Written, card_key, family_key, needed, packet_key, render, write
from builder.render import make_environment
from builder.search import search_files
from builder.seo import sitemap
from builder.site import build_date, family_pages, site_pages
from builder.views.common import SiteContext
from builder.views.family import family_view
from builder.views.index import IndexView, family_card, index_view
from builder.views.recipe import recipe_evidence
from catalog.errors import CatalogError
from catalog.files import file_sha256, read_bytes
from catalog.forked import forked_map, worker_count
from catalog.model.packet import Packet
from catalog.packets.layout import SIGNATURE_SUFFIX, signature_path
from catalog.packets.signing import host_public_keys
from catalog.packets.verify import Staged, check_size
from catalog.store.listing import Listed
from catalog.store.reading import read_one
from catalog.store.repository import (
    Data,
    load_data,
    packet_names,
    raise_if_any,
    reproduction_errors,
    require_inputs,
    signatures_without_packets,
)

PACKETS_PER_WORKER = 32  # below this many packets for each of two workers, one process is faster
PAGES_PER_WORKER = 64


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


@dataclass(frozen=True)
class Outcome:
    """What the build did, for the command line to say: its warnings (said once each, in order:
    --strict counts them), the files --check found stale; `published` False: nothing written."""

    message: str
    warnings: tuple[str, ...]
    stale: list[str] = field(default_factory=list)
    published: bool = True
    costs: Costs = field(default_factory=Costs)


class Restart(Exception):
    """An incremental build cannot give a full build's bytes (the build date moved, the site
    changed under it): it starts again as a full build."""


# ---- plan ----


@dataclass(frozen=True)
class Previous:
    """What an incremental build takes from the last: what it remembered of the site it updates,
    and the packet files changed since (by name)."""

    memory: Memory
    changed: frozenset[str]


@dataclass(frozen=True)
class Plan:
    named: dict[str, str]
    walked: Walked
    settings: str
    proof: Proof | None
    noop: bool = False
    refreshed: bool = False  # a no-op whose input files were touched, not changed: `proof` holds their new stats
    previous: Previous | None = None  # set: an incremental build
    # the current site's files this build keeps, each with its stat as proven: every file for an
    # incremental build; for a full one, the packets (their bytes do not depend on the templates)
    keep: dict[str, Stat] = field(default_factory=dict)


def host_key_ids(host_key: bool) -> tuple[str, ...]:
    """The ids of this host's own keys a --host-key build admits: read from their files, never made."""
    return tuple(sorted(entry.id for entry in host_public_keys())) if host_key else ()


def plan(options: Options, cache: Cache, out: Path) -> Plan:
    named = roots(options.data, options.packets, options.templates)
    walked = walk(named)
    settings_hash = settings(options.base_url, options.allow_unsigned, host_key_ids(options.host_key))
    proof = None if options.full or options.check else cache.recall_proof()
    if proof is None or proof.settings != settings_hash or walked.irregular:
        return Plan(named, walked, settings_hash, proof)
    now = _stats_now(out, proof.site)
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
    memory = cache.recall_memory()
    if memory is None or len(intact) < len(files):  # a file of the site edited by hand (a stray is left out)
        return Plan(named, walked, settings_hash, proof, keep=packets)
    context = digests(_inputs(named, walked, proof, {}, packets=False), walked, settings_hash)[1]
    if context != memory.manifest.context:
        return Plan(named, walked, settings_hash, proof, keep=packets)
    return Plan(named, walked, settings_hash, proof, previous=Previous(memory, changed), keep=intact)


def _stats_now(out: Path, recorded: Mapping[str, Stat]) -> dict[str, Stat]:
    found: dict[str, Stat] = {}
    root = os.fspath(out)
    for relative in recorded:
        try:
            found[relative] = stat_of(os.lstat(os.path.join(root, relative)) if relative else os.stat(root))
        except OSError:
            continue
    return found


def _packet_name(name: str) -> str:
    """A packet's file name, from its own or its signature's."""
    return name.removesuffix(SIGNATURE_SUFFIX) + ".json" if name.endswith(SIGNATURE_SUFFIX) else name


def _inputs(
    named: dict[str, str], walked: Walked, proof: Proof | None, reads: Mapping[str, PacketRead], *, packets: bool = True
) -> dict[str, FileSeen]:
    """Every input file's sha256: a packet's as this build verified it (`reads`), any other's as
    the last build recorded it while its stat holds, else its bytes hashed."""
    before = proof.inputs if proof else {}
    others = replace(walked, files={k: s for k, s in walked.files.items() if not k.startswith("packets/")})
    files = seen(others, named, before)
    if not packets:
        return files
    now = time.time_ns()
    for key, st in walked.files.items():
        if not key.startswith("packets/"):
            continue
        name = key.removeprefix("packets/")
        read = reads.get(_packet_name(name))
        sha = (read.signature_sha256 if name.endswith(SIGNATURE_SUFFIX) else read.sha256) if read else None
        if sha is None:
            files[key] = seen(Walked({key: st}, (), ()), named, before)[key]
        else:
            racy = now - st.st_ctime_ns <= inputs.RACY_NS
            files[key] = FileSeen(None if racy else (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino), sha)
    return files


# ---- load: data/, then each family where its pages are made ----


@dataclass(frozen=True)
class Job:
    """One family's part of the build: its packet files, whether to stage them into the new site,
    and the page keys that changed (None: a full build, every page rendered)."""

    slug: str
    names: tuple[str, ...]
    staged: bool
    changed: frozenset[str] | None


@dataclass(frozen=True)
class PacketRead:
    name: str
    listed: Listed | None
    problems: list[CatalogError]
    sha256: str | None  # of the packet's bytes and of its signature's, as verified
    signature_sha256: str | None
    staged: tuple[Linked, Linked | None] | None  # the staged files' stats, checked before publishing


@dataclass(frozen=True)
class FamilyDone:
    slug: str
    packets: list[PacketRead]
    problems: list[CatalogError]  # its reproductions'
    made: FamilyMade | None  # None: a packet in error, or one of another family (regrouped)
    written: list[Written]
    outside: list[tuple[str, str]]  # (packet id, the id it reproduces), held by another family


@dataclass(frozen=True)
class Shared:
    """What every family's worker inherits (forked: nothing here is pickled)."""

    options: Options
    data: Data
    ids: frozenset[str]  # every packet's id, from its file name
    date: date
    pages: Path  # where pages are written: the staging folder, or --check's temporary one
    staged: bool  # packets linked into `pages` (not under --check)
    env: Environment


def family(shared: Shared, job: Job) -> FamilyDone:
    """Load, view and render one family: its packets read and checked; then, when every one of
    them holds, its view, its page, its API file and its packets' pages."""
    options, data = shared.options, shared.data
    targets = Targets(shared.pages)
    reads, held, paths = [], {}, {}
    for name in job.names:
        read, packet = _read(shared, targets, name)
        reads.append(read)
        if packet is not None and not read.problems:
            held[packet.id] = packet
            paths[packet.id] = options.packets / name
    inside = {
        i: p for i, p in held.items() if not p.reproduces or p.reproduces in held or p.reproduces not in shared.ids
    }
    outside = [(i, p.reproduces) for i, p in held.items() if p.reproduces and i not in inside]
    problems = reproduction_errors(inside, paths, shared.ids)
    misplaced = any(p.identity.model.slug != job.slug for p in held.values())
    if job.slug not in data.recipes or problems or outside or misplaced or any(r.problems for r in reads):
        return FamilyDone(job.slug, reads, problems, None, [], outside)
    started = time.process_time()
    listing = {i: Listed.of(p) for i, p in held.items()}
    ctx = SiteContext(data.catalog(held, listing, paths), shared.date, options.base_url)
    said = family_view(job.slug, data.recipes[job.slug], ctx)
    view, card = said.view, family_card(said.view, data.hardware)
    api = write(targets, routes.family_api(job.slug), family_api(view, shared.date.isoformat()), "api", started)
    evidence = recipe_evidence(ctx, job.slug)  # the recipe page's, made while the packets are held
    made = FamilyMade(card, view.quantizations, models_entry(card), list(said.warnings), tuple(sorted(held)), evidence)
    changed = job.changed
    if changed is not None:  # a packet page shows the packets reproducing it
        changed = changed | {
            packet_key(p.reproduces) for i, p in held.items() if p.reproduces and packet_key(i) in changed
        }
    family_page, *packet_pages = family_pages(view, list(held.values()), ctx)
    page = render(family_page, shared.env, ctx, targets)
    written = [api._replace(seconds=0.0), page._replace(seconds=page.seconds + api.seconds)]  # the view counts here
    written += [render(p, shared.env, ctx, targets) for p in packet_pages if needed(p, changed)]
    return FamilyDone(job.slug, reads, [], made, written, [])


def _read(shared: Shared, targets: Targets, name: str) -> tuple[PacketRead, Packet | None]:
    """A packet verified and checked against data/; staged (linked into the new site) first, and
    verified from the staged bytes, so the bytes verified are the bytes published."""
    options = shared.options
    path = options.packets / name
    envelope = signature_path(path)
    stats: tuple[Linked, Linked | None] | None = None
    staged: Staged | None = None
    if shared.staged and os.path.isfile(path):  # anything else is refused by verification
        try:
            check_size(path)  # a file larger than a packet may be is neither staged nor read
        except CatalogError as error:
            return PacketRead(name, None, [error], None, None, None), None
        try:
            packet_file = targets.made(routes.packet_json(path.stem))
            packet_stat = stage(packet_file, path)
            signature_file = targets.of(routes.packet_signature(path.stem))
            signature_stat = stage(signature_file, envelope) if os.path.lexists(envelope) else None
            staged = Staged(packet_file.read_bytes(), signature_file.read_bytes() if signature_stat else None)
        except OSError as error:
            return PacketRead(
                name, None, [CatalogError(f"cannot read: {error.strerror}", file=path)], None, None, None
            ), None
        stats = (_linked(packet_stat), _linked(signature_stat) if signature_stat else None)
    data = shared.data
    read = read_one(path, data.keys, options.allow_unsigned, data.reference, staged, signatures=data.signatures)
    packet = read.packet if not read.problems else None
    if stats is not None and stats[1] is not None and packet is not None and not packet.signed:
        targets.of(routes.packet_signature(path.stem)).unlink()  # a key not listed: a local, unsigned packet
        stats = (stats[0], None)
    if staged is not None:
        signed = _sha256(staged.envelope) if staged.envelope is not None else None
    else:
        signed = file_sha256(envelope) if os.path.isfile(envelope) else None
    sha = packet.sha256 if packet is not None else None
    return PacketRead(name, read.listed, [*read.problems, *read.reference_problems], sha, signed, stats), packet


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def created_hint(path: Path) -> datetime | None:
    """The `created` a packet file names, read from its bytes before it is verified: the date
    every page shows must be known before the first page is rendered. Canonical bytes sort the
    key after `arms` and before the rest, none of which holds a key of that name, so it is the
    last one; `load` checks the date against the packets as verified."""
    try:
        data = read_bytes(path)
    except CatalogError:  # a FIFO would block; verification names what is wrong with it
        return None
    key = b',"created":"'
    at = data.rfind(key)
    if at < 0:
        return None
    start = at + len(key)
    end = data.find(b'"', start)
    try:
        return datetime.fromisoformat(data[start:end].decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return None


def _guess(name: str, slugs: list[str]) -> str:
    """The family a packet file's name puts it in (`<slug>-<quantization>-<digest>.json`): the
    longest recipe slug it starts with. Verification says whether it was right."""
    return next((slug for slug in slugs if name.startswith(slug + "-")), "")


def _family_pass(shared: Shared, jobs: list[Job]) -> dict[str, FamilyDone]:
    total = sum(len(j.names) for j in jobs)
    workers = worker_count(total, PACKETS_PER_WORKER)
    per_worker = len(jobs) // workers if workers >= 2 else len(jobs) + 1
    ordered = sorted(jobs, key=lambda j: -len(j.names))  # the largest first: no worker ends long after the other
    return {d.slug: d for d in forked_map(partial(family, shared), ordered, per_worker=max(per_worker, 1), chunk=1)}


@dataclass
class Loaded:
    data: Data
    date: date
    listing: dict[str, Listed]
    families: dict[str, FamilyMade]
    written: dict[str, Written]
    reads: dict[str, PacketRead]  # this build's, by packet file name
    changed: frozenset[str] | None  # the page keys that changed; None: a full build
    before: Mapping[str, str]  # the files of the site an incremental build updates (its manifest's)


def load(options: Options, planned: Plan, pages: Path, staged: bool, env: Environment) -> Loaded:
    require_inputs(options.data, options.packets)
    data = load_data(options.data, host_keys=options.host_key)
    names, leaving = packet_names(options.packets)
    errors = [*data.errors, *leaving, *signatures_without_packets(options.packets, names)]
    files = [n for n in names if not n.endswith(SIGNATURE_SUFFIX)]
    slugs = sorted(data.recipes, key=len, reverse=True)
    groups: dict[str, list[str]] = {}
    for name in files:
        groups.setdefault(_guess(name, slugs), []).append(name)
    previous = planned.previous
    memory = previous.memory if previous else None
    changed_ids = {n.removesuffix(".json") for n in previous.changed} if previous else set()
    if memory is not None:  # the families whose packets changed, as they were and as their names say
        wanted = {memory.listing[i].slug for i in changed_ids if i in memory.listing}
        wanted |= {_guess(f"{i}.json", slugs) for i in changed_ids if f"{i}.json" in set(files)}
        unchanged = {i: listed for i, listed in memory.listing.items() if listed.slug not in wanted}
        hints = [created_hint(options.packets / n) for n in files if n.removesuffix(".json") in changed_ids]
        when = build_date(data.recipes, [*(listed.created for listed in unchanged.values()), *hints], os.environ)
        if when.isoformat() != memory.manifest.build_date:
            raise Restart
        keys: frozenset[str] | None = frozenset(
            packet_key(i)
            for i in changed_ids | {memory.listing[i].reproduces or "" for i in changed_ids & memory.listing.keys()}
        )
    else:
        wanted, unchanged, keys = set(groups) | set(data.recipes), {}, None
        when = build_date(data.recipes, [created_hint(options.packets / n) for n in files], os.environ)
    shared = Shared(options, data, frozenset(n.removesuffix(".json") for n in files), when, pages, staged, env)
    done = _family_pass(shared, [Job(s, tuple(groups.get(s, [])), staged, keys) for s in sorted(wanted)])
    misplaced = {d.slug for d in done.values() for r in d.packets if r.listed and r.listed.slug != d.slug}
    if misplaced:  # a name put a packet in another family: those families again, as verified
        moved = {r.name: r.listed.slug for s in misplaced for r in done[s].packets if r.listed}
        groups = {s: [n for n in g if n not in moved] for s, g in groups.items()}
        for name, slug in moved.items():
            groups.setdefault(slug, []).append(name)
        again = misplaced | set(moved.values())
        done |= _family_pass(shared, [Job(s, tuple(sorted(groups.get(s, []))), staged, keys) for s in sorted(again)])
    reads = {r.name: r for d in done.values() for r in d.packets}
    listing = {**unchanged, **{r.listed.id: r.listed for r in reads.values() if r.listed is not None}}
    errors += [e for name in sorted(reads) for e in reads[name].problems]
    errors += [e for slug in sorted(done) for e in done[slug].problems]
    for d in done.values():
        for packet_id, original in d.outside:
            errors += _across_families(options, data, packet_id, original)
    raise_if_any(errors)
    true_date = build_date(data.recipes, [listed.created for listed in listing.values()], os.environ)
    if true_date != when:  # a `created` the hint misread: every page again, under the true date
        if memory is not None:
            raise Restart
        shared = replace(shared, date=true_date)
        done = _family_pass(shared, [Job(s, tuple(groups.get(s, [])), staged, None) for s in sorted(wanted)])
    families = {s: f for s, f in (memory.families.items() if memory else []) if s not in done}
    families |= {s: d.made for s, d in done.items() if d.made is not None}
    written = {w.path: w for d in done.values() for w in d.written}
    changed = None if memory is None else changed_keys(memory.listing, listing, changed_ids)
    families = {s: families[s] for s in sorted(families) if s in data.recipes}
    before = memory.manifest.files if memory is not None else {}
    return Loaded(data, true_date, listing, families, written, reads, changed, before)


def changed_keys(before: Mapping[str, Listed], after: Mapping[str, Listed], ids: set[str]) -> frozenset[str]:
    """What each added, removed or re-signed packet touches, as it was and as it is: itself, its
    family, its card, the packet it reproduces and that one's card; and every page of packets."""
    keys = {ANY_PACKET}
    for packet_id in ids:
        for listing in (before, after):
            listed = listing.get(packet_id)
            if listed is None:
                continue
            keys |= {packet_key(packet_id), family_key(listed.slug), card_key(listed.hardware)}
            if listed.reproduces:
                keys.add(packet_key(listed.reproduces))
                original = listing.get(listed.reproduces)
                if original is not None:
                    keys.add(card_key(original.hardware))
    return frozenset(keys)


def _across_families(options: Options, data: Data, packet_id: str, original: str) -> list[CatalogError]:
    """A reproduction naming a packet of another family: both read whole, to say why it is not one."""
    paths = {i: options.packets / f"{i}.json" for i in (packet_id, original)}
    held = {}
    for i, path in paths.items():
        packet = read_one(path, data.keys, options.allow_unsigned, None, signatures=data.signatures).packet
        if packet is None:
            return []  # its own problems are said already
        held[i] = packet
    return reproduction_errors({packet_id: held[packet_id], original: held[original]}, paths, held)[:1]


# ---- views and render: the site's own pages ----


def views(loaded: Loaded, options: Options) -> tuple[SiteContext, IndexView]:
    paths = {i: options.packets / f"{i}.json" for i in loaded.listing}
    catalog = loaded.data.catalog({}, loaded.listing, paths)
    ctx = SiteContext(catalog, loaded.date, options.base_url)
    cards = [made.card for made in loaded.families.values()]
    quantizations = [q for made in loaded.families.values() for q in made.quantizations]
    return ctx, index_view(cards, catalog.hardware, quantizations)


def render_site(
    loaded: Loaded, options: Options, ctx: SiteContext, index: IndexView, pages: Path, env: Environment
) -> list[str]:
    """The site's pages, those the build needs rendered; every page's path (the sitemap's)."""
    cards = {slug: made.card for slug, made in loaded.families.items()}
    evidence = {slug: made.recipe_evidence for slug, made in loaded.families.items()}
    found = site_pages(ctx, cards, index, evidence)
    targets = Targets(pages)
    before = loaded.before
    todo = [p for p in found if needed(p, loaded.changed) or p.path not in before]  # a new page: rendered
    rendered = forked_map(
        partial(render, env=env, ctx=ctx, targets=targets), todo, per_worker=PAGES_PER_WORKER, chunk=16
    )
    loaded.written.update((w.path, w) for w in rendered)
    every = [p.path for p in found]
    every += [routes.family_page(s) for s in loaded.families] + [routes.packet_page(i) for i in loaded.listing]
    stamp, started = loaded.date.isoformat(), time.process_time()
    entries = {slug: made.models_entry for slug, made in loaded.families.items()}
    files = {routes.MODELS_API: models_api(index, stamp, entries)}
    files[routes.SITEMAP] = sitemap([p for p in every if p != routes.NOT_FOUND], ctx)
    files |= search_files(made.card for made in loaded.families.values())
    if loaded.changed is None:  # an incremental build keeps the assets: the templates are the same
        assets = options.templates / routes.ASSETS_FOLDER
        for p in sorted(assets.rglob("*")):
            if p.is_file():
                files[routes.asset(p.relative_to(assets).as_posix())] = p.read_bytes()
    for path, body in files.items():
        sha = _sha256(body)
        if loaded.before.get(path) == sha and loaded.changed is not None:  # kept from the site: as it is
            loaded.written[path] = Written(path, sha, "kept", 0.0)
        else:
            loaded.written[path] = write(targets, path, body, "data", started)
    return every


# ---- the build ----


def build(options: Options) -> Outcome:
    started, costs = time.perf_counter(), Costs()
    out = real_output(options.out)
    try:
        return _build(options, out, costs, started)
    except Restart:
        return _build(replace(options, full=True), out, costs, started)


def _build(options: Options, out: Path, costs: Costs, started: float) -> Outcome:
    cache = Cache.of(out)
    step = time.perf_counter()
    if not options.check:
        clean_leftovers(out)
    planned = plan(options, cache, out)
    costs.step("plan", step)
    if planned.noop and planned.proof is not None:
        if planned.refreshed:
            cache.keep(planned.proof)
        elapsed = time.perf_counter() - started
        message = f"{options.out} is up to date: inputs and files unchanged ({elapsed:.2f} s)"
        return Outcome(message, planned.proof.warnings, published=False, costs=costs)
    env = _compiled(options.templates)
    if options.check:
        with tempfile.TemporaryDirectory(prefix="catalog-check-") as scratch:
            loaded, manifest = _assemble(options, planned, Path(scratch), False, env, costs)
        built = {**manifest.files, routes.BUILD_MANIFEST: _sha256(manifest.to_bytes())}
        present = {relative: file_sha256(out / relative) for relative in _files_in(out)}
        stale = differences(built, out, present)
        return Outcome(
            f"{options.out} is up to date ({len(built)} files)", tuple(manifest.warnings), stale, False, costs
        )
    check_output_folder(options.out, [options.data, options.packets, options.templates, Path.cwd()])
    with staging(out, cache.spare) as (folder, _):
        kept = _keep(folder, planned.keep, out)
        loaded, manifest = _assemble(options, planned, folder, True, env, costs)
        if options.strict and manifest.warnings:
            return Outcome("", tuple(manifest.warnings), published=False, costs=costs)
        step = time.perf_counter()
        _prune(folder, kept, manifest)
        _refuse_changed(options, folder, loaded, kept, out)
        current = read_manifest(out)
        _refuse_shrink(options, out, manifest.packets, current)
        _write(folder / routes.BUILD_MANIFEST, manifest.to_bytes())  # never through the site's own
        publish(folder, out, cache.spare)
        costs.step("publish", step)
    step = time.perf_counter()
    remember(cache, planned, loaded, manifest, out)
    costs.step("remember", step)
    elapsed = time.perf_counter() - started
    before = current.files if current is not None else {}
    changed = sum(1 for path, sha in manifest.files.items() if before.get(path) != sha)
    message = f"built {len(manifest.files) + 1} files into {options.out}: {changed} changed ({elapsed:.2f} s)"
    return Outcome(message, tuple(manifest.warnings), costs=costs)


def _assemble(
    options: Options, planned: Plan, pages: Path, staged: bool, env: Environment, costs: Costs
) -> tuple[Loaded, Manifest]:
    """load → views → render, into `pages`; and the manifest of the site they make."""
    step = time.perf_counter()
    loaded = load(options, planned, pages, staged, env)
    costs.step("load", step)
    step = time.perf_counter()
    ctx, index = views(loaded, options)
    costs.step("views", step)
    step = time.perf_counter()
    every = render_site(loaded, options, ctx, index, pages, env)
    costs.step("render", step)
    costs.add(w for w in loaded.written.values() if w.kind not in ("api", "data", "kept"))
    said = dict.fromkeys(ctx.catalog.warnings)  # the data's warnings, then each family's, each once
    for made in loaded.families.values():
        said |= dict.fromkeys(made.warnings)
    return loaded, _manifest(planned, loaded, every, list(said))


def _manifest(planned: Plan, loaded: Loaded, pages: list[str], warnings: list[str]) -> Manifest:
    """Every file of the new site with its sha256: written by this build, a packet it staged, or
    kept from the site it updates."""
    expected = {*pages, *loaded.written}  # every page, and every file this build made
    expected |= {routes.family_api(s) for s in loaded.families}
    for packet_id, listed in loaded.listing.items():
        expected.add(routes.packet_json(packet_id))
        if listed.signed:
            expected.add(routes.packet_signature(packet_id))
    kept = loaded.before
    expected |= {p for p in kept if p.startswith(routes.ASSETS_FOLDER + "/")}
    verified: dict[str, str] = {}
    for read in loaded.reads.values():
        if read.listed is not None and read.sha256 is not None:
            verified[routes.packet_json(read.listed.id)] = read.sha256
            if read.signature_sha256 is not None:
                verified[routes.packet_signature(read.listed.id)] = read.signature_sha256
    files = {}
    for path in sorted(expected):
        written = loaded.written.get(path)
        files[path] = written.sha256 if written else verified.get(path) or kept[path]
    files_seen = _inputs(planned.named, planned.walked, planned.proof, loaded.reads)
    everything, context = digests(files_seen, planned.walked, planned.settings)
    count = sum(1 for p in files if routes.is_packet_json(p))
    return Manifest(
        inputs=everything,
        context=context,
        build_date=loaded.date.isoformat(),
        files=files,
        packets=count,
        warnings=warnings,
    )


def _keep(folder: Path, keep: Mapping[str, Stat], out: Path) -> dict[str, Linked]:
    """The staging folder made to hold the current site's files this build keeps (the very
    inodes) and nothing else; their stats there. A file that moved since it was proven: a full
    build, which keeps nothing of the site."""
    keep_only(folder, {r: (os.path.join(out, r), s[4]) for r, s in keep.items()})
    kept = {}
    for relative, proven in keep.items():
        st = _linked(os.lstat(folder / relative))
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


def _linked(st: os.stat_result) -> Linked:
    return (*stat_of(st), st.st_nlink)


def _moved(was: Linked, path: Path) -> bool:
    """Whether the file at `path` changed since its stat was `was`. Linked elsewhere (another
    build of the same packets) moves its ctime and its link count, and nothing else."""
    try:
        now = _linked(os.lstat(path))
    except OSError:
        return True
    mode, size, mtime, _, inode, links = was
    return now != was and not (now[:3] + now[4:5] == (mode, size, mtime, inode) and now[5] != links)


def _refuse_changed(options: Options, folder: Path, loaded: Loaded, kept: Mapping[str, Linked], out: Path) -> None:
    """A packet staged and verified, or a file kept from the site being replaced, that changed
    while the site was built is refused: the pages were made from what was verified."""
    for read in loaded.reads.values():
        if read.staged is None or read.listed is None:
            continue
        relatives = (routes.packet_json(read.listed.id), routes.packet_signature(read.listed.id))
        for relative, was in zip(relatives, read.staged, strict=True):
            if was is not None and _moved(was, folder / relative):
                raise CatalogError(
                    "changed while the site was being built: build again", file=options.packets / read.name
                )
    for relative, was in kept.items():
        if relative not in loaded.written and (folder / relative).exists() and _moved(was, folder / relative):
            raise CatalogError("changed while the site was being built: build again", file=out / relative)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _refuse_shrink(options: Options, out: Path, packets: int, current: Manifest | None) -> None:
    """Refuse to replace a site with one holding fewer than half its packets (a wrong --packets
    folder, a half-finished checkout) unless --allow-shrink says it is meant."""
    before = packets_in_site(out, current)
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
    inode are), and the racy window is waited out first, so none is taken as changed next time."""
    packets = {k: st for k, st in planned.walked.files.items() if k.startswith("packets/")}
    now = {k: _lstat(os.path.join(planned.named["packets"], k.removeprefix("packets/"))) for k in packets}
    newest = max((st.st_ctime_ns for st in now.values() if st is not None), default=0)
    wait = newest + inputs.RACY_NS - time.time_ns()
    if 0 < wait <= 2 * 10**8:  # this build's own links: waited out, so the next build trusts them
        time.sleep(wait / 1e9)
    site = site_stats(out, site_entries([*manifest.files, routes.BUILD_MANIFEST]))
    seen_now = _inputs(planned.named, planned.walked, planned.proof, loaded.reads)
    stamp = time.time_ns()
    for key, was in packets.items():
        st = now[key]
        if st is None or key not in seen_now:
            continue
        same = (st.st_size, st.st_mtime_ns, st.st_ino) == (was.st_size, was.st_mtime_ns, was.st_ino)
        fingerprint = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        trusted = same and stamp - st.st_ctime_ns > inputs.RACY_NS
        seen_now[key] = FileSeen(fingerprint if trusted else None, seen_now[key].sha256)
    if site is not None:  # else a file of it went while it was published: the next build builds whole
        cache.keep(
            Proof(planned.settings, seen_now, site, tuple(manifest.warnings)),
            Memory(manifest, loaded.listing, loaded.families),
        )


# ---- helpers ----


def _compiled(templates: Path) -> Environment:
    """Every template compiled once, before a worker forks: each inherits them compiled."""
    env = make_environment(templates)
    for template in env.list_templates(extensions=["html"]):
        env.get_template(template)
    return env


def _files_in(out: Path) -> list[str]:
    if not out.is_dir():
        return []
    return sorted(Path(root, name).relative_to(out).as_posix() for root, _, names in os.walk(out) for name in names)
