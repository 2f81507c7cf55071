"""Hypothesis profiles. `make test` runs the default one: every property test's full example
count. `make test-fast` passes --hypothesis-profile=fast: a few examples each, for the inner loop.
A test that sets its own count wraps it in `examples(n)`, so the fast profile still lowers it."""

from __future__ import annotations

from hypothesis import settings

FAST_PROFILE = "fast"
FAST_EXAMPLES = 5

settings.register_profile(FAST_PROFILE, max_examples=FAST_EXAMPLES)


def examples(full: int) -> int:
    """`full` examples, or the fast profile's few when it is loaded."""
    return min(full, FAST_EXAMPLES) if settings.get_current_profile_name() == FAST_PROFILE else full
