"""`dsh web` in a process of its own: `python -m tests.web.serve [OPTIONS]`.

The host is the one the environment configures (`DSH_HOME`, `DSH_LOAD_PLUGINS`), with the web
plugin given by object, so the command runs from this checkout whether or not the installed
distribution registers the plugin's entry point.
"""

from __future__ import annotations

import sys

import dsh_host.web
from dsh_host import DshError, Host
from dsh_host.config import load_config
from dsh_host.web.cli import web


def main() -> int:
    """Run the command; errors end it as `dsh` ends them (one line, the error's exit code)."""
    try:
        with Host.start(load_config(), plugins={"web": dsh_host.web}) as host:
            web.main(sys.argv[1:], prog_name="dsh web", obj=host, standalone_mode=False)
    except DshError as exc:
        print(f"dsh: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
