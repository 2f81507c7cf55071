"""A listed key cannot publish a lie, continued (tests/adversarial/test_listed_key.py's harness):
forgeries a sceptic sealed with a lab key listed the documented way, each accepted until the rule
named beside it, and each now refused by `python -m catalog.verify` and `python -m builder build`,
published and with `--allow-unsigned`, by an error naming the packet and the field.

- batching beyond the card's arithmetic: a concurrency point or an open-loop load level whose users
  received more tokens than the card's peak compute makes in that time (catalog/checks/physics.py);
- a deep context read as fast as a short one: a context point held only to the short-prompt
  ceiling, not the one with its context in the KV cache (catalog/checks/physics.py);
- prompts counted larger than their text: more prompt tokens than the suite prompt has bytes, which
  flatters the prefill floor and energy per total token (catalog/checks/cross_check.py);
- a screened transcription read in the future (catalog/checks/dates.py, as for an imported one).
"""

from __future__ import annotations

import base64
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from catalog.model.load_sweep import LoadLevel, LoadRequest, LoadSweep, poisson_offsets_ms
from catalog.model.metrics import server_decode_rate, server_ttft_ms
from catalog.model.packet import PromptRow
from testkit.samples import strict_suite
from tests.adversarial.test_forgery import MODES, refused
from tests.adversarial.test_listed_key import base, campaign, lab, lab_seal  # noqa: F401 (lab: a fixture)

Document = dict[str, Any]
SCREENED_9B = "qwen3.5-9b-fp8-dynamic-92dc20d8"  # the committed screened packet
PLAIN_TOK_S = 38.15  # the single-stream ceiling physics gives the campaign's oracle (9B BF16, one B70)
FIRST_TOKEN_MS = 26.1 / 2  # its least first token of a one-token prompt, margin included


def concurrency_beyond_compute(document: Document) -> None:
    """1,024 users × 512 tokens in 9.4 s: 55,800 tok/s from 9B BF16 on one B70, whose 183.5 TFLOPS
    make at most about 11,500 tok/s. Each user's share is within the single-stream floor."""
    users, tokens = 1024, 512
    wall_ms = (FIRST_TOKEN_MS + (tokens - 1) / PLAIN_TOK_S * 1000 / 1.5) * 1.05
    document["ladders"] = [
        {
            "arm": "tp1-mtp0",
            "kind": "concurrency",
            "concurrency": [
                {
                    "users": users,
                    "completion_tokens": users * tokens,
                    "wall_s": round(wall_ms / 1000, 3),
                    "identical_to_oracle": True,
                }
            ],
        }
    ]


def open_loop_beyond_compute(document: Document) -> None:
    """1,000 requests at 10,000 a second on the runner's own Poisson schedule, each 512 tokens at
    50 tok/s: about 49,000 tok/s in aggregate on one B70."""
    count, tokens, ttft, tpot = 1000, 512, 40.0, 20.0
    prompts = strict_suite().prompts
    requests = [
        LoadRequest(
            prompt_id=prompts[k % len(prompts)].id,
            planned_ms=at,
            sent_ms=at,
            ttft_ms=ttft,
            e2e_ms=ttft + (tokens - 1) * tpot,
            output_tokens=tokens,
            tpot_ms=tpot,
            reads=tokens,
            identical_to_oracle=True,
        )
        for k, at in enumerate(poisson_offsets_ms(10000.0, count, 7))
    ]
    end_ms = max(r.sent_ms + (r.e2e_ms or 0.0) for r in requests)
    level = LoadLevel(
        mode="open", rate_rps=10000.0, duration_s=round(end_ms / 1000 + 0.01, 3), client_cpu_s=1.0, requests=requests
    )
    sweep = LoadSweep(seed=7, requests_per_level=count, levels=[level])
    document["ladders"] = [{"arm": "tp1-mtp0", "kind": "load", "load": sweep.model_dump(mode="json")}]


def context_deep_at_short_speed(document: Document) -> None:
    """55 tok/s at 262,144 tokens of context: within the short-prompt ceiling's margin (38.15 × 1.5),
    beyond the ceiling with that context in the KV cache (24.8 × 1.5)."""
    point = {"depth_tokens": 262_144, "content_class": "prose", "decode_tok_s": 55.0, "ttft_ms": 100_000.0}
    document["ladders"] = [{"arm": "tp1-mtp0", "kind": "context", "context": [{**point, "identical_to_oracle": True}]}]


def prompt_tokens_beyond_bytes(document: Document) -> None:
    """Every row counts 5,000 prompt tokens for suite prompts of 1,016-1,301 bytes of UTF-8, its
    first token moved 400 ms later to clear the larger prefill's floor; every figure derived again."""
    for arm in document["arms"]:
        for server in arm["servers"]:
            for row in server["rows"]:
                row["prompt_tokens"] = 5000
                times = array("I", base64.b64decode(row["token_times_us"]))
                row["token_times_us"] = base64.b64encode(array("I", [t + 400_000 for t in times]).tobytes()).decode()
            rows = [PromptRow.model_validate(r) for r in server["rows"]]
            server["decode_tok_s"], server["ttft_ms"] = server_decode_rate(rows), server_ttft_ms(rows)


FORGERIES: list[tuple[Callable[[Document], None], str]] = [
    (concurrency_beyond_compute, "ladders[0].concurrency[0].wall_s"),
    (open_loop_beyond_compute, "ladders[0].load.levels[0].duration_s"),
    (context_deep_at_short_speed, "ladders[0].context[0].decode_tok_s"),
    (prompt_tokens_beyond_bytes, "arms[0].servers[0].rows[0].prompt_tokens"),
]


@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize(("edit", "field"), FORGERIES, ids=[edit.__name__ for edit, _ in FORGERIES])
def test_a_campaign_beyond_physics_is_refused(
    lab: Path,  # noqa: F811
    edit: Callable[[Document], None],
    field: str,
    options: tuple[str, ...],
) -> None:
    document = campaign()
    edit(document)
    refused(lab, lab_seal(lab, document), options, because=field)


@pytest.mark.parametrize("options", MODES)
def test_a_screened_source_read_in_the_future_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    document = base(lab, SCREENED_9B)
    document["provenance"]["source"].update(published="2031-06-01", retrieved="2031-06-02")
    refused(lab, lab_seal(lab, document), options, because="provenance.source.retrieved")
