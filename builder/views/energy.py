"""What pages show of energy: J per output token and tok/s per W beside a measured speed whose
window is valid, "energy invalid: why" where it is not, "energy not measured" where no window was
recorded. Every figure is a window's (catalog/model/energy.py, re-derived by verification); an
arm's combines its servers' windows: their energy over their output tokens."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from builder.format import Num, num
from builder.views.common import Fact
from catalog.model.energy import EnergyWindow
from catalog.model.packet import Arm, Packet

NOT_MEASURED = "energy not measured"


@dataclass(frozen=True)
class EnergyFigure:
    """A window's (or an arm's windows') figures for a page, or why there are none."""

    state: str  # "valid", "invalid" or "absent"
    j_per_token: Num | None
    tok_s_per_w: Num | None
    avg_w: Num | None
    why: str  # "" when valid; else the line a page shows in place of the figures

    @property
    def valid(self) -> bool:
        return self.state == "valid"

    @property
    def short(self) -> str:
        """For a cell or a card: `energy invalid: gap`, `energy not measured` (the full line is `why`)."""
        if self.state == "invalid":
            return self.why.split(":", 2)[0] + ":" + self.why.split(":", 2)[1]
        return NOT_MEASURED if self.state == "absent" else self.text

    @property
    def text(self) -> str:
        if not self.valid:
            return self.why
        assert self.j_per_token is not None and self.tok_s_per_w is not None
        return f"{self.j_per_token.text} J/token · {self.tok_s_per_w.text} tok/s/W"


def significant(value: float, unit: str = "", digits: int = 3) -> Num:
    """`digits` significant digits (at least two decimals): J per token may be 0.0042 or 12.5."""
    places = max(2, digits - 1 - math.floor(math.log10(abs(value)))) if value else 2
    return num(value, places, unit)


def absent(reason: str | None) -> EnergyFigure:
    why = f"{NOT_MEASURED}: {reason}" if reason else NOT_MEASURED
    return EnergyFigure("absent", None, None, None, why)


def one_absence(figures: Iterable[EnergyFigure | None]) -> str:
    """Why none of a table's rows has energy, when every row is without it for the same reason (a
    caption says it once, and the table drops its energy column); else ""."""
    reasons = {f.why if f is not None and f.state == "absent" else None for f in figures}
    if len(reasons) != 1:
        return ""
    return reasons.pop() or ""


def _invalid(window: EnergyWindow) -> EnergyFigure:
    return EnergyFigure("invalid", None, None, None, f"energy invalid: {window.invalid[0]}")


def combined(windows: Sequence[EnergyWindow]) -> EnergyFigure:
    """Several valid windows as one: their energy over their output tokens and their duration (each
    window's tokens are its energy over its J per token: a packet record holds no prompt rows)."""
    figures = [w.figures for w in windows if w.figures is not None]
    energy = sum(f.energy_j for f in figures)
    output_tokens = sum(f.energy_j / f.j_per_output_token for f in figures if f.j_per_output_token)
    seconds = sum(w.duration_s for w in windows)
    if energy <= 0 or output_tokens <= 0 or seconds <= 0:
        return absent("no output token or no energy in the window")
    return EnergyFigure(
        "valid",
        significant(energy / output_tokens, "J/token"),
        significant(output_tokens / energy, "tok/s/W"),
        significant(energy / seconds, "W"),
        "",
    )


def window_figure(window: EnergyWindow | None, packet: Packet) -> EnergyFigure:
    if window is None:
        return absent(packet.energy.absent if packet.energy is not None else None)
    if not window.valid:
        return _invalid(window)
    return combined([window])


def arm_energy(packet: Packet, arm: Arm) -> EnergyFigure:
    """The arm's strict suites on its fresh servers: valid only when every server's window is."""
    servers = [s for s in arm.servers if s.rows]
    windows = [s.energy for s in servers]
    if not servers or any(w is None for w in windows):
        return absent(packet.energy.absent if packet.energy is not None else None)
    found = [w for w in windows if w is not None]
    broken = next((w for w in found if not w.valid), None)
    if broken is not None:
        return _invalid(broken)
    return combined(found)


def energy_facts(window: EnergyWindow | None, packet: Packet) -> list[Fact]:
    """A window on a packet page: every figure with the samples it came from, or every reason."""
    if window is None:  # where the packet read no energy, its Energy section says why, once
        setup = packet.energy
        said = setup is None or setup.absent is not None
        return [Fact("energy", NOT_MEASURED, "the packet's Energy section says why" if said else "")]
    samples = ", ".join(
        f"device {c.device}: {len(c.power_mw)} power samples, {len(c.counter_uj)} counter readings"
        for c in window.cards
    )
    if window.figures is None:
        return [Fact("energy", "invalid", "; ".join(window.invalid)), Fact("energy samples", samples)]
    f = window.figures
    facts = [
        Fact("energy", num(f.energy_j, 1, "J"), f"trapezoid over {num(window.duration_s, 2, 's').text} s"),
        Fact("energy counter", num(f.counter_j, 1, "J"), "the cards' cumulative counters over the same window"),
        Fact("power", f"{significant(f.avg_w).text} W average, {significant(f.peak_w).text} W peak"),
        Fact("energy per token", combined([window]).text),
    ]
    if f.j_per_total_token is not None:
        facts.append(Fact("per token, prompt included", significant(f.j_per_total_token, "J/token")))
    if f.above_idle_j is not None:
        facts.append(Fact("energy above idle", num(f.above_idle_j, 1, "J"), "the idle baseline's power subtracted"))
    facts.append(Fact("energy samples", samples))
    return facts


def setup_facts(packet: Packet) -> list[Fact]:
    """How the packet's campaign read energy, or why it did not."""
    setup = packet.energy
    if setup is None:
        return [Fact("energy", NOT_MEASURED, "the campaign predates energy measurement")]
    if setup.absent is not None:
        return [Fact("energy", NOT_MEASURED, setup.absent)]
    bounds = setup.bounds
    facts = [
        Fact("energy sources", "; ".join(setup.sources)),
        Fact("sampling", f"every {setup.interval_ms} ms" if setup.interval_ms else "not recorded"),
        Fact(
            "validity rules",
            f"no gap over {bounds.gap_bound_s:g} s; power and counter agree within {bounds.agreement:.0%} "
            f"+ {bounds.power_accuracy_w:g} W x duration per card",
        ),
    ]
    idle = setup.idle_w()
    if idle is not None:
        facts.append(
            Fact("idle baseline", ", ".join(f"device {d}: {significant(w).text} W" for d, w in sorted(idle.items())))
        )
    elif setup.idle is not None:
        facts.append(Fact("idle baseline", "invalid", "; ".join(setup.idle.invalid)))
    return facts
