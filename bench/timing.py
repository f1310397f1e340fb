"""Shared timing helpers for the benchmark modules."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Figure:
    """One benchmark figure: a measured value, its same-run baseline, and the target ratio."""

    name: str
    value: float
    baseline: float
    unit: str = "s"
    target: float | None = None
    note: str = ""
    # For throughput figures (events/s) a higher value is better, so the ratio is inverted.
    higher_is_better: bool = False

    @property
    def ratio(self) -> float:
        if self.higher_is_better:
            return self.baseline / self.value if self.value else float("inf")
        return self.value / self.baseline if self.baseline else float("inf")

    def as_json(self) -> dict:
        out = asdict(self)
        out.pop("higher_is_better")
        out["ratio"] = round(self.ratio, 3)
        out["met"] = None if self.target is None else self.ratio <= self.target
        return out


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """Minimum wall time of `repeat` calls of `fn`, with the collector paused while timing."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
        finally:
            gc.enable()
        best = min(best, elapsed)
    return best


def interleaved(*fns: Callable[[], object], rounds: int = 5, repeat: int = 3) -> list[float]:
    """Best time of each function, measured in alternating rounds so that load on a shared
    machine drifting during the run weighs on every figure alike."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], best_of(fn, repeat=repeat))
    return best
