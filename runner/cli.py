"""The runner's command line: measure, reproduce, import-reference, import-bench, campaign."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from pydantic import ValidationError

from catalog.errors import UserError, exit_on_user_error
from catalog.model.load_sweep import Slo
from catalog.store.repository import load_catalog
from runner.fleet import cli as fleet_cli
from runner.measure import Places, RuntimeChoice, measure
from runner.plan import LOAD_REQUESTS_PER_LEVEL, CampaignRequest, LoadSweepOptions
from runner.progress import console_progress

DEFAULT_VLLM_PYTHON = Path(".venv-vllm/bin/python")
RUNTIMES = ("local", "docker")


def _csv_ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _csv_floats(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None


LOAD_FLAGS = ("load_users", "rates", "load_requests", "slo", "load_seed")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runner", description="Measure LLM serving on real vLLM servers.")
    parser.add_argument("--data", type=Path, default=Path("data"))
    parser.add_argument("--packets", type=Path, default=Path("packets"))
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="server logs and finished attempts")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("measure", help="measure a model from its recipe and write a packet")
    run.add_argument("--model", required=True, help="recipe slug in data/models (demo runs anywhere)")
    run.add_argument("--variant", default="default")
    run.add_argument("--hardware", help="hardware id in data/hardware.yaml (default for demo: cpu_generic)")
    run.add_argument("--tp", type=int, default=1, help="tensor parallel size (cards)")
    run.add_argument("--depths", type=_csv_ints, default=[0], help="speculative depths, e.g. 0,3 (0 is the oracle)")
    run.add_argument("--ladders", type=_csv, default=[], help="concurrency,context,load")
    run.add_argument(
        "--concurrency", type=_csv_ints, help="users per concurrency ladder step (default 1,2,4,8,16,32,64)"
    )
    run.add_argument(
        "--load-users", type=_csv_ints, help="load sweep: closed-loop users per level (default 1,2,4,8,16,32,64)"
    )
    run.add_argument(
        "--rates",
        type=_csv_floats,
        help="load sweep: open-loop arrival rates, requests/s (default 0.25,0.5,0.75,1 x the highest closed-loop "
        "level's measured request rate)",
    )
    run.add_argument(
        "--load-requests", type=int, help=f"load sweep: requests per level (default {LOAD_REQUESTS_PER_LEVEL})"
    )
    run.add_argument("--slo", help="load sweep: goodput objectives, e.g. ttft_ms=500,tpot_ms=50,e2e_ms=20000")
    run.add_argument("--load-seed", type=int, help="load sweep: seed of the Poisson arrivals (default 1)")
    run.add_argument("--max-tokens", type=int, default=512)
    run.add_argument("--seed", type=int, default=1234)
    run.add_argument("--configuration", help="a measured configuration of the recipe's overlay (data/overlays)")
    _runtime_options(run)

    plan = commands.add_parser(
        "plan", help="check a measure request and print each arm's command; starts and installs nothing"
    )
    for action in run._actions:
        if action.dest in (
            "model",
            "variant",
            "hardware",
            "tp",
            "depths",
            "ladders",
            "concurrency",
            *LOAD_FLAGS,
            "max_tokens",
            "seed",
            "configuration",
        ):
            plan._add_action(action)
    plan.add_argument("--runtime", choices=RUNTIMES, default="local")

    again = commands.add_parser("reproduce", help="re-run the campaign a packet describes and compare")
    which = again.add_mutually_exclusive_group(required=True)
    which.add_argument("--packet", help="packet id")
    which.add_argument("--list", action="store_true", help="say which packets can be reproduced here, and why not")
    _runtime_options(again)

    ref = commands.add_parser("import-reference", help="seal a transcription of a published page into imported packets")
    ref.add_argument("transcription", type=Path)

    about = (
        "turn `vllm bench serve --save-result` JSON files into one screened packet (speed only): one file is "
        "a throughput (or, at --max-concurrency 1, single-stream) run; several --save-detailed files, one per "
        "--max-concurrency or --request-rate, are one load curve"
    )
    bench = commands.add_parser("import-bench", help=about, description=about)
    bench.add_argument(
        "results",
        type=Path,
        nargs="+",
        metavar="result",
        help="a --save-result JSON; several (each also --save-detailed) make one load curve, a level per file",
    )
    bench.add_argument("--model", required=True)
    bench.add_argument("--variant", default="default")
    bench.add_argument("--hardware", required=True)
    bench.add_argument("--cards", type=int, default=1)
    bench.add_argument("--source", required=True, help="who ran it, where it was published")
    bench.add_argument(
        "--load", action="store_true", help="read even a single --save-detailed file as a load curve (of one level)"
    )
    bench.add_argument(
        "--slo", help="a load curve's goodput objectives, e.g. ttft_ms=500,tpot_ms=50 (the file does not record them)"
    )
    fleet_cli.add_parser(commands)
    return parser


def _runtime_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--vllm-python", type=Path, default=DEFAULT_VLLM_PYTHON, help="python of an environment with vLLM")
    sub.add_argument("--docker", action="store_true", help="run the recipe's docker image instead of a local vLLM")
    sub.add_argument("--runtime", choices=RUNTIMES, help="local (a vLLM install) or docker (the recipe's image)")
    sub.add_argument("--model-dir", type=Path, help="local folder with the weights (default: the hub cache)")
    sub.add_argument("--health-timeout", type=float, default=900.0, help="seconds to wait for a server to be ready")


def _places(options: argparse.Namespace) -> Places:
    return Places(options.data, options.packets, options.runs, Path("models"))


def _choice(options: argparse.Namespace) -> RuntimeChoice:
    # Absolute, not resolved (a venv's python is a symlink that must stay in its venv): Path("./python")
    # prints as "python", which exec looks up on PATH instead of running the file preflight checked.
    python = options.vllm_python.absolute() if options.vllm_python else None
    docker = options.docker or options.runtime == "docker"
    return RuntimeChoice(python, docker, options.model_dir, options.health_timeout)


def run(argv: list[str] | None = None) -> int:
    options = build_parser().parse_args(argv)
    if options.command == "campaign":
        return fleet_cli.run(options)
    if options.command == "import-reference":
        from catalog.packets.signing import host_key
        from runner.import_reference import import_transcription

        for packet in import_transcription(options.transcription, options.packets, host_key(role="importer")):
            print(f"sealed {packet.id} ({packet.state.value})")
        return 0
    # The folder this run writes its packet into: a new one starts empty (load_catalog refuses a
    # missing folder, so that a mistyped --packets never builds an empty site).
    try:
        options.packets.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"cannot create the packets folder: {error.strerror}", file=options.packets) from None
    # This host's own packets are signed by a key data/keys.yaml may not list yet: the runner
    # reads them as unsigned, local packets; a bad or revoked signature still stops it.
    catalog = load_catalog(options.data, options.packets, allow_unsigned=True)
    if options.command == "import-bench":
        from runner.import_bench import import_bench

        if options.slo is not None:
            options.slo = parse_slo(options.slo)
        packet = import_bench(options, catalog)
        print(f"sealed {packet.id} (screened)")
        return 0
    if options.command == "plan":
        from runner.measure import plan_request

        for line in plan_request(catalog, _request(options), options.runtime == "docker", options.data):
            print(line)
        return 0
    if options.command == "reproduce":
        from runner.reproduce import reproduce, reproducibility

        if options.list:
            from rich.console import Console

            Console().print(reproducibility(catalog))
            return 0
        return reproduce(catalog, options.packet, _choice(options), _places(options))
    request = _request(options)
    with console_progress() as progress:
        measure(catalog, request, _choice(options), _places(options), progress)
    return 0


def _request(options: argparse.Namespace) -> CampaignRequest:
    try:
        return CampaignRequest(
            model=options.model,
            variant=options.variant,
            hardware=options.hardware,
            tp=options.tp,
            depths=options.depths,
            ladders=options.ladders,
            max_tokens=options.max_tokens,
            seed=options.seed,
            **({"concurrency_levels": options.concurrency} if options.concurrency else {}),
            configuration=options.configuration,
            load=_load_options(options),
        )
    except ValidationError as error:
        first = error.errors()[0]
        raise UserError(first["msg"], field="--" + str(first["loc"][0]).replace("_", "-")) from None


def _load_options(options: argparse.Namespace) -> LoadSweepOptions | None:
    """The load sweep's settings when LADDERS has load; a load flag without it is an error."""
    given = [name for name in LOAD_FLAGS if getattr(options, name) is not None]
    if "load" not in options.ladders:
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise UserError("is a load sweep setting: add load to --ladders", field=flag)
        return None
    fields: dict[str, object] = {}
    if options.load_users is not None:
        fields["users"] = options.load_users
    if options.rates is not None:
        fields["rates_rps"] = options.rates
    if options.load_requests is not None:
        fields["requests_per_level"] = options.load_requests
    if options.load_seed is not None:
        fields["seed"] = options.load_seed
    if options.slo is not None:
        fields["slo"] = parse_slo(options.slo)
    try:
        return LoadSweepOptions.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        flags = {"users": "--load-users", "rates_rps": "--rates", "requests_per_level": "--load-requests"}
        raise UserError(first["msg"], field=flags.get(str(first["loc"][0]), "--ladders")) from None


def parse_slo(text: str) -> dict[str, float]:
    """`ttft_ms=500,tpot_ms=50`: each key an objective of catalog.model.load_sweep.Slo, each value a number."""
    known = list(Slo.model_fields)
    objectives: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, _, value = part.partition("=")
        key = key.strip()
        if key not in known:
            raise UserError(f"unknown objective {key!r} (known: {', '.join(known)})", field="--slo")
        try:
            objectives[key] = float(value)
        except ValueError:
            raise UserError(f"{key} needs a number, got {value.strip()!r}", field="--slo") from None
        if not objectives[key] > 0 or objectives[key] == float("inf"):
            raise UserError(f"{key} must be a positive number of milliseconds", field="--slo")
    return objectives


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds like Ctrl-C, so every running server's group is stopped


def _main() -> int:
    # SIGTERM (kill, a CI timeout, systemd) ended the runner on the spot, leaving its vLLM servers,
    # each in a session of its own, running and holding the cards.
    signal.signal(signal.SIGTERM, _interrupt)
    return run()


main = exit_on_user_error(_main)
