"""`sent_requests`: the model requests a test host's scripted model received."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_host.agent.reconstruct import request_json
from dsh_host.models.scripted import ScriptedAdapter

if TYPE_CHECKING:
    from dsh_host import Host
    from dsh_host.jsontypes import JsonValue


def sent_requests(host: Host) -> list[dict[str, JsonValue]]:
    """Every request `host`'s `scripted` model received, in order, as plain JSON.

    Each is in the shape `dsh_host.log.rebuild_request` gives for the step that sent it
    (`provider`, `model`, `messages`, and `system`, `tools`, `temperature`, `maxTokens`, `stop`
    when set), so a test can compare what was sent with what the log implies::

        from dsh_host.log import rebuild_request

        steps = [e.seq for e in agent.session.events if e.type == "step/start"]
        assert sent_requests(host) == [rebuild_request(agent.session.events, s) for s in steps]
    """
    adapter = host.models.adapter("scripted")
    if not isinstance(adapter, ScriptedAdapter):
        raise TypeError(f"the host's scripted provider is a {type(adapter).__name__}, not the scripted model")
    return [request_json(request) for request in adapter.requests]
