"""`python -m builder build`: build the catalog into site/, or check that site/ is current. This
module parses the command line and says what the build did (builder/build.py does it)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

from builder import TEMPLATES
from catalog.checks.lint import report
from catalog.errors import exit_on_user_error


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
        "--full",
        "--no-cache",
        dest="full",
        action="store_true",
        help="build everything, taking nothing from the last build (the default keeps what no changed packet touches)",
    )
    build.add_argument(
        "--allow-shrink",
        action="store_true",
        help="publish even when the new site holds fewer than half the packets of the current one",
    )
    return top


def run(argv: list[str] | None = None) -> int:
    arguments = parser().parse_args(argv)
    from builder.build import Options, build  # after parsing: --help needs no model imported

    # each option is the flag of its name
    options = Options(**{field.name: getattr(arguments, field.name) for field in fields(Options)})
    outcome = build(options)
    failed = report(list(outcome.warnings), options.strict)  # every warning is counted here, once
    if arguments.timings is not None:
        arguments.timings.write_text(
            json.dumps(outcome.costs.report(), indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )
    for line in outcome.stale:
        print(f"stale: {line}", file=sys.stderr)
    if outcome.stale:
        print(f"error: {options.out} is stale ({len(outcome.stale)} file(s)); run `make site`", file=sys.stderr)
    if outcome.stale or failed:
        return 1
    if outcome.message:
        print(outcome.message)
    return 0


main = exit_on_user_error(run)
