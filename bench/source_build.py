"""The child processes of the sources bench: a cold index build, and the bare loop it is held to.

`python -m bench.source_build build DATA_DIR CLAUDE_DIR CODEX_DIR` starts a host mounting the
`claude-code` and `codex` sources on the two folders, with an empty data dir, and brings both
indexes up to date: `build_index()` where the source is an `IndexedSource`, else a listing
(which refreshes the index). `python -m bench.source_build bare ROOT` reads every `*.jsonl`
under ROOT and decodes every line with the JSON decoder the sources use. Each prints a JSON
object: the seconds of its work (start-up excluded) and what it counted.
"""

from __future__ import annotations

import json
import os
import sys
import time

PLUGINS = ["session-reference", "claude-code", "codex"]
SOURCES = ("claude-code", "codex")


def config_mapping(data_dir: str, claude_dir: str, codex_dir: str) -> dict[str, object]:
    """The host configuration mounting both sources on a corpus, with its data in `data_dir`."""
    return {
        "host": {"plugins": PLUGINS, "data_dir": data_dir},
        "sources": {"claude-code": {"dir": claude_dir}, "codex": {"dir": codex_dir}},
    }


def build(data_dir: str, claude_dir: str, codex_dir: str) -> dict[str, object]:
    from dsh_host import Config, Host
    from dsh_host.sources import IndexedSource

    host = Host.start(Config.from_mapping(config_mapping(data_dir, claude_dir, codex_dir)))
    start = time.perf_counter()
    for name in SOURCES:
        source = host.sources.get(name)
        if isinstance(source, IndexedSource):
            source.build_index()
        else:
            source.list_sessions()  # a source without the protocol refreshes its index here
    seconds = time.perf_counter() - start
    sessions = sum(len(host.sources.get(name).list_sessions()) for name in SOURCES)
    host.close()
    return {"seconds": seconds, "sessions": sessions}


def bare(root: str) -> dict[str, object]:
    decode = json.JSONDecoder().decode
    paths = sorted(
        os.path.join(folder, name) for folder, _, names in os.walk(root) for name in names if name.endswith(".jsonl")
    )
    start = time.perf_counter()
    records = 0
    for path in paths:
        with open(path, "rb") as file:
            for line in file:
                decode(line.decode("utf-8", "surrogatepass"))
                records += 1
    return {"seconds": time.perf_counter() - start, "files": len(paths), "records": records}


def main(argv: list[str]) -> int:
    if argv[:1] == ["build"] and len(argv) == 4:
        result = build(*argv[1:])
    elif argv[:1] == ["bare"] and len(argv) == 2:
        result = bare(argv[1])
    else:
        print("usage: python -m bench.source_build (build DATA CLAUDE CODEX | bare ROOT)", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
