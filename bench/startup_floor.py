"""The floor of `dsh` start-up, run as a script by `bench.startup`.

Before any `dsh` command can know which commands exist it must load its command-line library
(click) and its plugin manager (pluggy) and find the installed plugins in the `dsh` entry-point
group. This process does exactly that and nothing more. With `--no-entry-points` it stops
before reading the entry points (and before loading `importlib.metadata`), which tells what
reading them costs. With `--import MODULE,...` it then imports those modules (a protocol SDK's
modules that a `dsh` protocol server needs: the floor of that server's start-up), with the
cyclic garbage collector off, as `dsh mcp` loads its SDK, and ends there without the
interpreter's teardown (the server's time is taken at its answer, before its own).
"""

import gc
import importlib
import os
import sys

import click  # noqa: F401 - loading it is the point
import pluggy  # noqa: F401 - loading it is the point

if "--no-entry-points" not in sys.argv[1:]:
    from importlib import metadata

    metadata.entry_points(group="dsh")

if "--import" in sys.argv[1:]:
    # Not from this script's folder, whose bench modules share names with the SDKs (bench/acp.py).
    del sys.path[0]
    gc.disable()
    for name in sys.argv[sys.argv.index("--import") + 1].split(","):
        importlib.import_module(name)
    os._exit(0)
