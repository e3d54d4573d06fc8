"""A level: the runs between two change points, as the detector, the findings and the reports give it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Level:
    """The runs between two change points: their mean with its 95% interval, and how many."""

    mean: float
    low: float | None
    high: float | None
    n: int

    def as_dict(self) -> dict:
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n}
