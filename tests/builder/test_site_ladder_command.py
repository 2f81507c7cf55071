"""Many-user figures are shown beside the command that produced them: a load sweep ran on a server
of its own (runner/plan.py ladder_command: the arm's command with --max-num-seqs 64), whose command
the packet records with the ladder (catalog.model.packet.Ladder.argv). The family page's answer
card shows it in its many-users table, a copyable block per user count (its copy button hidden in
the HTML, as every copy button); the index links the many-user figures to that table; a packet
recording no ladder command (the repository's demo, sealed before ladders recorded theirs) says so
in words instead of showing the one-user command beside them."""

from __future__ import annotations

import shlex
from pathlib import Path

from bs4 import BeautifulSoup, Tag

from catalog.model.packet import Packet
from catalog.recipes.shown import multiline

NOT_RECORDED = "The command of this ladder's own server is not recorded in this packet"


def _soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "lxml")


def _users_table(page: BeautifulSoup) -> Tag:
    table = page.select_one(".run-this table.run-users")
    assert table is not None, "the answer card has a many-users table"
    return table


def _tokens(text: str) -> list[str]:
    return shlex.split(text.replace("\\\n", " "))


def test_the_answer_cards_many_users_table_shows_each_ladders_own_command(load_site: tuple[Path, Packet]) -> None:
    site, packet = load_site
    page = _soup(site / "models" / "qwen3.5-9b" / "index.html")
    table = _users_table(page)
    headers = [th.get_text(" ", strip=True) for th in table.select("thead th")]
    assert headers[-1] == "its server's command"
    rows = table.select("tbody tr")
    assert rows
    ladders = {ladder.arm: ladder for ladder in packet.ladders if ladder.load is not None}
    for row in rows:
        arm_id = row.select_one("td a")["href"].rsplit("#arm-", 1)[1]  # type: ignore[index,union-attr]
        ladder = ladders[arm_id]
        block = row.select_one("td .ladder-command pre")
        assert block is not None, row
        shown = block.get_text()
        assert shown == multiline(ladder.argv, packet.arm(arm_id).config.env)
        tokens = _tokens(shown)
        assert tokens[tokens.index("--max-num-seqs") + 1] == "64"  # the ladder server's, not the arm's 1
        assert tokens != packet.arm(arm_id).config.argv
        button = row.select_one(f'button.copy[data-copy="{block["id"]}"]')
        assert button is not None and button.has_attr("hidden")
        assert NOT_RECORDED not in row.get_text(" ", strip=True)


def test_the_load_sweep_tables_show_their_servers_command(load_site: tuple[Path, Packet]) -> None:
    site, packet = load_site
    family = _soup(site / "models" / "qwen3.5-9b" / "index.html")
    packet_page = _soup(site / "packets" / packet.id / "index.html")
    for page in (family, packet_page):
        shown = [
            pre.get_text() for pre in page.select("#concurrency .ladder-command pre, #ladders .ladder-command pre")
        ]
        for ladder in packet.ladders:
            assert multiline(ladder.argv, packet.arm(ladder.arm).config.env) in shown


def test_the_index_links_many_users_to_their_servers_commands(load_site: tuple[Path, Packet]) -> None:
    site, _ = load_site
    index = _soup(site / "index.html")
    links = [a for a in index.select("a") if a.get_text(strip=True) == "their servers' commands"]
    assert links
    assert any(str(a["href"]).endswith("models/qwen3.5-9b/index.html#run-users-arc_pro_b70") for a in links)
    page = _soup(site / "models" / "qwen3.5-9b" / "index.html")
    assert page.select_one("#run-users-arc_pro_b70 table.run-users") is not None


def test_the_demo_says_its_ladder_command_is_not_recorded(repository_built: Path) -> None:
    page = _soup(repository_built / "models" / "demo" / "index.html")
    table = _users_table(page)
    for row in table.select("tbody tr"):
        assert row.select("pre") == []  # no command beside figures it did not produce
    wrapper = table.find_parent("div")
    assert wrapper is not None
    note = wrapper.find_next_sibling("p", class_="ladder-command-missing")
    assert note is not None and NOT_RECORDED in note.get_text(" ", strip=True)
    demo = next(p for p in (repository_built / "packets").iterdir() if p.name.startswith("demo-") and p.is_dir())
    ladders = _soup(demo / "index.html").select_one("#ladders")
    assert ladders is not None and NOT_RECORDED in ladders.get_text(" ", strip=True)
