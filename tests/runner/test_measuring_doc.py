"""docs/measuring.md lists what a lab sees when the stack refuses (issue 29): each message the
runner's new checks raise, quoted as it starts, with what to do about it."""

from __future__ import annotations

from pathlib import Path

import pytest

MEASURING = (Path(__file__).resolve().parents[2] / "docs" / "measuring.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "message",
    [
        "has no /dev/dri/by-path/pci-<address>-card: the container could not be given only this card",  # preflight
        "is not healthy: memory_health: Critical",  # preflight, xpu-smi 2.x
        "is not a variable vLLM V knows: the server would ignore it",  # preflight.check_env_known
        "VLLM_BATCH_INVARIANT=1 (arm A) is not supported for the model's gated delta-net",  # preflight.check_env_known
        "would run with --disable-log-stats",  # plan.refuse_unmeasurable
        "cannot read which variables this vLLM knows",  # measure, progress
        "the server ignored VLLM_X",  # attempt.resolved_facts
        "the server keeps no engine statistics",  # metrics_scrape
        "`--privileged` (every device) or the NVIDIA runtime",  # docker.containers_holding_devices
    ],
)
def test_every_new_refusal_is_in_the_troubleshooting_tables(message: str) -> None:
    assert message in MEASURING
