"""The refusals: the launch's secret, the Host header, the methods; unknown sessions and bad URIs."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from dsh_host import Host
from dsh_host.web.guard import cookie_name, host_name
from dsh_session_reference import encode_uri
from tests.web.conftest import BASE, PORT, TOKEN, guarded
from tests.web.sessions import conversation, store_log


@pytest.fixture
def anonymous(web_host: Host):
    with TestClient(guarded(web_host), base_url=BASE, follow_redirects=False) as test_client:
        yield test_client


def test_without_the_secret_every_page_is_refused(anonymous) -> None:
    for path in ("/", "/search?q=x", "/static/app.js", f"/s/{encode_uri('s')}", "/nowhere"):
        answer = anonymous.get(path)
        assert answer.status_code == 403
        assert answer.text.count("\n") == 1 and "secret" in answer.text


def test_a_wrong_secret_is_refused_and_sets_nothing(anonymous) -> None:
    answer = anonymous.get("/?token=nope")
    assert answer.status_code == 403 and "set-cookie" not in answer.headers
    assert anonymous.get("/", headers={"cookie": f"{cookie_name(PORT)}=nope"}).status_code == 403


def test_the_secret_becomes_a_cookie_and_leaves_the_address(anonymous) -> None:
    answer = anonymous.get(f"/search?q=a+b&token={TOKEN}")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/search?q=a+b"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{cookie_name(PORT)}={TOKEN};") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert anonymous.get("/search?q=a+b").status_code == 200


def test_pages_carry_a_policy_with_no_inline_code_and_no_other_origin(client) -> None:
    for path in ("/", "/static/style.css"):
        answer = client.get(path)
        policy = answer.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self';" in policy and "style-src 'self';" in policy
        assert "unsafe" not in policy and "http" not in policy and "*" not in policy
        assert answer.headers["x-frame-options"] == "DENY" and answer.headers["referrer-policy"] == "no-referrer"


@pytest.mark.parametrize("host", ["localhost", "localhost:1234", "127.0.0.1:8767", "[::1]", "[::1]:9", "LOCALHOST"])
def test_a_loopback_host_header_is_answered(client, host) -> None:
    assert client.get("/", headers={"host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8767", "127.0.0.1.evil.example", "", "10.0.0.5"])
def test_any_other_host_header_is_refused_even_with_the_secret(client, host) -> None:
    answer = client.get(f"/?token={TOKEN}", headers={"host": host})
    assert answer.status_code == 403 and "loopback" in answer.text


def test_the_address_given_with_host_is_answered_too(web_host: Host) -> None:
    with TestClient(guarded(web_host, "10.0.0.5"), base_url="http://10.0.0.5:8767", follow_redirects=False) as c:
        assert c.get(f"/?token={TOKEN}").status_code == 303
        assert c.get("/").status_code == 200
        assert c.get("/", headers={"host": "10.0.0.6"}).status_code == 403


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_only_get_and_head_are_answered(client, method) -> None:
    answer = client.request(method, "/")
    assert answer.status_code == 405 and answer.headers["allow"] == "GET, HEAD"
    assert client.head("/").status_code == 200


def test_an_unknown_session_and_a_malformed_uri_are_404_with_one_line(client) -> None:
    for path in (f"/s/{encode_uri('nobody')}", "/s/dsh-session:%%%", "/s/not-a-uri", f"/s/{encode_uri('x')}/preview"):
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert answer.text.count("\n") == 1 and answer.text.endswith("\n")


def test_a_malformed_parameter_is_400_with_one_line(web_host: Host, client) -> None:
    store_log(web_host, "s", conversation(("q", "a")), created_at=1, cwd="/a")
    for path in (
        f"/s/{encode_uri('s')}?before=-1",
        f"/s/{encode_uri('s')}/log?before_seq=x",
        "/?after=@@",
        "/?agent=nobody",
    ):
        answer = client.get(path)
        assert answer.status_code == 400, path
        assert answer.text.count("\n") == 1


def test_host_name_drops_the_port_only() -> None:
    assert [host_name(h) for h in ("a:1", "[::1]:80", "[::1]", "a", "::1")] == ["a", "[::1]", "[::1]", "a", "::1"]
