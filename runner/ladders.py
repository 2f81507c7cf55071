"""Ladders on request: concurrency (c1..c64 released together) and context depth (2K..32K).

Each ladder runs on a fresh server of its arm, allowed 64 sequences. Concurrency outputs are
compared with the sequential oracle's token arrays; context outputs of a speculative arm are
compared with the oracle arm's outputs at the same depth and class.

Like attempts, ladders resume: a finished ladder is kept in the run folder, the context
ladder's token outputs beside it (a speculative arm measured after a resume compares with
them), and a ladder server that was interrupted starts again on an emptied folder. A ladder
that fails stops the campaign with one line naming its server log.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter
from typing import Literal

import httpx

from catalog.checks.energy import concurrency_tokens
from catalog.errors import UserError
from catalog.files import write_file
from catalog.model.metrics import decode_rate
from catalog.model.packet import ConcurrencyPoint, ContextPoint, Ladder, PromptRow
from catalog.packets.canonical import pretty_json
from catalog.recipes.suite import Suite
from catalog.store.documents import load_file
from runner.attempt import arm_cards
from runner.client import ClientError, new_http_client, stream_completion
from runner.energy.meter import describe
from runner.identity import scrub_argv
from runner.load_sweep import levels_path, run_load_sweep
from runner.metrics_scrape import MetricsError
from runner.plan import LADDER_MAX_SEQS, ArmPlan, LoadSweepOptions, flag_value, ladder_command
from runner.runtime import Runtime
from runner.server import ServerError, VllmServer, find_free_port
from runner.settings import MeasurementSettings, Progress

CONCURRENCY_LEVELS = (1, 2, 4, 8, 16, 32, 64)
CONTEXT_DEPTHS = (2048, 4096, 8192, 16384, 24576, 32768)
CONTEXT_CLASSES = ("prose", "code", "analysis")
CONTEXT_MAX_TOKENS = 128  # enough for the 100-token decode window


ContextOutputs = dict[tuple[int, str], list[int]]
ConcurrencyOutputs = dict[int, list[list[int]]]  # users: each request's token ids, in send order


class LadderFailed(UserError):
    """A ladder's server or requests failed: no packet; the finished ladders stay for a resume."""


def ladder_path(run_dir: Path, arm_id: str, kind: str) -> Path:
    return run_dir / arm_id / f"ladder-{kind}.json"


def context_outputs_path(run_dir: Path, arm_id: str) -> Path:
    return run_dir / arm_id / "ladder-context-outputs.json"


def concurrency_outputs_path(run_dir: Path, arm_id: str) -> Path:
    return run_dir / arm_id / "ladder-concurrency-outputs.json"


def load_concurrency_outputs(path: Path) -> ConcurrencyOutputs:
    """The outputs a concurrency ladder kept beside it; none when it kept none (an older run)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return {int(users): [[int(t) for t in ids] for ids in outputs] for users, outputs in document.items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, AttributeError, TypeError) as error:
        raise LadderFailed(f"unreadable concurrency outputs ({type(error).__name__}: {error})", file=path) from None


def divergence_cause(
    outputs: list[list[int]], same_level_plain: list[list[int]] | None, speculative: bool
) -> Literal["batch shape", "speculative"] | None:
    """Why a level's outputs differ from the sequential oracle's. The oracle arm's own ladder changes
    only the batch shape; a speculative arm's outputs equal to the plain model's at the same level
    differ by batch shape alone, and otherwise by speculation."""
    if not speculative:
        return "batch shape"
    if same_level_plain is None:
        return None
    return "batch shape" if outputs == same_level_plain else "speculative"


def save_context_outputs(path: Path, outputs: ContextOutputs) -> None:
    document = [
        {"depth_tokens": depth, "content_class": content_class, "token_ids": ids}
        for (depth, content_class), ids in sorted(outputs.items())
    ]
    write_file(path, pretty_json(document))


def load_context_outputs(path: Path) -> ContextOutputs:
    """The context ladder's outputs recorded beside it; a missing or unreadable file is an
    error (the speculative arms' comparison needs it), naming the file."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return {
            (int(entry["depth_tokens"]), str(entry["content_class"])): [int(t) for t in entry["token_ids"]]
            for entry in document
        }
    except FileNotFoundError:
        raise LadderFailed(
            "the context ladder finished but its outputs were not kept: delete the ladder file to measure it again",
            file=path,
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise LadderFailed(f"unreadable context outputs ({type(error).__name__}: {error})", file=path) from None


def run_ladders(
    kinds: Sequence[str],
    arm: ArmPlan,
    oracle_rows: list[PromptRow],
    oracle_context: ContextOutputs,
    runtime: Runtime,
    settings: MeasurementSettings,
    run_dir: Path,
    max_model_len: int,
    progress: Progress,
    levels: Sequence[int] = CONCURRENCY_LEVELS,
    load: LoadSweepOptions | None = None,
    oracle_concurrency: ConcurrencyOutputs | None = None,
    alone_tok_s: Sequence[float] = (),
) -> tuple[list[Ladder], ContextOutputs]:
    """Run the missing ladders of one arm on one fresh server; reuse finished ones. Returns the
    ladders and the context ladder's outputs (recorded, or read back when it finished earlier).
    A load sweep (runner/load_sweep.py) also keeps its finished levels for a resume; a concurrency
    ladder keeps its outputs, with which a speculative arm's divergences are told apart
    (`oracle_concurrency`: the oracle arm's); a load sweep's per-user rates are held to the arm's
    single-stream ones (`alone_tok_s`: its fresh servers' decode rates)."""
    done = {
        k: load_file(Ladder, ladder_path(run_dir, arm.id, k)) for k in kinds if ladder_path(run_dir, arm.id, k).exists()
    }
    outputs: ContextOutputs = {}
    if "context" in done:
        outputs = load_context_outputs(context_outputs_path(run_dir, arm.id))
    missing = [k for k in kinds if k not in done]
    for kind in done:
        progress(f"{arm.id} {kind} ladder: finished earlier, reusing")
    if missing:
        command = ladder_command(arm)
        port = find_free_port()
        server_dir = run_dir / arm.id / "ladder-server"
        log_path = run_dir / arm.id / "ladder-server.log"
        if server_dir.exists():
            shutil.rmtree(server_dir)  # an interrupted ladder left its compile cache: start empty again
        try:
            progress(f"{arm.id} ladders: starting a server on port {port} (log {log_path})")
            runtime.prepare(server_dir)
            with VllmServer(
                runtime.argv(command, port, attempt=f"{arm.id}-ladders", server_dir=server_dir),
                port=port,
                run_dir=server_dir,
                env={**command.env, **runtime.server_env()},
                log_path=log_path,
                health_deadline_s=settings.health_deadline_s,
            ) as server:
                for kind in missing:
                    if kind == "concurrency":
                        ladder, kept = asyncio.run(
                            _concurrency(
                                server.base_url, arm, oracle_rows, settings, progress, levels, oracle_concurrency
                            )
                        )
                        document = {str(users): ids for users, ids in kept.items()}
                        write_file(concurrency_outputs_path(run_dir, arm.id), pretty_json(document))
                    elif kind == "load":
                        max_num_seqs = int(flag_value(command.args, "--max-num-seqs") or LADDER_MAX_SEQS)
                        ladder = asyncio.run(
                            run_load_sweep(
                                server.base_url,
                                arm,
                                oracle_rows,
                                settings,
                                load or LoadSweepOptions(),
                                max_num_seqs,
                                levels_path(run_dir, arm.id),
                                progress,
                                alone_tok_s,
                            )
                        )
                    else:
                        ladder, outputs = asyncio.run(
                            _context(server.base_url, arm, oracle_context, settings, max_model_len, progress)
                        )
                        save_context_outputs(context_outputs_path(run_dir, arm.id), outputs)
                    # the command of this ladder's own server, portable as the arm's config.argv is
                    ladder = Ladder.model_validate({**ladder.model_dump(), "argv": scrub_argv(command.argv())})
                    write_file(ladder_path(run_dir, arm.id, kind), pretty_json(ladder.model_dump(mode="json")))
                    done[kind] = ladder
        except (ServerError, ClientError, MetricsError, OSError) as error:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise LadderFailed(
                f"{arm.id} ladder failed, no packet written (finished ladders are kept in {run_dir}): {first}",
                file=log_path,
            ) from error
    return [done[k] for k in kinds], outputs


async def _concurrency(
    base_url: str,
    arm: ArmPlan,
    oracle_rows: list[PromptRow],
    settings: MeasurementSettings,
    progress: Progress,
    levels: Sequence[int] = CONCURRENCY_LEVELS,
    oracle_concurrency: ConcurrencyOutputs | None = None,
) -> tuple[Ladder, ConcurrencyOutputs]:
    expected = {row.prompt_id: row.token_ids.tolist() for row in oracle_rows}  # arrays never equal lists
    prompts = settings.suite.prompts
    points = []
    kept: ConcurrencyOutputs = {}
    async with new_http_client(max_in_flight=max(levels)) as http:
        for users in levels:
            batch = [prompts[i % len(prompts)] for i in range(users)]
            started = perf_counter()
            results = await asyncio.gather(
                *(
                    stream_completion(
                        base_url, arm.command.model_id, p.prompt, settings.max_tokens, settings.seed, http=http
                    )
                    for p in batch
                )
            )
            ended = perf_counter()
            wall = ended - started
            tokens = sum(r.completion_tokens for r in results)
            kept[users] = [list(r.token_ids) for r in results]
            identical = all(r.token_ids == expected.get(p.id) for p, r in zip(batch, results, strict=True))
            cause = None
            if not identical:
                plain = (oracle_concurrency or {}).get(users)
                cause = divergence_cause(kept[users], plain, arm.spec_depth > 0)
            point = ConcurrencyPoint(
                users=users, completion_tokens=tokens, wall_s=wall, identical_to_oracle=identical, divergence=cause
            )
            energy = None
            if settings.energy is not None:
                served = concurrency_tokens(point, oracle_rows)
                energy = await asyncio.to_thread(settings.energy.window, started, ended, arm_cards(arm), served)
            points.append(point.model_copy(update={"energy": energy}))
            differs = f"differs from the oracle ({cause})" if cause else "differs from the oracle"
            progress(
                f"{arm.id} concurrency c{users}: {tokens / wall:.1f} tok/s aggregate, "
                f"{'identical to the oracle' if identical else differs}; {describe(energy)}"
            )
    return Ladder(arm=arm.id, kind="concurrency", concurrency=points), kept


async def _context(
    base_url: str,
    arm: ArmPlan,
    oracle_context: ContextOutputs,
    settings: MeasurementSettings,
    max_model_len: int,
    progress: Progress,
) -> tuple[Ladder, ContextOutputs]:
    depths = [d for d in CONTEXT_DEPTHS if d + CONTEXT_MAX_TOKENS <= max_model_len]
    points: list[ContextPoint] = []
    outputs: ContextOutputs = {}
    async with new_http_client(max_in_flight=1) as http:
        for depth in depths:
            for content_class in _context_classes(settings.suite):
                prompt_ids = await _prompt_of_depth(
                    http, base_url, arm.command.model_id, settings.suite, content_class, depth
                )
                result = await stream_completion(
                    base_url, arm.command.model_id, prompt_ids, CONTEXT_MAX_TOKENS, settings.seed, http=http
                )
                outputs[(depth, content_class)] = result.token_ids
                oracle = oracle_context.get((depth, content_class))
                points.append(
                    ContextPoint(
                        depth_tokens=depth,
                        content_class=content_class,
                        decode_tok_s=decode_rate([round(t * 1e6) for t in result.token_times_s]),
                        ttft_ms=result.ttft_s * 1000,
                        identical_to_oracle=None
                        if arm.spec_depth == 0 or oracle is None
                        else result.token_ids == oracle,
                    )
                )
                progress(f"{arm.id} context {depth} ({content_class}): TTFT {result.ttft_s * 1000:.0f} ms")
    return Ladder(arm=arm.id, kind="context", context=points), outputs


def _context_classes(suite: Suite) -> list[str]:
    present = [c.id for c in suite.classes]
    chosen = [c for c in CONTEXT_CLASSES if c in present]
    return chosen or present[:3]


async def _prompt_of_depth(
    http: httpx.AsyncClient, base_url: str, model: str, suite: Suite, content_class: str, depth: int
) -> list[int]:
    """Exactly `depth` prompt tokens of one class's text, repeated, cut with the server's tokenizer."""
    text = "\n\n".join(p.prompt for p in suite.prompts if p.class_ == content_class)
    ids: list[int] = []
    while len(ids) < depth:
        try:
            response = await http.post(f"{base_url}/tokenize", json={"model": model, "prompt": text})
        except httpx.HTTPError as error:
            raise ClientError(f"POST /tokenize failed: {type(error).__name__}: {error}") from error
        if response.status_code != 200:
            raise ClientError(f"HTTP {response.status_code} from /tokenize: {response.text[:200]}")
        try:
            ids = response.json()["tokens"]
        except (ValueError, KeyError, TypeError):
            raise ClientError(f"unexpected /tokenize response: {response.text[:200]}") from None
        text = text + "\n\n" + text
    return ids[:depth]
