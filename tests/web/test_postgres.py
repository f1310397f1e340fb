"""`dsh web` on the PostgreSQL store shows what the connecting role may read, and nothing more."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

import dsh_host.web
from dsh_session_reference import encode_uri
from tests.mcp.test_mcp_postgres import team  # noqa: F401 - the fixture: alice's DSN, bob's sessions
from tests.web.conftest import BASE, TOKEN, guarded

# Its sessions are imported by hand.
pytestmark = pytest.mark.foreign_logs


def test_a_role_sees_its_own_and_shared_sessions_and_nothing_rls_hides(make_host, team) -> None:  # noqa: F811
    host = make_host(
        ["session-reference"],
        objects={"web": dsh_host.web},
        config={"host": {"store": "postgres"}, "stores": {"postgres": {"dsn": team}}},
    )
    with TestClient(guarded(host), base_url=BASE) as client:
        listing = client.get(f"/?token={TOKEN}").text
        assert sorted(re.findall(r'<tr class="session" data-id="([^"]+)">', listing)) == ["alices", "bobs-shared"]
        assert "No session matches “private”" in client.get("/search?q=private").text
        assert client.get(f"/s/{encode_uri('bobs-shared')}").status_code == 200
        hidden = client.get(f"/s/{encode_uri('bobs-private')}")
        missing = client.get(f"/s/{encode_uri('nobodys')}")
        # A hidden session reads exactly like one that does not exist.
        assert hidden.status_code == missing.status_code == 404
        assert hidden.text == missing.text.replace("nobodys", "bobs-private")
        assert client.get(f"/s/{encode_uri('bobs-private')}/export.jsonl").status_code == 404
