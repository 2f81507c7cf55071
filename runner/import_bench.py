"""Turn a `vllm bench serve --save-result` JSON into a `screened` packet.

Screened means speed only: no token arrays, no identity gate, never a headline. The per-stream
decode rate is 1000 / median TPOT (vLLM's TPOT excludes the first token, as our decode rate
does); with --max-concurrency above 1 the run also becomes one point of a concurrency ladder.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from catalog.consistency import consistency_problems
from catalog.errors import CatalogError, CatalogErrors
from catalog.loading import load_file
from catalog.packet import Packet, PacketParts
from catalog.packet_io import made_from, seal, write_packet
from catalog.repository import Catalog
from catalog.signing import host_key


class BenchServeResult(BaseModel):
    """The fields we use; the tool writes many more, which are ignored, not trusted."""

    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)

    date: str | None = None
    backend: str | None = None
    model_id: str
    num_prompts: int | None = None
    max_concurrency: int | None = None
    duration: float = Field(gt=0)
    completed: int = Field(ge=1)
    total_output_tokens: int = Field(ge=1)
    output_throughput: float = Field(gt=0)
    median_ttft_ms: float = Field(ge=0)
    median_tpot_ms: float = Field(gt=0)
    output_lens: list[int] = []
    spec_decode_num_drafts: int | None = None
    spec_decode_draft_tokens: int | None = None
    spec_decode_accepted_tokens: int | None = None


def screened_parts(
    result: BenchServeResult,
    *,
    slug: str,
    variant: str,
    quantization: str,
    hardware: str,
    platform: str,
    cards: int,
    source: str,
    synthetic: bool = False,
) -> PacketParts:
    users = result.max_concurrency or 1
    spec = None
    if result.spec_decode_num_drafts is not None:
        spec = {
            "drafts": result.spec_decode_num_drafts,
            "draft_tokens": result.spec_decode_draft_tokens or 0,
            "accepted_tokens": result.spec_decode_accepted_tokens or 0,
        }
    arm_id = f"tp{cards}-c{users}"
    ladders = []
    if users > 1:
        point = {"users": users, "completion_tokens": result.total_output_tokens, "wall_s": result.duration}
        ladders.append({"arm": arm_id, "kind": "concurrency", "concurrency": [point]})
    return PacketParts.model_validate(
        {
            "title": f"{slug} · {variant} · screened with vllm bench serve "
            f"({result.completed} requests, {users} at once)",
            "provenance": {"kind": "screened", "tool": "vllm bench serve --save-result", "source": {"name": source}},
            "identity": {
                "model": {
                    "slug": slug,
                    "variant": variant,
                    "repo": result.model_id,
                    "quantization": quantization,
                    "quantization_label": quantization.upper(),
                    "synthetic": synthetic,
                },
                "runtime": {
                    "platform": platform,
                    "version": "unknown",
                    "label": f"vLLM ({result.backend or 'unknown'} backend)",
                },
                "host": {"hardware": hardware, "card_count": cards},
            },
            "workload": {"suite_id": "vllm-bench-serve", "max_tokens": max(result.output_lens or [1])},
            "arms": [
                {
                    "id": arm_id,
                    "label": f"{cards} card(s), {users} request(s) at once, speculation unknown",
                    "config": {"tensor_parallel_size": cards},
                    "servers": [
                        {
                            "label": "A",
                            "decode_tok_s": 1000.0 / result.median_tpot_ms,
                            "ttft_ms": result.median_ttft_ms,
                            "spec_metrics": spec,
                        }
                    ],
                }
            ],
            "ladders": ladders,
        }
    )


def import_bench(options: argparse.Namespace, catalog: Catalog) -> Packet:
    result = load_file(BenchServeResult, options.result)
    recipe = catalog.recipes.get(options.model)
    if recipe is None:
        raise CatalogError(f"no recipe {options.model!r} in data/models", file=options.result, field="--model")
    if options.variant not in recipe.variants:
        raise CatalogError(f"recipe has no variant {options.variant!r}", file=options.result, field="--variant")
    if options.hardware not in catalog.hardware:
        raise CatalogError(f"unknown hardware {options.hardware!r}", file=options.result, field="--hardware")
    platform = catalog.hardware[options.hardware].platform
    try:
        parts = screened_parts(
            result,
            slug=options.model,
            variant=options.variant,
            quantization=recipe.variants[options.variant].precision.lower(),
            hardware=options.hardware,
            platform=platform,
            cards=options.cards,
            source=options.source,
            synthetic=recipe.model.synthetic,
        )
        sealed = seal(parts, host_key(role="importer"))
    except ValidationError as error:
        raise made_from(options.result, error) from None
    # refuse here, naming the input, what verify would refuse once written
    problems = consistency_problems(sealed.packet, recipe, catalog.hardware[options.hardware], datetime.now(UTC))
    if problems:
        raise CatalogErrors(
            [
                CatalogError(f"the packet made from it is inconsistent: {message}", file=options.result, field=field)
                for field, message in problems
            ]
        )
    write_packet(sealed, Path(options.packets))
    return sealed.packet
