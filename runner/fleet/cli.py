"""`python -m runner campaign plan|run|resources`: the fleet's commands (docs/fleet.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from catalog.errors import UserError
from catalog.store.repository import Catalog, load_catalog
from runner.fleet.cells import HOST_RESOURCE, expand, finished, jobs_of
from runner.fleet.head import refuse_impossible
from runner.fleet.plan_file import PlanFile, load_plan
from runner.measure import plan_request


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    campaign = commands.add_parser("campaign", help="measure a plan's matrix across a fleet of hosts on Ray")
    verbs = campaign.add_subparsers(dest="verb", required=True)
    plan = verbs.add_parser("plan", help="expand and check a campaign plan; print its cells; starts nothing")
    plan.add_argument("file", type=Path, help="campaigns/<name>.yaml")
    plan.add_argument("--round", help="which run of the plan (e.g. a date); shows what is already measured")
    plan.add_argument("--commands", action="store_true", help="also print each cell's arms and commands")
    run = verbs.add_parser("run", help="run a plan's jobs as Ray tasks and write their packets into packets/")
    run.add_argument("file", type=Path, help="campaigns/<name>.yaml")
    run.add_argument(
        "--address",
        help="the Ray cluster: host:port of its head (GCS), `auto`, or ray://host:10001 (Ray Client); "
        "default: a Ray instance of this host's own",
    )
    run.add_argument("--round", help="which run of the plan (e.g. a date): a new round measures every cell again")
    resources = verbs.add_parser(
        "resources", help="this host's cards as Ray resources (JSON for `ray start --resources`), read by preflight"
    )
    resources.add_argument("--cpu", action="store_true", help="also advertise the CPU stand-in card (cpu_generic)")
    resources.add_argument(
        "--expect",
        help="fail unless this host has exactly these cards, e.g. '{\"arc_pro_b70\": 2}' (a pod's or job's check "
        "that the resources it advertises statically are there)",
    )


def run(options: argparse.Namespace) -> int:
    if options.verb == "resources":
        from catalog.recipes.hardware import HardwareFile
        from catalog.store.documents import load_file
        from runner.fleet.hosts import card_resources

        hardware = load_file(HardwareFile, options.data / "hardware.yaml").hardware
        found = card_resources(hardware, cpu=options.cpu)
        resources = {name: int(n) if n.is_integer() else n for name, n in found.items()}
        if options.expect is not None:
            _check_expected(options.expect, resources)
        print(json.dumps(resources, sort_keys=True, separators=(",", ":")))
        return 0
    planned = load_plan(options.file)
    options.packets.mkdir(parents=True, exist_ok=True)
    catalog = load_catalog(options.data, options.packets, allow_unsigned=True)
    if options.verb == "plan":
        return _print_plan(planned, catalog, options)
    from runner.fleet.head import Head, HeadPlaces
    from runner.progress import console_progress

    with console_progress() as progress:
        head = Head(planned, catalog, HeadPlaces(options.data, options.packets, options.runs), options.round, progress)
        return head.run(options.address)


def _check_expected(expect: str, found: dict[str, float]) -> None:
    try:
        wanted = json.loads(expect)
    except json.JSONDecodeError as error:
        raise UserError(f"is not JSON: {error.msg}", field="--expect") from None
    if not isinstance(wanted, dict):
        raise UserError("must be a JSON object of card ids and counts", field="--expect")
    cards = {name: n for name, n in found.items() if name != HOST_RESOURCE}
    if {k: float(v) for k, v in wanted.items()} != {k: float(v) for k, v in cards.items()}:
        have, want = json.dumps(cards, sort_keys=True), json.dumps(wanted, sort_keys=True)
        raise UserError(
            f"this host's preflight finds {have}, not {want}",
            field="--expect",
            hint="check the cards with xpu-smi / nvidia-smi, or advertise what is there",
        )


def _print_plan(planned: PlanFile, catalog: Catalog, options: argparse.Namespace) -> int:
    """Every cell with what it needs of a host and its repeats' state; the impossible ones refused."""
    plan = planned.plan
    cells, impossible = expand(planned, catalog, options.data)
    done = finished(catalog.packets, plan, options.round)
    jobs = jobs_of(cells, plan, options.round)
    print(
        f"{planned.path}: campaign {plan.name}: {len(cells)} cell(s) x {plan.repeats} repeat(s) = {len(jobs)} job(s), "
        f"{sum((j.ref.cell, j.ref.repeat) in done for j in jobs)} already in {options.packets}"
    )
    for cell in cells:
        needs = ", ".join(f"{name} x {amount:g}" for name, amount in cell.resources().items())
        measured = [str(r) for r in range(1, plan.repeats + 1) if (cell.key, r) in done]
        state = f"repeats done: {', '.join(measured)}" if measured else "not measured yet"
        print(f"cell {cell.key} {cell.label} · timeout {cell.timeout_s:g} s · needs {needs} · {state}")
        if options.commands:
            for line in plan_request(catalog, cell.request, cell.runtime == "docker", options.data)[1:]:
                print(f"    {line}")
    refuse_impossible(planned, impossible)
    return 0
