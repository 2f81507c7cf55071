"""The builder benchmark's generated catalog is one `make verify` accepts: its packets record the
configuration the runner plans for their recipe (the demo's command, its VLLM_CPU_KVCACHE_SPACE,
n-gram at depth 3), so every command shown beside them passes catalog/checks/commands.py. A packet
recording another method or environment was refused by every build of the benchmark."""

from __future__ import annotations

from pathlib import Path

from bench.catalog_gen import INPUTS, _write_data, bench_key, cache_key, make_parts
from bench.common import REPO
from catalog.checks.repeats import count_repeats
from catalog.model.packet import State
from catalog.packets.seal import seal, write_packet
from catalog.store.repository import load_catalog


def test_a_generated_catalog_passes_every_check_of_make_verify(tmp_path: Path) -> None:
    data, packets = tmp_path / "data", tmp_path / "packets"
    _write_data(data, 1, bench_key())
    packets.mkdir()
    for index in (0, 6):  # a packet whose arms both stand and one whose speculative arm is withheld
        write_packet(seal(make_parts(0, index), bench_key()), packets)
    catalog = load_catalog(data, packets)  # raises, naming the file and field, on any refused packet
    assert len(catalog.packets) == 2
    for packet in catalog.packets.values():
        oracle, speculative = packet.arms
        assert oracle.config.env == speculative.config.env == {"VLLM_CPU_KVCACHE_SPACE": "1"}
        assert (speculative.config.spec_method, speculative.config.spec_depth) == ("ngram", 3)
        assert '"method":"ngram"' in " ".join(speculative.config.argv)


def test_the_cache_key_covers_the_runner_plan_the_arms_come_from() -> None:
    key = cache_key(2, 3)
    assert key.startswith("2x3-") and key == cache_key(2, 3)
    covered = {path.relative_to(REPO).as_posix() for path in INPUTS}
    assert {"runner/plan.py", "runner/campaign.py", "testkit/samples.py", "bench/catalog_gen.py"} <= covered


def test_a_generated_family_is_twenty_honest_repeats() -> None:
    """Each of a family's 20 campaigns has its own speed, so none is refused as a copy of another's
    token timings (catalog/checks/repeats.py): with a speed cycle shorter than 20, 3 of every 20 were,
    and the benchmark measured family pages with fewer repeats than its catalog claims to hold."""
    packets = [seal(make_parts(3, index), None).packet for index in range(20)]
    for arm in (0, 1):
        candidates = [(p, p.arms[arm]) for p in packets if p.arms[arm].state != State.WITHHELD]
        repeats, refused = count_repeats(candidates)
        assert [r.reason for r in refused] == []
        assert len(repeats) == len(candidates) >= 17
