"""`private_homes`: the home and agent-home variables of a test, inside a folder of its own.

With the sources of other agents' sessions mounted by default, a host reads `~/.claude`,
`~/.codex` and the like: a test that let it would read (and index) the machine's real sessions.
The fixtures (`make_host`, `dsh_cli`) point every such variable into the test's temp dir.
"""

from __future__ import annotations

import os
from pathlib import Path

AGENT_HOME_VARIABLES = ("HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "XDG_DATA_HOME")
"""The variables that say where a person's files and the agents' session files are."""


def private_homes(root: str | os.PathLike[str]) -> dict[str, str]:
    """Every `AGENT_HOME_VARIABLES` entry pointing under `root`, as an agent would default it there.

    `HOME` is `root` itself, each agent's home the folder it keeps under a home (`.claude`,
    `.codex`, `.gemini`), and `XDG_DATA_HOME` is `root/.local/share`. Nothing is created: a
    missing agent folder holds no session.
    """
    home = Path(root)
    return {
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CODEX_HOME": str(home / ".codex"),
        "GEMINI_CLI_HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
    }
