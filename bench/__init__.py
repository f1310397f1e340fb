"""Benchmark suite: `python -m bench [NAME ...]` prints one JSON line per figure.

Every figure is a ratio against a baseline measured in the same run, so the numbers hold on a
noisy machine. Each module here named in `MODULES` exposes `figures(workdir: Path)`, an iterable
of `Figure` records. Some read their size or variant from the environment: `sources` its
corpus's size (`DSH_BENCH_SOURCES_GB`), rounds, and whether it mounts issue 37's two agents or
all four (`DSH_BENCH_SOURCES_AGENTS=4`; see `bench.sources`).
"""
