"""`python -m builder build`: build the catalog into site/, or check that site/ is current."""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder import TEMPLATES, snapshot, stamp
from catalog.checks.lint import report
from catalog.errors import CatalogError, exit_on_user_error
from catalog.forked import forked_call

if TYPE_CHECKING:
    from builder.output import Recorded
    from builder.site import BuildResult
    from builder.spare import Spare


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m builder", description="Build the static catalog.")
    commands = top.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="render data/ and packets/ into site/")
    build.add_argument("--data", type=Path, default=Path("data"), help="data folder (default: data)")
    build.add_argument("--packets", type=Path, default=Path("packets"), help="packets folder (default: packets)")
    build.add_argument("--out", type=Path, default=Path("site"), help="output folder (default: site)")
    build.add_argument("--templates", type=Path, default=TEMPLATES, help=argparse.SUPPRESS)
    build.add_argument("--timings", type=Path, help=argparse.SUPPRESS)  # CPU per page kind, as JSON (bench)
    build.add_argument("--base-url", default="", help="absolute URL the site is published at (sitemap, og:url)")
    build.add_argument("--check", action="store_true", help="write nothing; fail if the output folder is stale")
    build.add_argument("--strict", action="store_true", help="fail on any warning")
    build.add_argument(
        "--allow-unsigned",
        action="store_true",
        help="a local build: admit packets without a known signature, marked 'unsigned, local' on every page",
    )
    build.add_argument(
        "--host-key",
        action="store_true",
        help="a local build on a measuring host (make site): also show packets signed by this host's own key, "
        "read from its key file, labelled as not yet listed in data/keys.yaml (make check and CI refuse them)",
    )
    build.add_argument(
        "--no-cache",
        action="store_true",
        help="verify every packet from scratch, trusting no summary cached by an earlier build (CI)",
    )
    build.add_argument(
        "--full",
        action="store_true",
        help="render every page, even those no new packet affects (the default keeps them from the current site)",
    )
    build.add_argument(
        "--allow-shrink",
        action="store_true",
        help="publish even when the new site holds fewer than half the packets of the current one",
    )
    return top


def _check_shrink(out: Path, packet_count: int, allow: bool, manifest: dict[str, Any] | None) -> None:
    """Refuse to replace a site with one holding fewer than half its packets (a wrong --packets
    folder, a half-finished checkout) unless --allow-shrink says it is meant. `manifest`: the
    current site's, as read when the build began."""
    before = stamp.packets_in_site(out, manifest)
    if packet_count * 2 < before and not allow:
        raise CatalogError(
            f"refusing to publish {packet_count} packet(s) over the {before} the site was built from "
            "(fewer than half): pass --allow-shrink if that is meant",
            file=out,
        )


def _sha256(content: bytes | Path, known: stamp.Fingerprints) -> str:
    return known.sha256_at_start(content) if isinstance(content, Path) else hashlib.sha256(content).hexdigest()


def _up_to_date(
    options: argparse.Namespace,
    known: stamp.Fingerprints,
    warnings: list[str],
    seen: snapshot.Seen,
    now: snapshot.Seen,
    started: float,
) -> int:
    """The site is current: its recorded warnings are judged again (for --strict), and what proved
    it is kept for the next run."""
    if known.hashed_bytes:  # the next no-op will not read those bytes again
        known.save(options.out, keep_unseen=seen.proved(now.roots))
    if now != seen:
        now.save(options.out)
    if report(warnings, options.strict):
        return 1
    print(f"{options.out} is up to date: inputs and files unchanged ({time.perf_counter() - started:.2f} s)")
    return 0


def host_key_ids(options: argparse.Namespace) -> tuple[str, ...]:
    """The ids of this host's own keys a --host-key build admits: an input like the rest (a new key
    is a new site). Read here, never made."""
    if not options.host_key:
        return ()
    from catalog.packets.signing import host_public_keys

    return tuple(sorted(entry.id for entry in host_public_keys()))


def _input_hash(
    options: argparse.Namespace, known: stamp.Fingerprints, seen: snapshot.RootsSeen | None
) -> stamp.Inputs:
    return stamp.input_hash(
        options.data,
        options.packets,
        options.templates,
        options.base_url,
        known,
        allow_unsigned=options.allow_unsigned,
        host_keys=host_key_ids(options),
        seen=seen,
    )


# A build makes millions of objects that live until it ends, and few reference cycles. At Python's
# default threshold (a young collection every 700 allocations) the cycle collector scanned the
# long-lived ones again and again: 1.4 s of a one-packet rebuild at 1000 x 20. Forked workers
# inherit the setting.
ALLOCATIONS_PER_COLLECTION = 100_000


@contextmanager
def collected_rarely() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(ALLOCATIONS_PER_COLLECTION, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def run(argv: list[str] | None = None) -> int:
    with collected_rarely():
        return _run(argv)


def _run(argv: list[str] | None) -> int:
    options = parser().parse_args(argv)
    started = time.perf_counter()
    known = stamp.Fingerprints.load(options.out)
    seen = snapshot.Seen.load(options.out)
    if not options.check:
        from builder.output import clean_leftovers, real_output

        clean_leftovers(real_output(options.out))  # what a killed build left, even when nothing changed
    site = seen.site if not options.check else None
    # whether the site is as the last build left it: 60,000 stats at 1000 x 20, taken in a forked
    # process while this one hashes the inputs
    proving = forked_call(partial(site.snapshot.holds, {snapshot.SITE: os.fspath(options.out)})) if site else None
    try:
        inputs = _input_hash(options, known, seen.roots)
    finally:
        site_held = proving is not None and proving.result()
    manifest = None
    if not options.check:
        if site is not None and not inputs.irregular and site.inputs == inputs.sha256 and site_held:
            now = snapshot.Seen(inputs.roots, site)
            return _up_to_date(options, known, list(site.warnings), seen, now, started)
        manifest = stamp.recorded(real_output(options.out))
        if manifest is not None and manifest.get("inputs") == inputs.sha256 and not inputs.irregular:
            taken = snapshot.of_site(options.out)  # before the files are checked: no later change passes as proven
            warnings = stamp.unchanged(options.out, inputs, known, manifest)
            if warnings is not None:
                site = snapshot.SiteSeen(taken, inputs.sha256, tuple(warnings)) if taken else None
                return _up_to_date(options, known, warnings, seen, snapshot.Seen(inputs.roots, site), started)
    if seen.proved(inputs.roots):
        # proven by the snapshot, no input's sha256 was looked up: the build reads its packets by them
        inputs = _input_hash(options, known, None)

    from builder.incremental import Previous
    from builder.output import Recorded, check_output_folder, real_output, scratch_folder, spare_taken
    from builder.site import build_files

    build = partial(
        build_files,
        options.data,
        options.packets,
        templates=options.templates,
        base_url=options.base_url,
        allow_unsigned=options.allow_unsigned,
        host_keys=options.host_key,
        use_cache=not options.no_cache,
        known=known.sha256_if_known,
    )
    if options.check:  # writes nothing beside the site: pages rendered by workers go to a temporary folder
        result = build()
        try:
            return _finish(options, result, inputs, known, started)
        finally:
            if result.scratch is not None:
                shutil.rmtree(result.scratch, ignore_errors=True)
    check_output_folder(options.out, [options.data, options.packets, options.templates, Path.cwd()])
    previous, recorded = None, None
    if not options.full and not inputs.irregular:
        site_now = real_output(options.out)
        proof = site.snapshot if site is not None else None
        unchanged_since = proof is not None and site_held
        # a stray is not taken into the new site: only the files recorded are checked
        current_site = manifest if unchanged_since else stamp.intact(site_now, known, manifest, strays=False)
        previous = Previous.from_manifest(site_now, current_site, known.sha256_at_start) if current_site else None
        if unchanged_since and proof is not None and previous is not None:
            recorded = Recorded(proof, previous.files)  # publishing takes the snapshot again
    # the spare is listed on a thread while the site is built
    with scratch_folder(options.out) as scratch, spare_taken(options.out, stamp.spare_site(options.out)) as spare:
        result = build(scratch=scratch, previous=previous, context=inputs.context)
        return _finish(options, result, inputs, known, started, spare, recorded, manifest)


def _keep_for_next_build(
    result: BuildResult, known: stamp.Fingerprints, out: Path, hashes: dict[str, str], touched: frozenset[str]
) -> None:
    """What the load leaves for the cache, and each file of the new site's sha256 under its
    fingerprint."""
    if result.to_keep is not None:
        result.to_keep()
    for relative in touched & hashes.keys():
        known.record(out / relative, hashes[relative])
    known.keep(out, hashes.keys() - touched)  # the very inodes the replaced site held
    known.save(out)


def _finish(
    options: argparse.Namespace,
    result: BuildResult,
    inputs: stamp.Inputs,
    known: stamp.Fingerprints,
    started: float,
    spare: Spare | None = None,
    recorded: Recorded | None = None,
    manifest: dict[str, Any] | None = None,
) -> int:
    from builder.output import Copy, differences, swap_in

    step = time.perf_counter()
    # a string prefix: Path.is_relative_to costs 5 us, a second for a site's 60,000 files
    own = os.path.join(result.rendered_in, "") if result.rendered_in is not None else None
    hashes = {r: result.digests.get(r) or _sha256(content, known) for r, content in result.files.items()}
    files: dict[str, bytes | Copy] = {
        relative: Copy(
            content,
            hashes[relative],
            own is not None and relative in result.digests and os.fspath(content).startswith(own),
        )
        if isinstance(content, Path)
        else content
        for relative, content in result.files.items()
    }
    files[stamp.MANIFEST] = stamp.manifest(
        inputs.sha256,
        hashes,
        result.warnings,
        context=inputs.context,
        build_date=result.build_date,
        page_warnings=result.page_warnings,
        packet_places=result.packet_places,
    )
    failed_strict = report(result.warnings, options.strict)
    if (options.check or failed_strict) and result.to_keep is not None:
        result.to_keep()  # nothing is published: no forked process keeps it after publishing
    if options.check:
        stale = differences(files, options.out, digest=known.sha256)
        for line in stale:
            print(f"stale: {line}", file=sys.stderr)
        if stale:
            print(f"error: {options.out} is stale ({len(stale)} file(s)); run `make site`", file=sys.stderr)
            return 1
        if not failed_strict:
            print(f"{options.out} is up to date ({len(files)} files)")
        return 1 if failed_strict else 0
    if failed_strict:
        return 1
    _check_shrink(options.out, stamp.packet_count(files), options.allow_shrink, manifest)
    swapped = swap_in(files, options.out, digest=known.sha256, spare=spare, recorded=recorded, hashes=hashes)
    # kept by a forked process while this one takes the new site's snapshot
    keeping = forked_call(partial(_keep_for_next_build, result, known, options.out, hashes, swapped.touched))
    try:
        taken = snapshot.of_written(options.out, files, swapped.settled)  # proven by the build that wrote it
        site = snapshot.SiteSeen(taken, inputs.sha256, tuple(result.warnings)) if taken else None
        snapshot.Seen(inputs.roots, site).save(options.out)
    finally:
        keeping.result()
    result.costs.phase("hash, publish", step)
    if options.timings is not None:
        options.timings.write_text(json.dumps(result.costs.report(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    elapsed = time.perf_counter() - started
    print(f"built {len(files)} files into {options.out}: {swapped.changed} changed ({elapsed:.2f} s)")
    return 0


main = exit_on_user_error(run)
