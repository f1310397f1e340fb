"""`dsh web`: serve the read-only pages on loopback until Ctrl+C or SIGTERM, then exit 0.

The command binds its socket first (so `--port 0` picks a free port and the printed URL names
it), prints the URL with the launch's secret, opens a browser unless `--no-open`, and hands the
socket to uvicorn, whose own signal handling ends the serving cleanly. Registering the command
(every dsh run) loads none of this: its body imports Starlette, uvicorn and the pages.
"""

from __future__ import annotations

import contextlib
import ipaddress
import secrets
import signal
import socket
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from dsh_host.errors import DshError

if TYPE_CHECKING:
    from dsh_host.host import Host
    from dsh_host.web.app import Reader

EXTRA_MISSING = "dsh web needs its extra: pip install 'dsh-host[web]'"
NO_SNAPSHOTS = (
    "dsh web needs session snapshots, which no mounted plugin provides: "
    "install dsh-session-reference and mount its session-reference plugin"
)
DEFAULT_PORT = 8767


class WebUnavailable(DshError):
    """`dsh web` cannot start: an extra or a plugin it needs is missing, or the address is taken."""

    exit_code = 2


def is_loopback(address: str) -> bool:
    """Whether `address` (a name or an IP address) is this machine's loopback."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(address: str) -> str | None:
    """The warning `dsh web` gives on stderr before listening on `address`; None for loopback."""
    if is_loopback(address):
        return None
    return (
        f"dsh web: warning: listening on {address}, not loopback: whoever reaches it with the printed "
        "address reads every session; prefer ssh -L to a loopback port"
    )


def bind(address: str, port: int) -> socket.socket:
    """A listening TCP socket on `address`:`port` (port 0: a free one)."""
    try:
        family, kind, proto, _, where = socket.getaddrinfo(address.strip("[]"), port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
        sock.listen(128)
    except OSError as exc:
        raise WebUnavailable(f"dsh web: cannot listen on {address} port {port}: {exc.strerror or exc}") from None
    return sock


def url_of(sock: socket.socket, token: str) -> str:
    """The address a browser opens: the socket's, with the secret in the query."""
    address, port = sock.getsockname()[:2]
    shown = f"[{address}]" if ":" in address else address
    return f"http://{shown}:{port}/?token={token}"


@click.command()
@click.option("--host", "address", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True, help="0 picks a free one."
)
@click.option("--open/--no-open", "open_browser", default=True, help="Open the page in a browser.")
@click.pass_obj
def web(host: Host, address: str, port: int, open_browser: bool) -> None:
    """Serve every session dsh can read as read-only web pages, on loopback, until Ctrl+C.

    The printed URL carries a secret made at this launch; without it the server answers 403.
    """
    from dsh_host.web.service import lacks

    if lacks("starlette", "uvicorn", "jinja2", "markdown_it"):
        raise WebUnavailable(EXTRA_MISSING)
    reader = make_reader(host)
    warning = exposure_warning(address)
    if warning is not None:
        click.echo(warning, err=True)
    sock = bind(address, port)
    token = secrets.token_urlsafe(32)
    url = url_of(sock, token)
    click.echo(f"dsh web: serving on {url}")
    sys.stdout.flush()
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    serve(reader, sock, token, None if is_loopback(address) else address)


def make_reader(host: Host) -> Reader:
    """What the pages read through, from `host`'s services; refuses without session snapshots."""
    from dsh_host.mcp.catalog import SessionCatalog, SnapshotService
    from dsh_host.mcp.indexing import SourceIndexes
    from dsh_host.web.app import Reader

    snapshots = host.services.providing(SnapshotService)
    query = host.services.get("session_query")
    if snapshots is None or query is None:
        raise WebUnavailable(NO_SNAPSHOTS)
    indexes = SourceIndexes(host.sources)
    return Reader(query, snapshots, SessionCatalog(query, snapshots, indexes), indexes, host)


def serve(reader: Reader, sock: socket.socket, token: str, extra_host: str | None) -> None:
    """Serve on `sock` until SIGINT or SIGTERM (uvicorn's handlers end the loop; this returns)."""
    import uvicorn

    from dsh_host.web.app import build_app
    from dsh_host.web.guard import Guard

    app = build_app(reader)
    guarded = Guard(app, token=token, port=sock.getsockname()[1], extra_host=extra_host)
    config = uvicorn.Config(guarded, log_level="warning", lifespan="on", access_log=False)

    class Server(uvicorn.Server):
        """uvicorn's server, ending on SIGINT or SIGTERM as a finished command does (exit 0).

        uvicorn's own handling raises the signal again once it has shut down, so the process
        would end killed by it; a second Ctrl+C still ends it at once.
        """

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            def stop(sig: int, frame: object) -> None:
                if self.should_exit and sig == signal.SIGINT:
                    self.force_exit = True
                self.should_exit = True

            previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    Server(config).run(sockets=[sock])
