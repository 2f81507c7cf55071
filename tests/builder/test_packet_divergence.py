"""The packet page's divergence profile and what each server resolved (issue 29, items 6 and 8):
a reader sees where a withheld arm's outputs part, what the comparison isolates, and the
determinism mode the servers ran with, from fields the packet records."""

from __future__ import annotations

from builder.views.arms import arm_view, ladder_views
from catalog.model.metrics import compare_rows
from catalog.model.packet import ConcurrencyPoint, Ladder, ServerFacts
from catalog.packets.seal import seal
from testkit.samples import measured_parts

RESOLVED = ServerFacts(
    source="server_info",
    async_scheduling=True,
    enforce_eager=False,
    compilation_mode="VLLM_COMPILE",
    cudagraph_mode="FULL_AND_PIECEWISE",
    batch_invariant=False,
    stream_interval=1,
    env={"VLLM_USE_V2_MODEL_RUNNER": "1"},
)


def _withheld() -> tuple[object, object]:
    parts = measured_parts(g3_diverges=True)  # speculative server A parts from the oracle on prompt 4 at token 57
    oracle, spec = parts.arms
    rows_a, rows_o = spec.servers[0].rows, oracle.servers[0].rows
    gates = [g.model_copy(update={"cause": "repeat" if g.gate == "G2" else "speculative"}) for g in spec.gates]
    gates[1] = compare_rows("G3", oracle.id, rows_a, rows_o, server="A", cause="speculative")
    servers = [s.model_copy(update={"resolved": RESOLVED}) for s in spec.servers]
    spec = spec.model_copy(update={"gates": gates, "servers": servers, "withheld_reason": "G3 failed"})
    ladder = Ladder(
        arm=spec.id,
        kind="concurrency",
        concurrency=[
            ConcurrencyPoint(users=1, completion_tokens=512, wall_s=5.0, identical_to_oracle=True),
            ConcurrencyPoint(
                users=8, completion_tokens=4096, wall_s=9.0, identical_to_oracle=False, divergence="batch shape"
            ),
        ],
    )
    packet = seal(parts.model_copy(update={"arms": [oracle, spec], "ladders": [ladder]}), None).packet
    return packet, packet.arms[1]


def test_a_withheld_arm_shows_where_and_why_its_outputs_part() -> None:
    packet, arm = _withheld()
    view = arm_view(arm, packet)  # type: ignore[arg-type]
    g3 = next(g for g in view.gates if g.gate == "G3" and g.server == "A")
    recorded = next(g for g in arm.gates if g.gate == "G3" and g.server == "A")  # type: ignore[attr-defined]
    pair = recorded.divergences[4]
    assert f"@ 57 ({pair.token} ≠ {pair.other})" in g3.divergence_summary
    assert g3.profile is not None
    assert g3.profile.startswith("1 of 12 prompts part, at token 57. Cause isolated: speculative: ")
    assert "same batch shape" in g3.profile
    assert g3.profile.endswith("Batch-invariant kernels were off on every server (as vLLM read VLLM_BATCH_INVARIANT).")
    assert all(g.profile is None for g in view.gates if g.passed)


def test_each_server_shows_what_vllm_resolved() -> None:
    packet, arm = _withheld()
    facts = {f.label: f.value for f in arm_view(arm, packet).servers[0].facts}  # type: ignore[arg-type]
    assert facts["async scheduling"] == "on" and facts["graph capture"] == "FULL_AND_PIECEWISE"
    assert facts["compilation mode"] == "VLLM_COMPILE" and facts["eager (no compile, no graphs)"] == "no"
    assert facts["batch-invariant kernels"] == "off" and facts["stream interval"] == "1 token(s)"
    assert facts["switch as vLLM read it"] == "VLLM_USE_V2_MODEL_RUNNER=1"


def test_a_concurrency_ladder_says_why_a_level_differs() -> None:
    packet, _ = _withheld()
    (ladder,) = ladder_views(packet)  # type: ignore[arg-type]
    assert ladder.columns[-1] == "why it differs"
    assert [row[-1] for row in ladder.rows] == [None, "batch shape"]
