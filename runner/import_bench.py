"""Turn a `vllm bench serve --save-result` JSON into a `screened` packet.

Screened means speed only: no token arrays, no identity gate, never a headline. The file is read
as vLLM writes it (vllm/benchmarks/serve.py): the traffic (`request_rate`, "inf" by default;
`burstiness`; `max_concurrency`, null by default), the counts (`completed`, `failed`), the token
totals and throughputs, and mean/median/std/percentiles of TTFT, TPOT, ITL (and E2EL when
selected); per-request lists such as `output_lens` only with --save-detailed.

What the run measured decides what it becomes:
- one request at a time (`--max-concurrency 1`): a single-stream run; its decode rate is
  1000 / median TPOT (vLLM's TPOT excludes the first token, as our decode rate does);
- anything else, the default run included (request rate inf: every prompt released at once): a
  throughput run, one point of a concurrency ladder (aggregate output tok/s at that many users),
  never a single-stream rate. An open-loop run at a finite rate without --max-concurrency has no
  number of users and is refused, as is a run with failed requests.

Several `--save-detailed` files (one per --max-concurrency or --request-rate), or one with
`--load`, become one load curve instead: a load ladder of runner.import_load_sweep's levels, one row per
request, failed requests kept as failed rows (they count against goodput).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from catalog.checks.consistency import consistency_problems
from catalog.errors import CatalogError, CatalogErrors, UserError
from catalog.model.load_sweep import Slo
from catalog.model.packet import Packet, PacketParts
from catalog.numbers import fmt
from catalog.packets.seal import made_from, seal, write_packet
from catalog.packets.signing import host_key
from catalog.store.documents import load_file
from catalog.store.repository import Catalog
from runner.import_load_sweep import bench_sweep

LATENCIES = ("ttft", "tpot", "itl", "e2el")
_PERCENTILE_KEY = re.compile(r"^p(\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")


class BenchServeResult(BaseModel):
    """The fields we use; the tool writes many more, which are ignored, not trusted."""

    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)

    date: str | None = None
    backend: str | None = None
    label: str | None = None
    model_id: str
    tokenizer_id: str | None = None
    num_prompts: int | None = Field(default=None, ge=1)
    request_rate: float | Literal["inf"] = "inf"
    burstiness: float | None = Field(default=None, gt=0)
    max_concurrency: int | None = Field(default=None, ge=1)
    duration: float = Field(gt=0)
    completed: int = Field(ge=1)
    failed: int = Field(default=0, ge=0)
    total_input_tokens: int | None = Field(default=None, ge=0)
    total_output_tokens: int = Field(ge=1)
    request_throughput: float | None = Field(default=None, ge=0)
    output_throughput: float = Field(gt=0)
    total_token_throughput: float | None = Field(default=None, ge=0)
    mean_ttft_ms: float | None = Field(default=None, ge=0)
    median_ttft_ms: float | None = Field(default=None, ge=0)
    std_ttft_ms: float | None = Field(default=None, ge=0)
    mean_tpot_ms: float | None = Field(default=None, ge=0)
    median_tpot_ms: float | None = Field(default=None, ge=0)
    std_tpot_ms: float | None = Field(default=None, ge=0)
    mean_itl_ms: float | None = Field(default=None, ge=0)
    median_itl_ms: float | None = Field(default=None, ge=0)
    std_itl_ms: float | None = Field(default=None, ge=0)
    mean_e2el_ms: float | None = Field(default=None, ge=0)
    median_e2el_ms: float | None = Field(default=None, ge=0)
    std_e2el_ms: float | None = Field(default=None, ge=0)
    # every `p<N>_<metric>_ms` key (--metric-percentiles, default 99), by metric then percentile
    percentiles: dict[str, dict[str, float]] = {}
    # per-request lists, written with --save-detailed (runner/import_load_sweep.py reads them)
    output_lens: list[int] = []
    ttfts: list[float] = []
    latencies: list[float] = []
    itls: list[list[float]] = []
    start_times: list[float] = []
    errors: list[str | None] = []
    spec_decode_num_drafts: int | None = None
    spec_decode_draft_tokens: int | None = None
    spec_decode_accepted_tokens: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _collect_percentiles(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        found: dict[str, dict[str, float]] = {}
        for key, value in data.items():
            match = _PERCENTILE_KEY.match(key)
            if match and isinstance(value, int | float) and not isinstance(value, bool):
                found.setdefault(match.group(2), {})[match.group(1)] = float(value)
        return {**data, "percentiles": found}

    @property
    def rate(self) -> float:
        return math.inf if self.request_rate == "inf" else float(self.request_rate)

    @property
    def single_stream(self) -> bool:
        return self.max_concurrency == 1

    @property
    def users(self) -> int | None:
        """Requests in flight together: --max-concurrency, or every prompt at request rate inf."""
        if self.max_concurrency is not None:
            return self.max_concurrency
        if math.isinf(self.rate):
            return self.num_prompts or self.completed + self.failed
        return None

    def traffic(self) -> str:
        rate = "inf" if math.isinf(self.rate) else f"{fmt(self.rate)} req/s"
        burst = f", burstiness {fmt(self.burstiness)}" if self.burstiness is not None else ""
        cap = (
            f", max concurrency {self.max_concurrency}" if self.max_concurrency is not None else ", no max concurrency"
        )
        return f"request rate {rate}{burst}{cap}; {self.completed} completed, {self.failed} failed"

    def latency_summary(self) -> str:
        parts = []
        for metric in LATENCIES:
            median = getattr(self, f"median_{metric}_ms")
            if median is None:
                continue
            tail = ", ".join(f"p{p} {fmt(v)}" for p, v in sorted(self.percentiles.get(metric, {}).items()))
            parts.append(f"{metric.upper()} median {fmt(median)} ms" + (f" ({tail})" if tail else ""))
        return "; ".join(parts)


class NotImportable(CatalogError):
    """The run measured nothing this catalog can hold as what it is."""


@dataclass(frozen=True)
class ImportTarget:
    """What an imported benchmark measured, in the catalog's terms: the recipe variant and card.
    `repo` is the checkpoint the recipe variant serves; the benchmark's model_id is often the
    served name (--served-model-name), which the arm's note keeps."""

    slug: str
    variant: str
    quantization: str
    hardware: str
    platform: str
    cards: int
    source: str
    synthetic: bool = False
    repo: str | None = None


def _identity(result: BenchServeResult, target: ImportTarget) -> dict[str, Any]:
    return {
        "model": {
            "slug": target.slug,
            "variant": target.variant,
            "repo": target.repo or result.model_id,
            "quantization": target.quantization,
            "quantization_label": target.quantization.upper(),
            "synthetic": target.synthetic,
        },
        "runtime": {
            "platform": target.platform,
            "version": "unknown",
            "label": f"vLLM ({result.backend or 'unknown'} backend)",
        },
        "host": {"hardware": target.hardware, "card_count": target.cards},
    }


def screened_parts(result: BenchServeResult, target: ImportTarget) -> PacketParts:
    """One screened packet from one run: a throughput point, or a single-stream decode rate."""
    slug, variant, cards, repo = target.slug, target.variant, target.cards, target.repo
    if result.failed:
        raise NotImportable(
            f"{result.failed} of {result.completed + result.failed} requests failed: a partial run is not imported",
            field="failed",
        )
    users = result.users
    if users is None:
        raise NotImportable(
            f"an open-loop run at {fmt(result.rate)} req/s without --max-concurrency has no number of users: "
            "import a run with --max-concurrency",
            field="max_concurrency",
        )
    spec = None
    if result.spec_decode_num_drafts is not None:
        spec = {
            "drafts": result.spec_decode_num_drafts,
            "draft_tokens": result.spec_decode_draft_tokens or 0,
            "accepted_tokens": result.spec_decode_accepted_tokens or 0,
        }
    note = f"{result.traffic()}. {result.latency_summary()}".strip().rstrip(".") + "."
    if repo is not None and repo != result.model_id:
        note += f" The benchmark named the model {result.model_id!r}."
    arm_id = f"tp{cards}-c{users}"
    ladders: list[dict[str, Any]] = []
    if result.single_stream:
        if result.median_tpot_ms is None or result.median_tpot_ms <= 0:
            raise NotImportable("a single-stream run without median_tpot_ms has no decode rate", field="median_tpot_ms")
        kind = "one request at a time"
        server: dict[str, Any] = {
            "label": "A",
            "decode_tok_s": 1000.0 / result.median_tpot_ms,
            "ttft_ms": result.median_ttft_ms,
            "spec_metrics": spec,
        }
        label = f"{cards} card(s), one request at a time, speculation unknown"
    else:
        # A throughput run: its figure is the aggregate at `users`, never a per-stream rate.
        kind = f"{users} at once" if result.max_concurrency else f"all {users} released at once"
        server = {"label": "A", "spec_metrics": spec}
        point = {"users": users, "completion_tokens": result.total_output_tokens, "wall_s": result.duration}
        ladders.append({"arm": arm_id, "kind": "concurrency", "concurrency": [point]})
        label = f"{cards} card(s), throughput run at {users} request(s) at once, speculation unknown"
    max_tokens = (
        max(result.output_lens) if result.output_lens else max(1, round(result.total_output_tokens / result.completed))
    )
    return PacketParts.model_validate(
        {
            "title": f"{slug} · {variant} · screened with vllm bench serve ({result.completed} requests, {kind})",
            "provenance": {
                "kind": "screened",
                "tool": "vllm bench serve --save-result",
                "source": {"name": target.source},
            },
            "identity": _identity(result, target),
            "workload": {"suite_id": "vllm-bench-serve", "max_tokens": max_tokens},
            "arms": [
                {
                    "id": arm_id,
                    "label": label,
                    "config": {"tensor_parallel_size": cards},
                    "servers": [server],
                    "note": note,
                }
            ],
            "ladders": ladders,
        }
    )


def load_curve_parts(
    files: Sequence[tuple[Path, BenchServeResult]], target: ImportTarget, slo: Slo | None = None
) -> PacketParts:
    """One screened packet whose one arm carries a load ladder, a level per file."""
    slug, variant, cards, repo = target.slug, target.variant, target.cards, target.repo
    first_path, first = files[0]
    for path, result in files[1:]:
        if result.model_id != first.model_id:
            raise NotImportable(
                f"benchmarks model {result.model_id!r}, {first_path} {first.model_id!r}: one curve is one model",
                file=path,
                field="model_id",
            )
    sweep = bench_sweep([(path, result.model_dump()) for path, result in files], slo)
    labels = ", ".join(level.label for level in sweep.levels)
    spread = "one level" if len(sweep.levels) == 1 else f"{len(sweep.levels)} levels"
    ordered = sorted((result for _, result in files), key=lambda r: (r.max_concurrency is None, r.users or 0, r.rate))
    note = f"{spread} of {sweep.requests_per_level} requests each: " + "; ".join(r.traffic() for r in ordered)
    if repo is not None and repo != first.model_id:
        note += f". The benchmark named the model {first.model_id!r}"
    arm_id = f"tp{cards}-load"
    return PacketParts.model_validate(
        {
            "title": f"{slug} · {variant} · load curve screened with vllm bench serve ({spread}: {labels})",
            "provenance": {
                "kind": "screened",
                "tool": "vllm bench serve --save-result --save-detailed",
                "source": {"name": target.source},
            },
            "identity": _identity(first, target),
            "workload": {
                "suite_id": "vllm-bench-serve",
                "max_tokens": max(1, *(request.output_tokens for level in sweep.levels for request in level.requests)),
            },
            "arms": [
                {
                    "id": arm_id,
                    "label": f"{cards} card(s), load curve ({labels}), speculation unknown",
                    "config": {"tensor_parallel_size": cards},
                    "servers": [{"label": "A"}],
                    "note": note + ".",
                }
            ],
            "ladders": [{"arm": arm_id, "kind": "load", "load": sweep.model_dump(mode="json")}],
        }
    )


def import_bench(options: argparse.Namespace, catalog: Catalog) -> Packet:
    """Several files, or one with --load: a load curve; one file: a throughput or single-stream run."""
    paths: list[Path] = list(options.results)
    curve = options.load or len(paths) > 1
    if options.slo is not None and not curve:
        raise UserError("is a load curve setting: give several --save-detailed files or --load", field="--slo")
    results = [(path, load_file(BenchServeResult, path)) for path in paths]
    first = paths[0]
    recipe = catalog.recipes.get(options.model)
    if recipe is None:
        raise UserError(f"no recipe {options.model!r} in data/models", file=first, field="--model")
    if options.variant not in recipe.variants:
        raise UserError(f"recipe has no variant {options.variant!r}", file=first, field="--variant")
    if options.hardware not in catalog.hardware:
        raise UserError(f"unknown hardware {options.hardware!r}", file=first, field="--hardware")
    target = ImportTarget(
        slug=options.model,
        variant=options.variant,
        quantization=recipe.variants[options.variant].precision.lower(),
        hardware=options.hardware,
        platform=catalog.hardware[options.hardware].platform,
        cards=options.cards,
        source=options.source,
        synthetic=recipe.model.synthetic,
        repo=recipe.variant_model_id(options.variant),
    )
    # a problem no single file causes (a packet field, an inconsistency) is named by the first file
    try:
        if curve:
            slo = Slo.model_validate(options.slo) if options.slo else None
            parts = load_curve_parts(results, target, slo)
        else:
            parts = screened_parts(results[0][1], target)
        sealed = seal(parts, host_key(role="importer"))
    except ValidationError as error:
        raise made_from(first, error) from None
    except NotImportable as error:
        raise NotImportable(error.message, file=error.file or first, field=error.field) from None
    problems = consistency_problems(sealed.packet, recipe, catalog.hardware[options.hardware], datetime.now(UTC))
    if problems:
        raise CatalogErrors(
            [
                CatalogError(f"the packet made from it is inconsistent: {message}", file=first, field=field)
                for field, message in problems
            ]
        )
    write_packet(sealed, Path(options.packets))
    return sealed.packet
