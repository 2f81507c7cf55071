"""The build's middle steps, load → views → render (builder/build.py runs them between plan and
publish), into a folder: the new site's pages and its manifest. Kept apart from build.py because
they import the models, the views and Jinja (0.7 s): a no-op, proven by the plan alone, imports none.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import date
from functools import partial
from pathlib import Path

from jinja2 import Environment

from builder import routes
from builder.api import family_api, models_api
from builder.build import Costs, Linked, Options, Plan, Restart, inputs_seen, linked_stat
from builder.inputs import digests
from builder.manifest import Manifest
from builder.memory import FamilyMade, Memory
from builder.output import Targets, stage
from builder.pages import ANY_PACKET, Written, card_key, family_key, needed, packet_key, render, view_key, write
from builder.search import search_files
from builder.seo import sitemap
from builder.site import build_date, family_pages, site_pages
from builder.views.common import SiteContext
from builder.views.family import family_view
from builder.views.index import IndexView, family_card, index_view, listings
from builder.views.recipe import recipe_evidence
from catalog.errors import CatalogError
from catalog.files import file_sha256
from catalog.forked import forked_map, worker_count
from catalog.model.packet import Packet
from catalog.packets.layout import SIGNATURE_SUFFIX, signature_path
from catalog.packets.verify import Staged, check_size
from catalog.recipes.hardware import Hardware
from catalog.store.listing import Listed
from catalog.store.reading import created_hint, read_one
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
# The site's pages go to two workers from 32 (a full build at 1,000 families: 1,000 recipe pages).
PAGES_PER_WORKER = 16


# ---- load: data/, then each family where its pages are made ----


@dataclass(frozen=True)
class PacketRead:
    name: str
    problems: list[CatalogError]
    listed: Listed | None = None
    sha256: str | None = None  # of the packet's bytes and of its signature's, as verified
    signature_sha256: str | None = None
    staged: tuple[Linked, Linked | None] | None = None  # the staged files' stats, checked before publishing


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
    pages: Path  # where pages are written: the staging folder (packets linked in), or --check's temporary one
    env: Environment
    changed: frozenset[str] | None  # the page keys that changed (None: a full build, every page rendered)


def family(shared: Shared, job: tuple[str, list[str]]) -> FamilyDone:
    """Load, view and render one family (its slug, its packet files): its packets read and checked;
    then, when every one of them holds, its view, its page, its API file and its packets' pages."""
    (slug, names), options, data = job, shared.options, shared.data
    targets = Targets(shared.pages)
    reads, held, paths = [], {}, {}
    for name in names:
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
    misplaced = any(p.identity.model.slug != slug for p in held.values())
    if slug not in data.recipes or problems or outside or misplaced or any(r.problems for r in reads):
        return FamilyDone(slug, reads, problems, None, [], outside)
    started = time.process_time()
    listing = {i: Listed.of(p) for i, p in held.items()}
    ctx = SiteContext(data.catalog(held, listing, paths), shared.date, options.base_url)
    said = family_view(slug, data.recipes[slug], ctx)
    view, card = said.view, family_card(said.view, data.hardware)
    api = write(targets, routes.family_api(slug), family_api(view, shared.date.isoformat()), "api", started)
    evidence = recipe_evidence(ctx, slug)  # the recipe page's, made while the packets are held
    made = FamilyMade(card, view.quantizations, list(said.warnings), tuple(sorted(held)), evidence)
    changed = shared.changed
    if changed is not None:  # a packet page shows the packets reproducing it
        changed = changed | {
            packet_key(p.reproduces) for i, p in held.items() if p.reproduces and packet_key(i) in changed
        }
    family_page, *packet_pages = family_pages(view, list(held.values()), ctx)
    page = render(family_page, shared.env, ctx, targets)
    written = [api._replace(seconds=0.0), page._replace(seconds=page.seconds + api.seconds)]  # the view counts here
    written += [render(p, shared.env, ctx, targets) for p in packet_pages if needed(p, changed)]
    return FamilyDone(slug, reads, [], made, written, [])


def _read(shared: Shared, targets: Targets, name: str) -> tuple[PacketRead, Packet | None]:
    """A packet verified and checked against data/; staged (linked into the new site) first, and
    verified from the staged bytes, so the bytes verified are the bytes published."""
    options = shared.options
    path = options.packets / name
    envelope = signature_path(path)
    stats: tuple[Linked, Linked | None] | None = None
    staged: Staged | None = None
    if not options.check and os.path.isfile(path):  # anything else is refused by verification
        try:
            check_size(path)  # a file larger than a packet may be is neither staged nor read
        except CatalogError as error:
            return PacketRead(name, [error]), None
        try:
            packet_file = targets.made(routes.packet_json(path.stem))
            packet_stat = stage(packet_file, path)
            signature_file = targets.of(routes.packet_signature(path.stem))
            signature_stat = stage(signature_file, envelope) if os.path.lexists(envelope) else None
            staged = Staged(packet_file.read_bytes(), signature_file.read_bytes() if signature_stat else None)
        except OSError as error:
            return PacketRead(name, [CatalogError(f"cannot read: {error.strerror}", file=path)]), None
        stats = (linked_stat(packet_stat), linked_stat(signature_stat) if signature_stat else None)
    data = shared.data
    read = read_one(path, data.keys, options.allow_unsigned, data.reference, staged, signatures=data.signatures)
    packet = read.packet if not read.problems else None
    if stats is not None and stats[1] is not None and packet is not None and not packet.signed:
        targets.of(routes.packet_signature(path.stem)).unlink()  # a key not listed: a local, unsigned packet
        stats = (stats[0], None)
    if staged is not None:
        signed = hashlib.sha256(staged.envelope).hexdigest() if staged.envelope is not None else None
    else:
        signed = file_sha256(envelope) if os.path.isfile(envelope) else None
    sha = packet.sha256 if packet is not None else None
    return PacketRead(name, [*read.problems, *read.reference_problems], read.listed, sha, signed, stats), packet


def _guess(name: str, slugs: Container[str]) -> str:
    """The family a packet file's name puts it in (`<slug>-<quantization>-<digest>.json`): the
    longest recipe slug it starts with, looked up at each dash, not each slug tried (at 1000 x 20
    that was 10 million comparisons, 1.9 s of every build). Verification says whether it was right."""
    dashes = [at for at, char in enumerate(name) if char == "-"]
    return next((name[:at] for at in reversed(dashes) if name[:at] in slugs), "")


def _family_pass(shared: Shared, groups: Mapping[str, list[str]], slugs: Iterable[str]) -> dict[str, FamilyDone]:
    jobs = [(slug, sorted(groups.get(slug, []))) for slug in sorted(slugs)]
    workers = worker_count(sum(len(names) for _, names in jobs), PACKETS_PER_WORKER)
    per_worker = len(jobs) // workers if workers >= 2 else len(jobs) + 1
    jobs.sort(key=lambda job: -len(job[1]))  # the largest first: no worker ends long after the other
    return {d.slug: d for d in forked_map(partial(family, shared), jobs, per_worker=max(per_worker, 1), chunk=1)}


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


def load(options: Options, planned: Plan, pages: Path, env: Environment) -> Loaded:
    require_inputs(options.data, options.packets)
    data = load_data(options.data, host_keys=options.host_key)
    names, leaving = packet_names(options.packets)
    errors = [*data.errors, *leaving, *signatures_without_packets(options.packets, names)]
    files = [n for n in names if not n.endswith(SIGNATURE_SUFFIX)]
    slugs = data.recipes.keys()
    groups: dict[str, list[str]] = {}
    for name in files:
        groups.setdefault(_guess(name, slugs), []).append(name)
    memory = planned.memory
    changed_ids = {n.removesuffix(".json") for n in planned.changed}
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
    shared = Shared(options, data, frozenset(n.removesuffix(".json") for n in files), when, pages, env, keys)
    done = _family_pass(shared, groups, wanted)
    misplaced = {d.slug for d in done.values() for r in d.packets if r.listed and r.listed.slug != d.slug}
    if misplaced:  # a name put a packet in another family: those families again, as verified
        moved = {r.name: r.listed.slug for s in misplaced for r in done[s].packets if r.listed}
        groups = {s: [n for n in g if n not in moved] for s, g in groups.items()}
        for name, slug in moved.items():
            groups.setdefault(slug, []).append(name)
        again = misplaced | set(moved.values())
        done |= _family_pass(shared, groups, again)
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
        done = _family_pass(replace(shared, date=true_date), groups, wanted)  # a full build: changed is None
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


def views(loaded: Loaded, options: Options, memory: Memory | None) -> tuple[SiteContext, IndexView]:
    """The site's context and index; with the last build's memory, each listing page whose view differs from the
    one it rendered is marked changed (one added at 1000 x 20 rendered all 30 again: 0.3 s of its 5 s)."""
    paths = {i: options.packets / f"{i}.json" for i in loaded.listing}
    catalog = loaded.data.catalog({}, loaded.listing, paths)
    ctx = SiteContext(catalog, loaded.date, options.base_url)
    index = _index(loaded.families, catalog.hardware)
    if memory is not None and loaded.changed is not None:
        loaded.changed |= changed_views(listings(_index(memory.families, catalog.hardware)), listings(index))
    return ctx, index


def changed_views(was: Mapping[str, object], now: Mapping[str, object]) -> frozenset[str]:
    return frozenset(view_key(path) for path, view in now.items() if was.get(path) != view)


def _index(made: Mapping[str, FamilyMade], hardware: dict[str, Hardware]) -> IndexView:
    return index_view([m.card for m in made.values()], hardware, [q for m in made.values() for q in m.quantizations])


def render_site(
    loaded: Loaded, options: Options, ctx: SiteContext, index: IndexView, pages: Path, env: Environment
) -> list[str]:
    """The site's pages, those the build needs rendered; every page's path (the sitemap's)."""
    cards = {slug: made.card for slug, made in loaded.families.items()}
    evidence = {slug: made.recipe_evidence for slug, made in loaded.families.items()}
    found = site_pages(ctx, cards, index, evidence)
    targets = Targets(pages)
    todo = [p for p in found if needed(p, loaded.changed) or p.path not in loaded.before]  # a new page: rendered
    rendered = forked_map(
        partial(render, env=env, ctx=ctx, targets=targets), todo, per_worker=PAGES_PER_WORKER, chunk=16
    )
    loaded.written.update((w.path, w) for w in rendered)
    every = [p.path for p in found]
    every += [routes.family_page(s) for s in loaded.families] + [routes.packet_page(i) for i in loaded.listing]
    stamp, started = loaded.date.isoformat(), time.process_time()
    files = {routes.MODELS_API: models_api(index, stamp)}
    files[routes.SITEMAP] = sitemap([p for p in every if p != routes.NOT_FOUND], ctx)
    files |= search_files(made.card for made in loaded.families.values())
    if loaded.changed is None:  # an incremental build keeps the assets: the templates are the same
        assets = options.templates / routes.ASSETS_FOLDER
        for p in sorted(assets.rglob("*")):
            if p.is_file():
                files[routes.asset(p.relative_to(assets).as_posix())] = p.read_bytes()
    for path, body in files.items():
        sha = hashlib.sha256(body).hexdigest()
        if loaded.before.get(path) == sha and loaded.changed is not None:  # kept from the site: as it is
            loaded.written[path] = Written(path, sha, "kept", 0.0)
        else:
            loaded.written[path] = write(targets, path, body, "data", started)
    return every


def assemble(options: Options, planned: Plan, pages: Path, env: Environment, costs: Costs) -> tuple[Loaded, Manifest]:
    """load → views → render, into `pages`; and the manifest of the site they make."""
    with costs.timed("load"):
        loaded = load(options, planned, pages, env)
    with costs.timed("views"):
        ctx, index = views(loaded, options, planned.memory)
    with costs.timed("render"):
        every = render_site(loaded, options, ctx, index, pages, env)
    costs.add(w for w in loaded.written.values() if w.kind not in ("api", "data", "kept"))
    families = [w for made in loaded.families.values() for w in made.warnings]
    said = dict.fromkeys([*ctx.catalog.warnings, *families])  # the data's warnings, then each family's, each once
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
    files_seen = inputs_seen(planned.named, planned.walked, planned.proof, loaded.reads)
    everything, context = digests(files_seen, planned.walked, planned.settings)
    return Manifest(
        inputs=everything,
        context=context,
        build_date=loaded.date.isoformat(),
        files=files,
        packets=sum(1 for p in files if routes.is_packet_json(p)),
        warnings=warnings,
    )
