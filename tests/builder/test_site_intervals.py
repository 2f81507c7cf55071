"""Repeats on the site: a configuration measured several times shows the centre of its repeats with
a 95 % interval, overlapping cells are "not distinguishable", a configuration measured once says so,
the family page charts each configuration's history and flags a change beyond the interval naming
what changed, and a forged repeat is refused with a warning (the arithmetic itself is worked by
hand in tests/catalog/test_repeats.py and test_history.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from builder.cli import run
from catalog.checks.repeats import t_interval
from catalog.model.arrays import to_uint32
from catalog.model.metrics import compare_rows
from catalog.model.packet import ArmParts, GateResult, Packet, PacketParts, PromptRow
from catalog.numbers import fmt
from catalog.packets.seal import write_packet
from tests.builder.factory import measured_parts, rows, write_catalog
from tests.catalog.factories import make_server, seal_parts

FAMILY = "models/fixture-7b/index.html"
IMAGE_A, IMAGE_B = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def _shift(server_rows: list[PromptRow], shift_us: int) -> list[PromptRow]:
    return [
        r.model_copy(update={"token_times_us": to_uint32([t + shift_us for t in r.token_times_us])})
        for r in server_rows
    ]


def campaign(
    index: int, *, image: str, day: int, slower: float = 0.0, two_cards: bool = False, copy_shift: int | None = None
) -> PacketParts:
    """The fixture campaign measured again on fresh servers: each repeat's servers a little apart
    (timings of their own), the single-card oracle `slower` ms per token slower; the speculative
    arm about as fast as the oracle (their intervals overlap); the two-card arm only when asked
    (measured once). With `copy_shift`, repeat `index`'s servers again, every time shifted: forged."""
    parts = measured_parts()
    step = 0.3 * index + (0.0 if copy_shift is not None else 0.01 * day)
    if copy_shift is not None:
        step = 0.3 * index
    base = [rows(20.0 + step + slower), rows(20.05 + step + slower)]
    fast = [rows(19.9 + step), rows(19.95 + step)]
    if copy_shift is not None:
        base, fast = [_shift(r, copy_shift) for r in base], [_shift(r, copy_shift) for r in fast]
    arms = {a.id: a for a in parts.arms}

    def refill(arm_id: str, pair: list[list[PromptRow]], gates: list[GateResult]) -> ArmParts:
        servers = [make_server("A", pair[0]), make_server("B", pair[1])]
        return arms[arm_id].model_copy(update={"servers": servers, "gates": gates})

    new_arms = [
        refill("tp1-base", base, [compare_rows("G1", "server B", base[0], base[1])]),
        refill(
            "tp1-ngram3",
            fast,
            [
                compare_rows("G2", "server B", fast[0], fast[1]),
                compare_rows("G3", "tp1-base", fast[0], base[0], server="A"),
                compare_rows("G3", "tp1-base", fast[1], base[0], server="B"),
            ],
        ),
        arms["tp1-ngram5"],
    ]
    if two_cards:
        new_arms.append(arms["tp2-base"])
    identity = parts.identity.model_copy(
        update={"runtime": parts.identity.runtime.model_copy(update={"image_digest": image})}
    )
    created = datetime(2026, 5, 1, tzinfo=UTC) + timedelta(days=day)
    ladders = [ladder for ladder in parts.ladders if ladder.arm in {a.id for a in new_arms}]
    return parts.model_copy(
        update={
            "arms": new_arms,
            "identity": identity,
            "created": created,
            "title": f"Fixture repeat {day}",
            "ladders": ladders,
        }
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("intervals")
    data, packets_dir = write_catalog(root, empty_family=False)
    for existing in packets_dir.glob("fixture-7b-w4a16-*"):
        existing.unlink()  # the fixture's own measured packet: these repeats replace it
    made: dict[str, list[Packet]] = {"A": [], "B": []}
    for i in range(3):
        for group, sealed in (
            ("A", seal_parts(campaign(i, image=IMAGE_A, day=i, two_cards=i == 0))),
            ("B", seal_parts(campaign(i, image=IMAGE_B, day=10 + i, slower=2.0))),
        ):
            write_packet(sealed, packets_dir)
            made[group].append(sealed.packet)
    # a fourth repeat of image A, and a copy of it dated later: which is the copy cannot be told from
    # dates, so neither counts (catalog/checks/repeats.py), and image A keeps its three repeats
    copied = seal_parts(campaign(3, image=IMAGE_A, day=0))
    forged = seal_parts(campaign(3, image=IMAGE_A, day=20, copy_shift=5))
    for sealed in (copied, forged):
        write_packet(sealed, packets_dir)
    made["copied"], made["forged"] = [copied.packet], [forged.packet]
    out = root / "site"
    assert run(["build", "--data", str(data), "--packets", str(packets_dir), "--out", str(out)]) == 0
    soup = BeautifulSoup((out / FAMILY).read_text(encoding="utf-8"), "lxml")
    return soup, made, data, packets_dir


def _cell(soup: BeautifulSoup, depth: str, cards: str):
    """The card's one scorecard: a row per quantization and card count, a column per depth."""
    matrix = soup.select_one("section.matrix#matrix-quant-depth-arc_pro_b70")
    assert matrix is not None
    return matrix.select_one(f'td[data-row="W4A16 · {cards}"][data-col="{depth}"]')


def _values(packets: list[Packet], arm_id: str) -> list[float]:
    return [p.arm(arm_id).decode_tok_s or 0.0 for p in packets]


def test_a_cell_publishes_the_centre_of_its_repeats_with_their_interval(site) -> None:
    soup, made, _, _ = site
    entry = _cell(soup, "no spec", "TP1").select_one(".entry.state-measured")
    run_a = t_interval(_values(made["A"], "tp1-base"))  # the fastest repeat's run, as the headline rule picks
    assert run_a is not None
    assert entry.select_one(".cell-value data")["value"] == fmt(run_a.centre)
    assert [d["value"] for d in entry.select(".range data")] == [fmt(run_a.low), fmt(run_a.high)]
    assert entry.select_one(".range")["title"] == "95% confidence interval over 3 independent repeats"
    words = entry.select_one(".entry-repeats").get_text(" ", strip=True)
    assert words.startswith(f"3 repeats on 1 host: {fmt(run_a.centre)}, 95% CI {fmt(run_a.low)}–{fmt(run_a.high)}")


def test_overlapping_cells_are_not_distinguishable_and_one_measured_once_says_so(site) -> None:
    soup, _, _, _ = site
    oracle = _cell(soup, "no spec", "TP1").select_one(".entry.state-measured .entry-repeats").get_text(" ", strip=True)
    spec = _cell(soup, "NGRAM3", "TP1").select_one(".entry.state-measured .entry-repeats").get_text(" ", strip=True)
    assert "not distinguishable from W4A16 · TP1 · NGRAM3" in oracle
    assert "not distinguishable from W4A16 · TP1 · no spec" in spec
    once = _cell(soup, "no spec", "TP2").select_one(".entry.state-measured .entry-repeats").get_text(" ", strip=True)
    assert once == "measured once: no interval"


def test_the_history_flags_the_slower_image_and_names_it(site) -> None:
    soup, made, _, _ = site
    history = soup.select_one("#history #history-arc-pro-b70-w4a16-1-0")
    assert history is not None
    runs = history.select("table.history-runs tbody tr")
    assert [tr.select("td")[2].get_text(strip=True) for tr in runs] == ["3", "3"]
    assert runs[0].select_one("td").get_text(strip=True).startswith("image sha256:aaaaaaaaaaaa…")
    assert {a.get_text(strip=True) for a in runs[1].select("td a")} == {p.id for p in made["B"]}
    (flag,) = history.select("ul.history-changes li.flagged")
    before, after = _values(made["A"], "tp1-base"), _values(made["B"], "tp1-base")
    percent = (sum(after) - sum(before)) / sum(before) * 100
    text = flag.get_text(" ", strip=True)
    assert f"slower by {fmt(abs(percent), 1)} %" in text and text.endswith("since image sha256:bbbbbbbbbbbb…")
    assert len(history.select("figure.chart table tbody tr")) == 6  # a point per packet over time
    speculative = soup.select_one("#history #history-arc-pro-b70-w4a16-1-3-ngram")
    assert speculative.select("ul.history-changes li.flagged") == []  # the same speed on the new image
    assert "within the interval, not a change" in speculative.select_one("ul.history-changes li").get_text()


def test_a_forged_repeat_is_refused_and_the_strict_build_fails(site, tmp_path: Path) -> None:
    soup, made, data, packets_dir = site
    (forged,), (copied,) = made["forged"], made["copied"]
    refused = [li.get_text(" ", strip=True) for li in soup.select("#history .gap li")]
    both = f"{forged.id} : its servers' token timings and those of {copied.id} are copies of one another"
    assert any(line.startswith(both) for line in refused)
    assert any(
        line.startswith(f"{copied.id} : its servers' token timings and those of {forged.id}") for line in refused
    )
    counted = {a.get_text(strip=True) for a in soup.select("table.history-runs a")}
    assert forged.id not in counted and copied.id not in counted
    out = tmp_path / "strict"
    assert run(["build", "--data", str(data), "--packets", str(packets_dir), "--out", str(out), "--strict"]) != 0


def test_the_methodology_page_names_the_method(site) -> None:
    _, _, _, packets_dir = site
    page = BeautifulSoup((packets_dir.parent / "site" / "methodology" / "index.html").read_text(), "lxml")
    repeats, history = page.select_one("#repeats"), page.select_one("#history")
    assert repeats is not None and history is not None
    text = " ".join(repeats.get_text(" ", strip=True).split())
    assert "t-interval over repeats" in text and "not distinguishable" in text
    assert "Welch" in history.get_text(" ", strip=True)
