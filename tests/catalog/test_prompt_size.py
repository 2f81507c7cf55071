"""catalog.checks.cross_check.prompt_size_problems: a row counts no more prompt tokens than its
suite prompt has bytes of UTF-8, plus the few a tokenizer adds. A larger count raises the row's
prefill floor (so a later first token passes physics) and divides its energy over more tokens."""

from __future__ import annotations

from collections.abc import Callable

from catalog.checks.cross_check import PROMPT_TOKENS_ADDED, prompt_size_problems
from testkit.samples import strict_suite
from tests.catalog.factories import measured_packet
from tests.catalog.test_consistency import Draft, edited

SUITE = strict_suite()
SIZES = {p.id: len(p.prompt.encode("utf-8")) for p in SUITE.prompts}


def test_the_factory_packet_counts_fewer_tokens_than_bytes() -> None:
    packet = measured_packet()
    assert prompt_size_problems(packet, SUITE) == []
    assert all(r.prompt_tokens <= SIZES[r.prompt_id] for a in packet.arms for s in a.servers for r in s.rows)


def _counted(tokens_over_bytes: int) -> Callable[[Draft], None]:
    def edit(draft: Draft) -> None:
        row = draft["arms"][1]["servers"][0]["rows"][2]
        row["prompt_tokens"] = SIZES[row["prompt_id"]] + tokens_over_bytes
        for server in draft["arms"][1]["servers"]:  # one prompt is one size on every server
            for other in server["rows"]:
                if other["prompt_id"] == row["prompt_id"]:
                    other["prompt_tokens"] = row["prompt_tokens"]

    return edit


def test_a_prompt_counted_larger_than_its_text() -> None:
    packet = edited(_counted(PROMPT_TOKENS_ADDED + 1))
    row = packet.arms[1].servers[0].rows[2]
    assert prompt_size_problems(packet, SUITE) == [
        (
            "arms[1].servers[0].rows[2].prompt_tokens",
            f"{row.prompt_tokens:,} prompt tokens for prompt {row.prompt_id!r}, whose text is"
            f" {SIZES[row.prompt_id]:,} bytes of UTF-8: a tokenizer makes at most one token per byte, and adds at"
            f" most {PROMPT_TOKENS_ADDED} of its own",
        ),
        (
            "arms[1].servers[1].rows[2].prompt_tokens",
            f"{row.prompt_tokens:,} prompt tokens for prompt {row.prompt_id!r}, whose text is"
            f" {SIZES[row.prompt_id]:,} bytes of UTF-8: a tokenizer makes at most one token per byte, and adds at"
            f" most {PROMPT_TOKENS_ADDED} of its own",
        ),
    ]
    assert prompt_size_problems(edited(_counted(PROMPT_TOKENS_ADDED)), SUITE) == []
