"""The child processes of the sources bench: a cold index build, and the bare loop it is held to.

`python -m bench.source_build build DATA_DIR SOURCE=DIR [SOURCE=DIR ...]` starts a host
mounting each named source (`claude-code`, `codex`, `gemini-cli`, `opencode`) on its folder, with
an empty data dir, and brings every index up to date: `build_index()` where the source is an
`IndexedSource`, else a listing (which refreshes the index). `python -m bench.source_build bare
ROOT` reads every `*.jsonl` under ROOT and decodes every line, and reads every OpenCode database
(`*.db`) under it and decodes the JSON of every message and part row, each once, with the JSON
decoder the sources use. Each prints a JSON object: the seconds of its work (start-up excluded)
and what it counted.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from collections.abc import Mapping
from urllib.parse import quote

SOURCE_NAMES = ("claude-code", "codex", "gemini-cli", "opencode")
"""The sources a build may mount (built in the order the command line names them)."""


def config_mapping(data_dir: str, dirs: Mapping[str, str]) -> dict[str, object]:
    """The host configuration mounting each source of `dirs` (name -> folder), with its data in `data_dir`."""
    return {
        "host": {"plugins": ["session-reference", *dirs], "data_dir": data_dir},
        "sources": {name: {"dir": folder} for name, folder in dirs.items()},
    }


def build(data_dir: str, dirs: Mapping[str, str]) -> dict[str, object]:
    from dsh_host import Config, Host
    from dsh_host.sources import IndexedSource

    host = Host.start(Config.from_mapping(config_mapping(data_dir, dirs)))
    start = time.perf_counter()
    for name in dirs:
        source = host.sources.get(name)
        if isinstance(source, IndexedSource):
            source.build_index()
        else:
            source.list_sessions()  # a source without the protocol refreshes its index here
    seconds = time.perf_counter() - start
    sessions = sum(len(host.sources.get(name).list_sessions()) for name in dirs)
    host.close()
    return {"seconds": seconds, "sessions": sessions}


def bare(root: str) -> dict[str, object]:
    decode = json.JSONDecoder().decode
    found = sorted(os.path.join(folder, name) for folder, _, names in os.walk(root) for name in names)
    paths = [path for path in found if path.endswith(".jsonl")]
    databases = [path for path in found if path.endswith(".db")]
    start = time.perf_counter()
    records = rows = 0
    for path in paths:
        with open(path, "rb") as file:
            for line in file:
                decode(line.decode("utf-8", "surrogatepass"))
                records += 1
    for path in databases:
        # immutable: a WAL database opened read-only otherwise leaves a -wal and -shm beside it,
        # which would change how the builds after this loop open it
        conn = sqlite3.connect("file:" + quote(os.path.abspath(path)) + "?mode=ro&immutable=1", uri=True)
        try:
            rows += len(conn.execute("SELECT * FROM session").fetchall())
            for table in ("message", "part"):
                for (data,) in conn.execute(f"SELECT data FROM {table}"):
                    decode(data)
                    records += 1
        finally:
            conn.close()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "files": len(paths), "databases": len(databases), "records": records, "rows": rows}


def _dirs(pairs: list[str]) -> dict[str, str] | None:
    dirs = dict(pair.partition("=")[::2] for pair in pairs)
    if not dirs or len(dirs) != len(pairs) or not set(dirs) <= set(SOURCE_NAMES) or not all(dirs.values()):
        return None
    return dirs


def main(argv: list[str]) -> int:
    dirs = _dirs(argv[2:]) if argv[:1] == ["build"] and len(argv) > 2 else None
    if dirs is not None:
        result = build(argv[1], dirs)
    elif argv[:1] == ["bare"] and len(argv) == 2:
        result = bare(argv[1])
    else:
        names = "|".join(SOURCE_NAMES)
        print(f"usage: python -m bench.source_build (build DATA ({names})=DIR... | bare ROOT)", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
