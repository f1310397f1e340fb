"""The MCP TypeScript SDK's client on Node 22, for the tests that drive `dsh mcp` with it.

`ts_client.cjs` connects over stdio, lists the tools, searches, reads, pages through every
resource and reads one, and prints what it saw as one JSON object. The SDK and its Node are
installed from tests/acp/node/package-lock.json (`npm install --prefix tests/acp/node --no-save`,
as `.ci/run` does) and found through `$DSH_ACP_NODE_BIN`; without them a test skips locally,
naming the command, and fails in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parents[1] / "acp" / "node"
NODE_BIN = Path(os.environ.get("DSH_ACP_NODE_BIN") or NODE_DIR / "node_modules" / ".bin")
TS_CLIENT = Path(__file__).with_name("ts_client.cjs")


def node_binary() -> Path:
    """Node 22 beside the TypeScript SDK, or a skip (a failure in CI) naming how to install them."""
    if not (NODE_BIN / "node").exists() or not (NODE_BIN.parent / "@modelcontextprotocol" / "sdk").is_dir():
        missing = (
            f"node or @modelcontextprotocol/sdk missing under {NODE_BIN.parent} "
            f"(run: npm install --prefix {NODE_DIR} --no-save)"
        )
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    return NODE_BIN / "node"


def run_ts_client(node: Path, request: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """What the client saw of the server `request` names (`ts_client.cjs` has its fields); nothing on stderr."""
    done = subprocess.run(
        [str(node), str(TS_CLIENT), json.dumps(request)],
        capture_output=True,
        text=True,
        env={**env, "NODE_PATH": str(NODE_BIN.parent)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return json.loads(done.stdout)
