"""Scorecard cells: states, untested lists and estimates from catalog.projection."""

from __future__ import annotations

from types import SimpleNamespace

from builder.views.results import arm_results
from builder.views.scorecard import matrices
from catalog.recipes.hardware import HardwareFile
from catalog.store.documents import load_file
from tests.builder.factory import REPO, imported_packet, measured_packet


def _results():
    hardware = load_file(HardwareFile, REPO / "data" / "hardware.yaml").by_id()
    packets = [measured_packet(), imported_packet()]
    return arm_results(packets, hardware, packets)


def test_untested_cells_take_an_estimate_labelled_estimated():
    calls = []

    def estimator(quantization: str, tp: int, depth: int):
        calls.append((quantization, tp, depth))
        basis = [
            SimpleNamespace(
                packet_id="p-1",
                arm_id="tp1-base",
                quantization="w4a16",
                tensor_parallel_size=1,
                spec_depth=0,
                draft_head=None,
                utilisation=0.8,
            )
        ]
        return SimpleNamespace(decode_tok_s=42.125, ceiling_tok_s=52.66, utilisation=0.8, rule="rule", basis=basis)

    found = matrices(_results(), None, {"arc_pro_b70": estimator})
    cells = [c for m in found for r in m.rows for c in r.cells]
    estimated = [c for c in cells if c.state == "estimated"]
    assert estimated, "untested cells were estimated"
    for cell in estimated:
        (entry,) = cell.entries
        # the precision an estimate has (two significant figures), linked to its inputs, not to an arm
        assert entry.state_label == "Estimated" and entry.value.text == "42"  # type: ignore[union-attr]
        assert entry.detail.startswith("not measured")
        assert entry.estimate is not None and entry.href == "#" + entry.estimate.id
        assert entry.estimate.ceiling.text == "52.66" and entry.estimate.utilisation.text == "80.0"
        assert [b.href for b in entry.estimate.basis] == ["packets/p-1/index.html#arm-tp1-base"]
    # only untested cells are estimated, and they stay listed as untested
    assert all(e.state != "estimated" for c in cells if c.state != "estimated" for e in c.entries)
    listed = [u for m in found for u in m.untested]
    assert len(listed) == len(estimated) and all(u.endswith("(estimate shown)") for u in listed)
    assert ("w4a16", 2, 3) in calls


def test_without_an_estimate_cells_are_untested():
    found = matrices(_results(), None, {"arc_pro_b70": lambda q, tp, d: None})
    states = {c.state for m in found for r in m.rows for c in r.cells}
    assert "estimated" not in states and "untested" in states
    assert states >= {"measured", "withheld", "imported"}
