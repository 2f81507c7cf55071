"""The quick benchmark runs end to end and writes a well-formed results file.

Benchmarks are not timed tests: this checks the structure, not the numbers. The real-vLLM part
is skipped here (`--skip-vllm-server`: starting a vLLM CPU server alone takes one to three
minutes on two cores); `make bench QUICK=1` runs it too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.results import Results
from tests.e2e.processes import Child

# quiet: timings of two clients are compared, so this runs after the real-vLLM tests, not beside
# their servers. (Under load vLLM's client fails more requests, test_peer_stream_split.py says why;
# the token account below holds either way.)
pytestmark = [pytest.mark.e2e, pytest.mark.quiet]

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = Path(os.environ.get("VLLM_VENV", REPO / ".venv-vllm")) / "bin" / "python"
CHROMIUM = Path("/usr/bin/chromium")


def _require(path: Path, why: str) -> None:
    if path.exists():
        return
    message = f"{path} is missing ({why})"
    if os.environ.get("CI"):
        pytest.fail(message + "; CI must not skip the benchmark check")
    pytest.skip(message)


def test_quick_benchmark_writes_results_and_report(tmp_path: Path) -> None:
    _require(VLLM_PYTHON, "the peer client is vLLM's: make vllm-env")
    _require(CHROMIUM, "scripts/ensure-chromium.sh")
    results_path, docs_path = tmp_path / "results.json", tmp_path / "performance.md"
    argv = [
        sys.executable,
        "-m",
        "bench",
        "--quick",
        "--skip-vllm-server",
        "--results",
        str(results_path),
        "--docs",
        str(docs_path),
    ]
    # A session of its own: on a timeout the benchmark's workers (the fast server, vLLM's bench
    # client) are stopped with it instead of being left to PID 1.
    bench = Child(argv, "bench-quick", cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = bench.process.communicate(timeout=600)
    finally:
        bench.stop()
    assert bench.process.returncode == 0, stdout[-4000:] + stderr[-4000:]

    results = Results.read(results_path)
    assert results.schema_version == 1 and results.quick
    assert Results.model_validate(results.model_dump(mode="json")) == results
    assert len(results.host.load_average_start) == 3
    assert any("--skip-vllm-server" in s for s in results.skipped)

    by_id = {b.id: b for b in results.benchmarks}
    for level in (1, 16, 64):
        client = by_id[f"client.c{level}"]
        absorbed = client.figure("tokens/s absorbed")
        assert absorbed.ours and absorbed.peer and absorbed.ratio == pytest.approx(absorbed.ours / absorbed.peer)
        cpu = client.figure("client CPU per token")
        assert cpu.better == "lower" and cpu.advantage == pytest.approx(cpu.peer / cpu.ours)  # type: ignore[operator]
        # every token the server wrote was counted, or went with a request the peer reported failed
        assert client.details["tokens_match_server_log"] is True
        failed = sum(run["failed"] for run in client.details["peer_runs"])
        assert client.details["peer_failed_requests"] == failed
        assert (absorbed.note is not None) == (failed > 0)
        agreement = by_id[f"agreement.c{level}"].figure("decode rate client / server")
        assert agreement.ours == pytest.approx(1.0, abs=0.2)
    for loop in ("closed", "open"):
        load = by_id[f"load.{loop}"]
        lag = load.figure("schedule lag p99")
        assert lag.ours is not None and lag.ours >= 0 and lag.target and lag.met is not None
        cpu = load.figure("client CPU per request")
        assert cpu.ours and cpu.peer and cpu.advantage == pytest.approx(cpu.peer / cpu.ours)
        assert load.details["failed"] == {"ours": 0, "peer": 0}
    assert by_id["load.closed"].figure("slot refill lag p99, server-seen").peer is not None
    packet = by_id["packet.demo"]
    size = packet.figure("file size")
    assert size.ours and size.target and size.met is not None
    verify = packet.figure("full verification (verify), CPU of one core")
    assert verify.ours and verify.target and verify.met is not None
    assert packet.figure("full verification per recorded token, CPU").ours == pytest.approx(
        1e6 * verify.ours / packet.details["tokens"]
    )
    build = by_id["builder.10x20"]
    assert build.figure("full build").ours > 0 and build.figure("full build").peer > 0  # type: ignore[operator]
    assert build.details["html_pages"] > 200 and build.details["packets"] == 200
    assert "builder.scaling" in by_id
    assert by_id["browser.model-page"].figure("all charts drawn, cold cache").ours > 0  # type: ignore[operator]
    height = by_id["browser.family-height"].figure("height at 1280 px")
    assert height.ours and height.target == "< 5000 px" and height.met is not None

    report = docs_path.read_text()
    assert "# Performance" in report and "client.c64" in report and "## Targets" in report
    assert "load.open" in report
    assert "tokens/s absorbed" in stdout  # the table was printed
