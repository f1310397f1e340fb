"""`python -m bench.corpus OUT_DIR [--gb 2.0] [--seed N]`: write the corpus and print what was written as JSON."""

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
    args = parser.parse_args(argv)
    if args.gb <= 0:
        parser.error(f"--gb must be positive, not {args.gb}")
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"{args.out} is not empty")
    corpus = generate(args.out, gb=args.gb, seed=args.seed)
    print(json.dumps(corpus.as_json(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
