"""Benchmark suite: `python -m bench [NAME ...]` prints one JSON line per figure.

Every figure is a ratio against a baseline measured in the same run, so the numbers hold on a
noisy machine. Each module here named in `MODULES` exposes `figures(workdir: Path)`, an iterable
of `Figure` records.
"""
