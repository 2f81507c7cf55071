"""Realistic packets for tests: every stored figure is computed with catalog.metrics from the rows,
so `catalog.evidence` re-derives the same numbers and `load_catalog` accepts the packet.

Use `measured_draft()` for the unsealed dict (to edit before sealing) and `measured_packet()` for a
sealed Packet; `imported_draft()` / `screened_draft()` build packets without rows.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from catalog.loading import load_file
from catalog.metrics import compare_rows, decode_rate, server_decode_rate, server_ttft_ms
from catalog.packet import Packet, PromptRow
from catalog.packet_io import seal
from catalog.suite import CanarySet, Suite

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data"

N_TOKENS = 120  # over the 101 a decode rate needs
ORACLE_ARM = "tp1-mtp0"
SPEC_ARM = "tp1-mtp2"


@cache
def strict_suite() -> Suite:
    return load_file(Suite, DATA / "suites" / "strict-v1.json")


@cache
def canary_set() -> CanarySet:
    return load_file(CanarySet, DATA / "suites" / "canaries-v1.json")


def token_ids(prompt_index: int, n: int = N_TOKENS) -> list[int]:
    return [(prompt_index * 7919 + i * 31) % 151_000 for i in range(n)]


def make_row(
    prompt_index: int,
    *,
    ms_per_token: float,
    ttft_ms: float = 40.0,
    chunk: int = 1,
    ids: Sequence[int] | None = None,
    cached_tokens: int = 0,
) -> PromptRow:
    """One strict-suite prompt. With `chunk` > 1 tokens arrive `chunk` at a time (speculative
    decoding): tokens of one chunk share an arrival time, as they do on the wire."""
    prompt = strict_suite().prompts[prompt_index]
    tokens = list(ids) if ids is not None else token_ids(prompt_index)
    times = [round(ttft_ms + ((i + chunk - 1) // chunk) * chunk * ms_per_token, 6) for i in range(len(tokens))]
    return PromptRow(
        prompt_id=prompt.id,
        class_id=prompt.class_,
        token_ids=tokens,
        prompt_tokens=200 + 10 * prompt_index,
        completion_tokens=len(tokens),
        cached_tokens=cached_tokens,
        ttft_ms=times[0],
        token_times_ms=times,
        finish_reason="length",
        decode_tok_s=decode_rate(times),
    )


def make_rows(
    *, ms_per_token: float, chunk: int = 1, diverge: Mapping[int, int] | None = None, ttft_ms: float = 40.0
) -> list[PromptRow]:
    """Twelve rows; `diverge` maps a prompt index to the token index where this server's output
    differs from the shared reference tokens."""
    rows = []
    for index in range(len(strict_suite().prompts)):
        ids = token_ids(index)
        if diverge and index in diverge:
            ids[diverge[index]] += 1
        # a per-prompt spread so the class-balanced median is not trivial
        rows.append(
            make_row(index, ms_per_token=ms_per_token + 0.25 * index, chunk=chunk, ids=ids, ttft_ms=ttft_ms + index)
        )
    return rows


def make_server(label: str, rows: list[PromptRow], *, canaries_pass: bool = True) -> dict[str, Any]:
    return {
        "label": label,
        "status": "ok",
        "decode_tok_s": server_decode_rate(rows),
        "ttft_ms": server_ttft_ms(rows),
        "rows": [row.model_dump(mode="json") for row in rows],
        "canaries": [{"id": c.id, "passed": canaries_pass, "detail": ""} for c in canary_set().canaries],
        "cache_zero": all(row.cached_tokens == 0 for row in rows),
        "startup_s": 61.5,
    }


def _arm(
    arm_id: str,
    label: str,
    *,
    servers: list[dict[str, Any]],
    gates: list[dict[str, Any]],
    provenance: str,
    tp: int = 1,
    spec_depth: int = 0,
) -> dict[str, Any]:
    failed = any(not g["passed"] for g in gates)
    state = "screened" if provenance == "screened" else "withheld" if failed else provenance
    return {
        "id": arm_id,
        "label": label,
        "config": {
            "tensor_parallel_size": tp,
            "spec_method": "mtp" if spec_depth else None,
            "spec_depth": spec_depth,
            "argv": ["vllm", "serve", "Qwen/Qwen3.5-9B", "--no-enable-prefix-caching", "--max-num-seqs", "1"],
            "env": {},
        },
        "servers": servers,
        "gates": gates,
        "state": state,
        "withheld_reason": "G3 failed: the speculative output differs from the oracle" if state == "withheld" else None,
    }


def _packet_state(provenance: str, arms: list[dict[str, Any]]) -> str:
    if provenance == "screened":
        return "screened"
    if all(a["state"] == "withheld" for a in arms):
        return "withheld"
    return provenance


def identity(*, slug: str = "qwen3.5-9b", variant: str = "default", hardware: str = "arc_pro_b70") -> dict[str, Any]:
    return {
        "model": {
            "slug": slug,
            "variant": variant,
            "repo": "Qwen/Qwen3.5-9B",
            "revision": "0123456789abcdef0123456789abcdef01234567",
            "quantization": "bf16",
            "quantization_label": "BF16",
            "weight_bytes": 19_300_000_000,
        },
        "runtime": {"platform": "xpu", "version": "0.17.1", "label": "vLLM 0.17.1 XPU"},
        "host": {"hardware": hardware, "card_count": 1, "boot_id": "4f0c2b1e-boot"},
    }


def workload() -> dict[str, Any]:
    return {
        "suite_id": "strict-v1",
        "suite_sha256": strict_suite().sha256,
        "canary_set_id": "canaries-v1",
        "canary_set_sha256": canary_set().sha256,
        "max_tokens": 512,
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": 1234,
    }


def measured_draft(
    *,
    spec: bool = True,
    g3_diverges: bool = False,
    title: str = "Qwen3.5-9B BF16 on one Arc Pro B70",
    ms_per_token: float = 20.0,
    **identity_kw: str,
) -> dict[str, Any]:
    """A measured campaign: an oracle arm (two fresh servers, G1) and, with `spec`, an MTP arm
    (two servers, G2 between them and G3 of each against the oracle). With `g3_diverges`, the
    speculative server A drifts on one prompt: G2 and G3-A fail and that arm is withheld."""
    oracle_a = make_rows(ms_per_token=ms_per_token)
    oracle_b = make_rows(ms_per_token=ms_per_token + 0.05)
    oracle_gate = compare_rows("G1", "B", oracle_a, oracle_b)
    arms = [
        _arm(
            ORACLE_ARM,
            "1 card, no speculative decoding",
            servers=[make_server("A", oracle_a), make_server("B", oracle_b)],
            gates=[oracle_gate.model_dump(mode="json")],
            provenance="measured",
        )
    ]
    if spec:
        spec_a = make_rows(ms_per_token=ms_per_token * 0.6, chunk=3, diverge={4: 57} if g3_diverges else None)
        spec_b = make_rows(ms_per_token=ms_per_token * 0.6 + 0.05, chunk=3)
        gates = [
            compare_rows("G2", "B", spec_a, spec_b),
            compare_rows("G3", ORACLE_ARM, spec_a, oracle_a, server="A"),
            compare_rows("G3", ORACLE_ARM, spec_b, oracle_a, server="B"),
        ]
        arms.append(
            _arm(
                SPEC_ARM,
                "1 card, MTP depth 2",
                servers=[make_server("A", spec_a), make_server("B", spec_b)],
                gates=[g.model_dump(mode="json") for g in gates],
                provenance="measured",
                spec_depth=2,
            )
        )
    return {
        "schema_version": 1,
        "title": title,
        "created": "2026-11-30T10:15:00Z",
        "provenance": {"kind": "measured", "tool": "runner 0.1.0"},
        "identity": identity(**identity_kw),
        "workload": workload(),
        "arms": arms,
        "state": _packet_state("measured", arms),
    }


def measured_packet(**kw: Any) -> Packet:
    return seal(measured_draft(**kw))


def published_arm(
    arm_id: str,
    values: Sequence[float],
    *,
    provenance: str = "imported",
    tp: int = 1,
    spec_depth: int = 0,
    gates: Sequence[tuple[str, int | None, int, bool]] = (),
) -> dict[str, Any]:
    """An arm carrying only published values (no rows); gates as (gate, exact, total, passed)."""
    servers = [{"label": chr(ord("A") + i), "decode_tok_s": v} for i, v in enumerate(values)]
    gate_dicts = [
        {"gate": g, "against": "oracle", "server": "A" if g == "G3" else None, "exact": e, "total": t, "passed": p}
        for g, e, t, p in gates
    ]
    return _arm(
        arm_id, f"arm {arm_id}", servers=servers, gates=gate_dicts, provenance=provenance, tp=tp, spec_depth=spec_depth
    )


def published_draft(
    arms: list[dict[str, Any]], *, provenance: str = "imported", title: str = "imported campaign"
) -> dict[str, Any]:
    """An imported or screened packet (source named) around `published_arm` arms."""
    arms = copy.deepcopy(arms)
    if provenance == "screened":
        for arm in arms:
            arm["state"] = "screened"
            arm["withheld_reason"] = None
    return {
        "schema_version": 1,
        "title": title,
        "provenance": {"kind": provenance, "source": {"name": "reference catalog", "url": "https://example.org/r"}},
        "identity": identity(),
        "workload": {"suite_id": "strict-v1", "max_tokens": 512},
        "arms": arms,
        "state": _packet_state(provenance, arms),
    }
