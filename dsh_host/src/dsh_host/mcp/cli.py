"""`dsh mcp`: serve one MCP client on stdin/stdout until EOF (or SIGTERM/SIGINT), then exit 0.

From startup to exit stdout carries protocol frames only (`dsh_host.cli.protocol_stdio`);
logs go to stderr (dsh's one line each; the SDK's, warnings and up, as the SDK formats them).
The end is bounded: calls in flight get a short grace (`dsh_host.mcp.stdio`), then the sources
are closed, which cancels their index builds; a store read that still blocks a worker thread
after that (a database that stopped answering), or a source whose close does not return (a
build slow to cancel), does not keep the process alive.

Registering the command (every dsh run) loads none of this: the command's body imports the
event loop, the catalog (session query, the store) and the SDK.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
from typing import IO, TYPE_CHECKING

import click

from dsh_host.cli.protocol_stdio import check_transport, stdout_to_stderr
from dsh_host.errors import DshError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from mcp.server import Server

    from dsh_host.host import Host
    from dsh_host.mcp.catalog import SessionCatalog

log = logging.getLogger("dsh.mcp")

THREADS_GRACE_SECONDS = 0.4
"""How long the end waits for worker threads (store reads) and the sources' close (their index
builds cancelled) after the calls were cancelled."""
SDK_MISSING = "dsh mcp needs the MCP SDK: pip install 'dsh-host[mcp]'"
NO_SNAPSHOTS = (
    "dsh mcp needs session snapshots, which no mounted plugin provides: "
    "install dsh-session-reference and mount its session-reference plugin"
)


class SnapshotsMissing(DshError):
    """`dsh mcp` on a host without session-reference's snapshots (exit code 2)."""

    exit_code = 2


@click.command()
@click.pass_obj
def mcp(host: Host) -> None:
    """Serve session search and session snapshots to one MCP client on stdin/stdout, until EOF.

    Tools: search_sessions and read_sessions; resources: every session you can read, by its
    dsh-session: URI. Reads only, through the configured store. Logs go to stderr.
    """
    check_transport("mcp", "mcp", SDK_MISSING)
    with _collector_paused():
        from dsh_host import __version__
        from dsh_host.mcp.server import build_server

        catalog = session_catalog(host)
        server = build_server(catalog, version=__version__)
    with stdout_to_stderr() as protocol_out:
        if not _run_bounded(_serve(catalog, server, protocol_out), then=host.sources.close):
            # A worker thread is still blocked in a store read whose call was cancelled (a
            # database that stopped answering), or a source is still cancelling its index build:
            # waiting for it would hold the client's shutdown hostage, so the process ends here,
            # the store closed first.
            log.warning("mcp: leaving a store read or an index build unfinished")
            with contextlib.suppress(Exception):
                host.close()
            sys.stderr.flush()
            os._exit(0)


def session_catalog(host: Host) -> SessionCatalog:
    """The catalog `dsh mcp` serves for `host`; `SnapshotsMissing` when nothing provides snapshots."""
    from dsh_host.mcp.catalog import SessionCatalog, SnapshotService
    from dsh_host.mcp.indexing import SourceIndexes

    snapshots = host.services.providing(SnapshotService)
    query = host.services.get("session_query")
    if snapshots is None or query is None:
        raise SnapshotsMissing(NO_SNAPSHOTS)
    # `host.sources` is made here, on this thread; the builds open the sources on a worker thread.
    return SessionCatalog(query, snapshots, SourceIndexes(host.sources))


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector off for the block, then freeze what it made.

    The block loads the SDK and builds the server: hundreds of thousands of objects (the SDK's
    schema models above all) that live as long as the process. Collections while they are made
    find nothing to free (they took about a tenth of the start-up), and frozen, no collection a call
    triggers walks them again.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


async def _serve(catalog: SessionCatalog, server: Server, protocol_out: IO[bytes]) -> None:
    from dsh_host.cli.protocol_stdio import stdio_streams, stop_on_signals
    from dsh_host.mcp.stdio import MAX_FRAME_BYTES, serve_stdio

    with stop_on_signals() as stop:
        reader, writer = await stdio_streams(protocol_out, limit=MAX_FRAME_BYTES)
        # The indexes build while the client starts up; the end closes the host's sources, which
        # cancels the builds.
        catalog.start_indexing()
        await serve_stdio(server, reader, writer, stop=stop, on_end=catalog.stop_waiting)


def _run_bounded(main: Awaitable[None], *, then: Callable[[], None]) -> bool:
    """Run `main` on a new event loop, then `then()` once its worker threads ended; False when
    they and `then` are not all done within `THREADS_GRACE_SECONDS` of the loop's end.

    As `asyncio.run`, except that the worker threads (store reads) are not waited for as long
    as they run.
    """
    import asyncio
    import threading
    from concurrent.futures import ThreadPoolExecutor

    loop = asyncio.new_event_loop()
    workers = ThreadPoolExecutor(thread_name_prefix="dsh-mcp")
    loop.set_default_executor(workers)
    try:
        loop.run_until_complete(main)
    finally:
        try:
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.wait(left))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

    def end() -> None:
        workers.shutdown()
        then()

    # A daemon thread waits for the workers and runs `then`, so this one can stop waiting.
    waiting = threading.Thread(target=end, name="dsh-mcp-shutdown", daemon=True)
    waiting.start()
    waiting.join(THREADS_GRACE_SECONDS)
    return not waiting.is_alive()
