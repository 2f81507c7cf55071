"""Optimisation grade: measured speed over the physical ceiling, in five named bands.

The bands are the reference catalog's thresholds (>= 0.9, >= 0.7, >= 0.5, >= 0.3, below). Tuned
serving stacks reach roughly 70-85 % of memory bandwidth in single-stream decode, so "tuned"
starts at 0.7 and "at the limit" is reserved for results within 10 % of the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Band:
    name: str
    threshold: float  # lowest utilisation in the band
    meaning: str


OPTIMISATION_BANDS: tuple[Band, ...] = (
    Band("at the limit", 0.9, "within 10 % of the physical ceiling: little left to gain on this hardware"),
    Band("tuned", 0.7, "where tuned serving stacks land (70-85 % of memory bandwidth)"),
    Band("room to grow", 0.5, "half to 70 % of the ceiling: kernels or scheduling leave speed on the table"),
    Band("far from limit", 0.3, "under half the ceiling: a different kernel path or runtime would likely help"),
    Band("untuned", 0.0, "under 30 % of the ceiling"),
)


def band_for(utilisation: float) -> Band:
    for band in OPTIMISATION_BANDS:
        if utilisation >= band.threshold:
            return band
    return OPTIMISATION_BANDS[-1]
