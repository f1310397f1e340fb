"""The bench's in-process driver of the pages answers as the served app does."""

from __future__ import annotations

import asyncio

from dsh_host import Host
from dsh_session_reference import encode_uri
from tests.web.sessions import conversation, store_log


def test_the_in_process_driver_answers_as_the_guarded_app_does(web_host: Host, client) -> None:
    from bench.web import UNROUTED, InProcess

    store_log(web_host, "s1", conversation(("what is *this*", "**bold**"), title="Driven"), created_at=1, cwd="/a")
    loop = asyncio.new_event_loop()
    try:
        with InProcess(web_host, loop) as direct:
            for path in ("/", f"/s/{encode_uri('s1')}", "/search?q=bold"):
                status, body = direct.get(path)
                served = client.get(path)
                assert (status, body.decode()) == (served.status_code, served.text), path
                assert "Driven" in served.text
            assert direct.get(UNROUTED)[0] == 404
            assert direct.get("/s/not-a-uri")[0] == 404
    finally:
        loop.close()
