"""A listed key cannot publish a lie about energy (tests/adversarial/test_listed_key.py's harness):
a lab seals, with its listed key, energy windows no measurement gives, and `python -m catalog.verify`
and `python -m builder build` refuse each, published and with `--allow-unsigned`, by an error line
naming the packet and the field; the same lab's honest energy is accepted by both.

- a card averaging 5 W over every loaded window while its idle baseline in the same packet is
  31.86 W (tok/s per W 36x the truth, a negative energy above idle): refused at the card's power;
- each server's strict-suite window 1 s long while its rows' own times take ~31 s one after
  another (J per token ~1/31 of the truth): refused at the window's duration_us.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from catalog.checks.energy import server_tokens
from catalog.model.energy import US
from catalog.model.packet import PacketParts
from testkit.energy_samples import IDLE_W, steady_window, with_energy
from tests.adversarial.test_forgery import MODES, refused
from tests.adversarial.test_listed_key import accepted, campaign, lab, lab_seal  # noqa: F401 (lab: fixture)

Document = dict[str, Any]
SERVER = "arms[0].servers[0].energy"


def _energy(document: Document, watts: float, idle: float = IDLE_W) -> None:
    parts = with_energy(PacketParts.model_validate(document), watts=watts, idle=idle)
    document.clear()
    document.update(parts.model_dump(mode="json"))


def honest_energy(document: Document) -> None:
    """The control: 180 W over each window, a 31.86 W idle baseline (testkit's B70)."""
    _energy(document, 180.0)


def energy_below_idle(document: Document) -> None:
    """Every window at 5 W on a B70 whose idle baseline in the same packet is 31.86 W."""
    _energy(document, 5.0)


def energy_window_shorter_than_suite(document: Document) -> None:
    """Each server's window 1 s long, its samples a steady honest 180 W over that second."""
    parts = with_energy(PacketParts.model_validate(document), watts=180.0)
    assert parts.energy is not None
    idle_w = parts.energy.idle_w()
    arms = [
        arm.model_copy(
            update={
                "servers": [
                    s.model_copy(update={"energy": steady_window(180.0, US, server_tokens(s), idle_w)})
                    for s in arm.servers
                ]
            }
        )
        for arm in parts.arms
    ]
    document.clear()
    document.update(parts.model_copy(update={"arms": arms}).model_dump(mode="json"))


@pytest.mark.parametrize("options", MODES)
def test_energy_below_idle_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    document = campaign()
    energy_below_idle(document)
    refused(lab, lab_seal(lab, document), options, because=f"{SERVER}.cards[0].power_mw")


@pytest.mark.parametrize("options", MODES)
def test_energy_window_shorter_than_its_suite_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    document = campaign()
    energy_window_shorter_than_suite(document)
    refused(lab, lab_seal(lab, document), options, because=f"{SERVER}.duration_us")


@pytest.mark.parametrize("options", MODES)
def test_honest_energy_is_accepted(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    document = campaign()
    honest_energy(document)
    lab_seal(lab, document)
    accepted(lab, options)
