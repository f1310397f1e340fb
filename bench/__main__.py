"""Run the benchmark suite: `python -m bench [MODULE ...]`."""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
from pathlib import Path

MODULES = [
    "retention",
    "store",
    "pages",
    "search",
    "agent",
    "session_reference",
    "acp",
    "mcp",
    "web",
    "postgres",
    "sources",
    "startup",
]


def main(argv: list[str]) -> int:
    names = argv or MODULES
    unknown = sorted(set(names) - set(MODULES))
    if unknown:
        print(f"unknown benchmark module(s): {', '.join(unknown)}; known: {', '.join(MODULES)}", file=sys.stderr)
        return 2
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        with tempfile.TemporaryDirectory(prefix=f"dsh-bench-{name}-") as tmp:
            for figure in module.figures(Path(tmp)):
                print(json.dumps(figure.as_json()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
