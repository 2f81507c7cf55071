"""A reproduction on another stack (ALLOW_DIFFERENT_STACK=1) is labelled "different stack", with what
differs, on both packets' pages; one on the same stack is not."""

from __future__ import annotations

from pathlib import Path

from bs4 import BeautifulSoup

from builder.cli import run
from catalog.packets.seal import write_packet
from tests.catalog.factories import measured_draft, sealed, signed_data


def _reproduction(original_id: str, ms_per_token: float, **runtime: str) -> dict[str, object]:
    """Measured again on another host (its own timings), with `runtime` fields changed."""
    overrides = {"host": {"boot_id": "other"}, "runtime": runtime}
    draft = measured_draft(title="reproduction", ms_per_token=ms_per_token, identity_overrides=overrides)
    draft["reproduces"] = original_id
    return draft


def test_a_reproduction_on_another_stack_is_labelled_on_both_pages(tmp_path: Path) -> None:
    data, packets, out = signed_data(tmp_path / "data"), tmp_path / "packets", tmp_path / "site"
    packets.mkdir()
    original = sealed(measured_draft())
    write_packet(original, packets)
    other = sealed(_reproduction(original.packet.id, 20.4, version="0.18.0", label="vLLM 0.18.0 XPU"))
    same = sealed(_reproduction(original.packet.id, 20.8))
    for reproduction in (other, same):
        write_packet(reproduction, packets)
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out)]) == 0

    def related(packet_id: str) -> str:
        page = BeautifulSoup((out / "packets" / packet_id / "index.html").read_text(encoding="utf-8"), "lxml")
        return " ".join(p.get_text(" ") for p in page.select(".packet-head p"))

    before = related(original.packet.id)
    assert f"reproduced by {other.packet.id} (different stack: vLLM 0.18.0, not 0.17.1;" in before
    assert f"reproduced by {same.packet.id}" in before and f"{same.packet.id} (different stack" not in before
    assert "(different stack: vLLM 0.18.0, not 0.17.1;" in related(other.packet.id)
    assert "different stack" not in related(same.packet.id)
