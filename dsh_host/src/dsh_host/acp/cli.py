"""`dsh acp`: serve one ACP client on stdin/stdout until EOF (or SIGTERM/SIGINT), then exit 0.

From startup to exit stdout carries protocol frames only (`dsh_host.cli.protocol_stdio`), each
whole (`dsh_host.acp.server`'s shutdown finishes the frame in flight).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import IO

import click

from dsh_host.cli.protocol_stdio import check_transport, stdio_streams, stdout_to_stderr, stop_on_signals
from dsh_host.config import Config
from dsh_host.host import Host

log = logging.getLogger("dsh.acp")

ABSENT_PLUGINS = ("session-reference", "acp")
"""Never mounted on the ACP host: session references read other sessions, and `acp` is this.
Nor is any plugin that registers session sources (other agents' sessions)."""

SDK_MISSING = "dsh acp needs the ACP SDK: pip install 'dsh-host[acp]'"


@click.command()
@click.pass_obj
def acp(host: Host) -> None:
    """Serve the Agent Client Protocol (v1) to one client on stdin/stdout, until EOF.

    Automation only: text prompts, committed answers, cancel and errors; no session query and
    no session references, whatever the configuration mounts. Logs go to stderr.
    """
    check_transport("acp", "acp", SDK_MISSING)
    import asyncio

    config = acp_config(host)
    with stdout_to_stderr() as protocol_out:
        asyncio.run(_serve(config, protocol_out))


def acp_config(host: Host) -> Config:
    """The CLI host's configuration with its plugins minus session-reference, the sources and acp.

    Says so on stderr (one line) only when an explicit plugin list (`[host] plugins`,
    `DSH_LOAD_PLUGINS`) names one of them: mounting every installed plugin by default is not
    asking for them.
    """
    absent = [
        plugin.name
        for plugin in host.mounted
        if plugin.name in ABSENT_PLUGINS or "dsh_register_session_sources" in plugin.hooks
    ]
    named = [name for name in host.config.plugin_names or () if name in absent and name != "acp"]
    if named:
        log.warning("acp: ignoring %s and session query: the ACP transport mounts none of them", ", ".join(named))
    plugins = [plugin.name for plugin in host.mounted if plugin.name not in absent]
    return dataclasses.replace(host.config, data={**host.config.data, "host": {**host.config.host, "plugins": plugins}})


async def _serve(config: Config, protocol_out: IO[bytes]) -> None:
    from dsh_host import __version__
    from dsh_host.acp.server import AcpServer

    with stop_on_signals() as stop:
        async with Host.start(config, session_query=False) as host:
            reader, writer = await stdio_streams(protocol_out)
            await AcpServer(host, agent_version=__version__).serve(reader, writer, stop=stop)
