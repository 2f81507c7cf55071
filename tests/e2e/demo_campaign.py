"""The shared demo campaign of the real-vLLM tests: its command, and a run that starts early.

conftest.py starts it when collection ends; test_campaign.py reads its packet, runs and output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.processes import Child

REPO = Path(__file__).resolve().parents[2]
# Startup is ~60-100 s on an idle host but took 285 s while other sessions ran vLLM here too.
HEALTH_DEADLINE_S = 600.0
# The campaign: the protocol's least completion (101 tokens: a 100-token decode window), which
# every gate and row check applies to as to any other length.
CAMPAIGN_MAX_TOKENS = 101
# Every ladder, small, on one more fresh server per arm: c1 and c2; the one context depth (2K)
# the demo's 4096 tokens allow; a load sweep of c1, c2, c4 and two open-loop rates, LOAD_REQUESTS
# requests each (about 20 s per arm on an idle host).
LOAD_USERS = (1, 2, 4)
LOAD_RATES = (1.0, 2.0)
LOAD_REQUESTS = 5
LOAD_SLO = "ttft_ms=2000,tpot_ms=100"
CAMPAIGN_LADDERS = (
    "--ladders",
    "concurrency,context,load",
    "--concurrency",
    "1,2",
    "--load-users",
    ",".join(map(str, LOAD_USERS)),
    "--rates",
    ",".join(f"{rate:g}" for rate in LOAD_RATES),
    "--load-requests",
    str(LOAD_REQUESTS),
    "--slo",
    LOAD_SLO,
)
CAMPAIGN_DEADLINE_S = 2100.0
DEMO_MODEL_DEADLINE_S = 300.0


def vllm_python_path() -> Path:
    return Path(os.environ.get("VLLM_VENV", REPO / ".venv-vllm")) / "bin" / "python"


def measure_argv(vllm_python: Path, model_dir: Path, packets: Path, runs: Path, *extra: str) -> list[str]:
    """`python -m runner measure` of the demo model: the oracle and n-gram depth 3, two servers
    each, then both ladders of each arm."""
    return [
        sys.executable,
        "-m",
        "runner",
        "--packets",
        str(packets),
        "--runs",
        str(runs),
        "measure",
        "--model",
        "demo",
        "--depths",
        "0,3",
        "--max-tokens",
        str(CAMPAIGN_MAX_TOKENS),
        "--vllm-python",
        str(vllm_python),
        "--model-dir",
        str(model_dir),
        "--health-timeout",
        str(int(HEALTH_DEADLINE_S)),
        *CAMPAIGN_LADDERS,
        *extra,
    ]


@dataclass(frozen=True)
class Campaign:
    packets: Path
    runs: Path
    output: str
    seconds: float


class CampaignRun:
    """The demo model's generation, then the shared campaign, each a tagged child of its own.

    The runner starts once the model exists and the campaign is wanted; `advance()` (called
    before every test, and by anyone waiting) notices that without a thread, so the runner's
    parent is pytest's main thread.
    """

    def __init__(self, vllm_python: Path, root: Path, *, wanted: bool) -> None:
        self.wanted = wanted
        self.vllm_python = vllm_python
        self.base = root.parent  # the session's base temp folder (tmp_path_factory)
        self.model_dir = root / "demo-model" / "demo"
        self.packets, self.runs = root / "packets", root / "runs"
        self.log_path = root / "runner.log"
        self.runner: Child | None = None
        self.started_at = 0.0
        self._generator_log = root / "demo-model.log"
        with self._generator_log.open("wb") as log:
            self.generator = Child(
                [str(vllm_python), "-m", "runner.demo_model", "--out", str(self.model_dir)],
                "demo-model",
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def advance(self) -> None:
        if not self.wanted or self.runner is not None or self.generator.process.poll() != 0:
            return
        if not self.signing_home_ready():
            return  # before the first test's setup: started by the next call
        argv = measure_argv(self.vllm_python, self.model_dir, self.packets, self.runs)
        with self.log_path.open("wb") as log:
            self.started_at = time.time()
            self.runner = Child(argv, "campaign", cwd=REPO, stdout=log, stderr=subprocess.STDOUT)

    def signing_home_ready(self) -> bool:
        """The runner signs its packet with the host key under $XDG_CONFIG_HOME, which
        tests/conftest.py points at a folder of this session when the first test sets up (this
        run's root is in the same base folder). Never start the runner before then: it would make
        and sign with the user's own key, which the tests do not know."""
        home = os.environ.get("XDG_CONFIG_HOME", "")
        return bool(home) and "CATALOG_SIGNING_KEY" not in os.environ and Path(home).is_relative_to(self.base)

    def wait_for_model(self) -> Path:
        if self.generator.wait(DEMO_MODEL_DEADLINE_S) != 0:
            pytest.fail(f"demo model generation failed:\n{self._generator_log.read_text(errors='replace')}")
        self.advance()
        return self.model_dir

    def result(self) -> Campaign:
        self.wanted = True
        self.wait_for_model()
        assert self.runner is not None, "the runner was not started: no session XDG_CONFIG_HOME to sign in"
        remaining = CAMPAIGN_DEADLINE_S - (time.time() - self.started_at)
        try:
            code = self.runner.wait(max(remaining, 1.0))  # stops the runner and its servers on timeout
        except subprocess.TimeoutExpired:
            tail = self.log_path.read_text(errors="replace")[-4000:]
            pytest.fail(f"the campaign did not finish within {CAMPAIGN_DEADLINE_S:.0f} s (stopped):\n{tail}")
        output = self.log_path.read_text(errors="replace")
        assert code == 0, output[-4000:]
        # It may have ended long before anyone waited: its last line ("sealed ...") dates the end.
        return Campaign(self.packets, self.runs, output, self.log_path.stat().st_mtime - self.started_at)
