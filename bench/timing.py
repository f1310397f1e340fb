"""Shared timing helpers for the benchmark modules.

A figure compares a function with its baseline measured in the same run. `interleaved` times
them in alternating rounds and keeps each one's best time per round. The ratio a figure reports
is the median, over the rounds, of the value's best over the baseline's best in the same round:
this machine runs at different speeds for seconds at a time, and the two sides of one round
share the speed of that moment, so it cancels out of the round's ratio, while a round that
straddles a change of speed is one outlier among many. The ratio of the overall bests (what the
figures reported before) is kept beside it as `ratio_of_bests`.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Timing:
    """One function's times from `interleaved`: its best wall time in each round, in seconds."""

    rounds: tuple[float, ...]

    @property
    def best(self) -> float:
        return min(self.rounds)

    @classmethod
    def slowest(cls, *timings: Timing) -> Timing:
        """Round by round, the slowest of several functions timed in the same rounds."""
        return cls(tuple(map(max, zip(*(timing.rounds for timing in timings), strict=True))))


def paired_ratio(value: Timing, baseline: Timing) -> float:
    """The median over rounds of `value`'s best time over `baseline`'s best time in that round."""
    return statistics.median(v / b for v, b in zip(value.rounds, baseline.rounds, strict=True))


@dataclass(frozen=True)
class Figure:
    """One benchmark figure: a measured value, its same-run baseline, and its goal.

    `value` and `baseline` are in `unit` (the overall bests, for timed figures). `paired` is the
    median of per-round time ratios (`paired_ratio`); when set it is the figure's ratio. With
    `absolute` the target is a fixed limit on `value` in `unit` (MB of memory, seconds to a first
    answer) where no baseline makes a ratio meaningful; the baseline and ratio are then reported
    for context only. With `added_limit` the goal is the most `value` may exceed `baseline` by (in
    `unit`), for a figure whose baseline is so small that a ratio would be below the noise of its
    floor.
    """

    name: str
    value: float
    baseline: float
    unit: str = "s"
    target: float | None = None
    note: str = ""
    # For throughput figures (events/s) a higher value is better, so the ratio is inverted.
    higher_is_better: bool = False
    paired: float | None = None
    absolute: bool = False
    added_limit: float | None = None

    @classmethod
    def timed(cls, name: str, value: Timing, baseline: Timing, *, per: float | None = None, **fields: Any) -> Figure:
        """A figure of two functions timed by `interleaved`: their overall bests, in seconds (or,
        with `per`, as the throughput `per / seconds`, where higher is better), and the median of
        their per-round time ratios as its ratio."""
        paired = paired_ratio(value, baseline)
        if per is None:
            return cls(name, value.best, baseline.best, paired=paired, **fields)
        return cls(name, per / value.best, per / baseline.best, higher_is_better=True, paired=paired, **fields)

    @property
    def ratio_of_bests(self) -> float:
        if self.higher_is_better:
            return self.baseline / self.value if self.value else float("inf")
        return self.value / self.baseline if self.baseline else float("inf")

    @property
    def ratio(self) -> float:
        return self.ratio_of_bests if self.paired is None else self.paired

    def as_json(self) -> dict:
        out = asdict(self)
        out.pop("higher_is_better")
        out.pop("paired")
        out["ratio"] = round(self.ratio, 3)
        if self.paired is not None:
            out["ratio_of_bests"] = round(self.ratio_of_bests, 3)
        if self.added_limit is not None:
            out["added"] = self.value - self.baseline
            out["met"] = self.value - self.baseline <= self.added_limit
            return out
        out.pop("added_limit")
        if self.target is None:
            out["met"] = None
        else:
            out["met"] = (self.value if self.absolute else self.ratio) <= self.target
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


def interleaved(*fns: Callable[[], object], rounds: int = 5, repeat: int = 3) -> list[Timing]:
    """Each function's best of `repeat` calls in each of `rounds` alternating rounds, so that
    load on a shared machine drifting during the run weighs on every figure alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, kept in zip(fns, times, strict=True):
            kept.append(best_of(fn, repeat=repeat))
    return [Timing(tuple(kept)) for kept in times]
