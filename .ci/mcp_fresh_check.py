"""Read `dsh mcp`'s stdout (frames for initialize and tools/list) and check both were answered.

`.ci/run` pipes three frames into `dsh mcp` from a fresh environment that has only the
distributions the MCP extra needs, and this checks what came back; exits 1 with a line saying why.
"""

from __future__ import annotations

import json
import sys

TOOLS = ["search_sessions", "read_sessions"]


def main() -> int:
    answers = {frame.get("id"): frame for frame in map(json.loads, sys.stdin) if "id" in frame}
    server = answers.get(0, {}).get("result", {}).get("serverInfo", {}).get("name")
    tools = [tool["name"] for tool in answers.get(1, {}).get("result", {}).get("tools", [])]
    if server != "dsh" or tools != TOOLS:
        print(f"ci: dsh mcp answered server {server!r} with tools {tools} (expected 'dsh', {TOOLS})", file=sys.stderr)
        return 1
    print(f"ci: dsh mcp from a fresh environment lists {', '.join(tools)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
