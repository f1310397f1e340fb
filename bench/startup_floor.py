"""The floor of `dsh` start-up, run as a script by `bench.startup`.

Before any `dsh` command can know which commands exist it must load its command-line library
(click) and its plugin manager (pluggy) and find the installed plugins in the `dsh` entry-point
group. This process does exactly that and nothing more. With `--no-entry-points` it stops
before reading the entry points (and before loading `importlib.metadata`), which tells what
reading them costs.
"""

import sys

import click  # noqa: F401 - loading it is the point
import pluggy  # noqa: F401 - loading it is the point

if "--no-entry-points" not in sys.argv[1:]:
    from importlib import metadata

    metadata.entry_points(group="dsh")
