"""`python -m builder build`: build the catalog into site/, or check that site/ is current."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from builder.render import TEMPLATES
from builder.site import build_files, check_output_folder, check_paths, differences, publish
from catalog.errors import exit_on_catalog_error


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m builder", description="Build the static catalog.")
    commands = top.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="render data/ and packets/ into site/")
    build.add_argument("--data", type=Path, default=Path("data"), help="data folder (default: data)")
    build.add_argument("--packets", type=Path, default=Path("packets"), help="packets folder (default: packets)")
    build.add_argument("--out", type=Path, default=Path("site"), help="output folder (default: site)")
    build.add_argument("--templates", type=Path, default=TEMPLATES, help=argparse.SUPPRESS)
    build.add_argument("--base-url", default="", help="absolute URL the site is published at (sitemap, og:url)")
    build.add_argument("--check", action="store_true", help="write nothing; fail if the output folder is stale")
    build.add_argument("--strict", action="store_true", help="fail on any warning")
    return top


def run(argv: list[str] | None = None) -> int:
    options = parser().parse_args(argv)
    started = time.perf_counter()
    result = build_files(options.data, options.packets, templates=options.templates, base_url=options.base_url)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    failed_strict = options.strict and bool(result.warnings)
    if failed_strict:
        print(f"error: {len(result.warnings)} warning(s) and --strict", file=sys.stderr)
    if options.check:
        stale = differences(result.files, options.out)
        for line in stale:
            print(f"stale: {line}", file=sys.stderr)
        if stale:
            print(f"error: {options.out} is stale ({len(stale)} file(s)); run `make site`", file=sys.stderr)
            return 1
        if not failed_strict:
            print(f"{options.out} is up to date ({len(result.files)} files)")
        return 1 if failed_strict else 0
    if failed_strict:
        return 1
    check_output_folder(options.out, [options.data, options.packets, options.templates, Path.cwd()])
    check_paths(result.files, options.out)
    changed = publish(result.files, options.out)
    elapsed = time.perf_counter() - started
    print(f"built {len(result.files)} files into {options.out}: {changed} changed ({elapsed:.2f} s)")
    return 0


main = exit_on_catalog_error(run)
