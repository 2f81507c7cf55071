"""A packet page's per-prompt row: a completion with no token has no first-token time and no
decode rate, and the row says so with a dash, never the word "None"."""

from __future__ import annotations

from builder.views.arms import NO_VALUE, _row
from catalog.model.arrays import to_uint32
from catalog.model.packet import PromptRow


def test_a_row_without_tokens_shows_dashes_for_ttft_and_rate():
    row = PromptRow(
        prompt_id="p-1",
        class_id="short",
        token_ids=to_uint32([]),
        token_times_us=to_uint32([]),
        prompt_tokens=12,
        completion_tokens=0,
        finish_reason="stop",
    )
    cells = _row(row)
    assert cells.ttft_ms == NO_VALUE == cells.decode_tok_s
    assert "None" not in "".join(cells)


def test_a_row_with_tokens_shows_its_first_token_time():
    row = PromptRow(
        prompt_id="p-2",
        class_id="short",
        token_ids=to_uint32([7, 8]),
        token_times_us=to_uint32([12_500, 13_000]),
        prompt_tokens=12,
        completion_tokens=2,
    )
    assert "12.5" in _row(row).ttft_ms
