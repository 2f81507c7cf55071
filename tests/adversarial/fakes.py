"""A measuring campaign against the fake vLLM (testkit/fake_vllm), run through the
runner's command line in this process; the `campaign` fixture sets one up in a temporary folder."""

from __future__ import annotations

import functools
import json
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import runner.attempt
from catalog.errors import exit_on_user_error
from catalog.packets.layout import SIGNATURE_SUFFIX
from runner import cli as runner_cli
from runner.server import VllmServer
from tests.catalog.factories import signed_data

CONFIG = {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4}


@dataclass
class Campaign:
    root: Path
    python: Path

    @property
    def pids(self) -> Path:
        return self.root / "pids"

    def argv(self, *extra: str) -> list[str]:
        return [
            "--data", "data", "--packets", "packets", "--runs", "runs",
            "measure", "--model", "demo", "--vllm-python", str(self.python), "--model-dir", "model",
            "--health-timeout", "20", *extra,
        ]  # fmt: skip

    def run(self, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
        """`python -m runner measure ...` in this process: exit code and stderr, as a user sees them."""
        try:
            exit_on_user_error(lambda: runner_cli.run(self.argv(*extra)))()
        except SystemExit as done:
            code = int(done.code or 0)
        return code, capsys.readouterr().err

    def servers_started(self) -> int:
        started = self.pids / "started"
        return len(started.read_text().split()) if started.exists() else 0

    def live(self) -> list[int]:
        """Processes any fake server or its engine child left running (zombies do not count)."""
        alive = []
        for entry in self.pids.iterdir():
            if entry.name.isdigit():
                try:
                    state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                if state != "Z":
                    alive.append(int(entry.name))
        return alive

    def packets(self) -> list[str]:
        return sorted(p.name for p in (self.root / "packets").iterdir())

    def packet_files(self) -> list[Path]:
        """The packets written, without their signature envelopes; each must have its envelope."""
        names = self.packets()
        found = [name for name in names if not name.endswith(SIGNATURE_SUFFIX)]
        signatures = [name.removesuffix(".json") + SIGNATURE_SUFFIX for name in found]
        assert names == sorted([*found, *signatures]), f"a packet without its signature, or the reverse: {names}"
        return [self.root / "packets" / name for name in found]

    def run_dir(self) -> Path:
        (found,) = list((self.root / "runs").iterdir())
        return found

    def assert_failed_cleanly(self, code: int, err: str) -> None:
        assert code == 1, err
        assert "Traceback" not in err, err
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, err
        assert "no packet written" in errors[0] or "cannot write" in errors[0], errors[0]
        assert self.live() == [], "a server process survived"
        assert self.packets() == [], "a packet (or a temporary file) was left in packets/"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No FAKE_VLLM_* settings leak between tests."""
    for name in list(os.environ):
        if name.startswith("FAKE_VLLM_"):
            monkeypatch.delenv(name)
    yield


@pytest.fixture
def campaign(tmp_path: Path, vllm_shim: Path, monkeypatch: pytest.MonkeyPatch, clean_env: None) -> Iterator[Campaign]:
    signed_data(tmp_path / "data")  # the runner signs with this test session's throwaway key
    (tmp_path / "packets").mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(CONFIG))
    (tmp_path / "pids").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAKE_VLLM_PIDS", str(tmp_path / "pids"))
    monkeypatch.setenv("FAKE_VLLM_TOKEN_DELAY", "0.0002")
    # teardown escalates to SIGKILL after 1 s instead of 20: same code path, shorter wait
    monkeypatch.setattr(runner.attempt, "VllmServer", functools.partial(VllmServer, stop_grace_s=1.0))
    found = Campaign(tmp_path, vllm_shim)
    yield found
    for pid in found.live():  # never leave a stray fake behind, even when a test fails
        os.kill(pid, signal.SIGKILL)
