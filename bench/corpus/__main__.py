"""`python -m bench.corpus OUT_DIR [--gb 2.0] [--seed N] [--gemini-gb G] [--opencode-gb G]`: write the corpus.

It prints what was written as JSON. `--opencode-gb G` also writes an OpenCode data folder,
`OUT_DIR/opencode/opencode.db` of about G GB, a quarter of it one big session (mount it as
`[sources.opencode] dir`); without it nothing of OpenCode is written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.corpus import generate


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.corpus", description=__doc__)
    parser.add_argument("out", type=Path, help="folder to write into (created; should be empty)")
    parser.add_argument(
        "--gb", type=float, default=2.0, help="about how many GB to write (9 for the closing-note table)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the same seed writes the same bytes")
    parser.add_argument("--big-claude-gb", type=float, help="the big transcript's size (default: 25 %% of --gb)")
    parser.add_argument("--big-codex-gb", type=float, help="the big rollout's size (default: 17.5 %% of --gb)")
    parser.add_argument(
        "--gemini-gb",
        type=float,
        default=0.0,
        help="also write about this many GB of Gemini CLI sessions into OUT_DIR/gemini (default: none)",
    )
    parser.add_argument(
        "--opencode-gb", type=float, help="also write an OpenCode database of about this many GB into OUT_DIR/opencode"
    )
    args = parser.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"{args.out} is not empty")
    if args.opencode_gb is not None and args.opencode_gb <= 0:
        parser.error(f"--opencode-gb must be positive, not {args.opencode_gb}")
    try:
        corpus = generate(
            args.out,
            gb=args.gb,
            seed=args.seed,
            big_claude_gb=args.big_claude_gb,
            big_codex_gb=args.big_codex_gb,
            gemini_gb=args.gemini_gb,
            opencode_gb=args.opencode_gb or 0.0,
        )
    except ValueError as error:
        parser.error(str(error))
    print(json.dumps(corpus.as_json(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
