"""What every request passes before it reaches a page: host, method and secret, then safe headers.

`dsh web` listens on loopback, where every local user can connect, and a browser will send a
request to it from any page it shows (DNS rebinding names the server under a foreign host name).
So a request is answered only when:

- its `Host` header names a loopback address (`localhost`, `127.0.0.1`, `[::1]`, any port, so
  that `ssh -L` forwarding works) or the address given with `--host`; else 403;
- it is a GET or a HEAD (nothing here writes); else 405;
- it carries the launch's secret, in the query (`?token=`, as the printed URL does: the answer
  sets it as a cookie and redirects to the same address without it) or in that cookie; else 403.

Every answer carries a Content-Security-Policy that lets the page load scripts, styles, images
and connections from this server only and runs no inline script or style, with headers that
keep it out of frames, caches and other sites' `Referer`.
"""

from __future__ import annotations

import hmac
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp as App
from starlette.types import Message, Receive, Scope, Send

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
"""The host names a request may carry whatever address the server listens on."""
ALLOWED_METHODS = frozenset({"GET", "HEAD"})
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""The pages' policy: everything from this server, nothing inline, nothing from anywhere else."""
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def cookie_name(port: int) -> str:
    """The secret's cookie: one per port, since a browser shares a host's cookies across its ports."""
    return f"dsh_web_{port}"


def host_name(header: str) -> str:
    """The host of a `Host` header, without its port (`[::1]:8000` is `[::1]`), lowercased."""
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        return header if end < 0 else header[: end + 1]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Guard:
    """ASGI middleware enforcing the rules above around `app`."""

    def __init__(self, app: App, *, token: str, port: int, extra_host: str | None = None) -> None:
        """`token` is the launch's secret; `extra_host` the address given with `--host`, if any."""
        self._app = app
        self._token = token.encode()
        self._cookie = cookie_name(port)
        hosts = set(LOOPBACK_NAMES)
        if extra_host is not None:
            hosts.add(host_name(f"[{extra_host}]" if ":" in extra_host else extra_host))
        self._hosts = frozenset(hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self._app(scope, receive, send)
            return
        headers = _headers(scope)
        if host_name(headers.get("host", "")) not in self._hosts:
            await _refuse(send, 403, "this server answers only on a loopback address or the one it was given")
            return
        if scope["method"] not in ALLOWED_METHODS:
            await _refuse(send, 405, "only GET and HEAD", allow=True)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = next((value for key, value in query if key == "token"), None)
        if given is not None and self._matches(given):
            rest = urlencode([(key, value) for key, value in query if key != "token"])
            path = scope.get("raw_path") or scope["path"].encode("utf-8")
            await _let_in(send, path + (f"?{rest}".encode("latin-1") if rest else b""), self._cookie, given)
            return
        if not self._matches(_cookies(headers.get("cookie", "")).get(self._cookie, "")):
            await _refuse(send, 403, "open the address dsh web printed: it carries this launch's secret")
            return
        await self._app(scope, receive, _with_security_headers(send))

    def _matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode("utf-8", "replace"), self._token)


def _headers(scope: Scope) -> dict[str, str]:
    return {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}


def _cookies(header: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            found.setdefault(name, value)
    return found


def _with_security_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
        await send(message)

    return sending


async def _refuse(send: Send, status: int, line: str, *, allow: bool = False) -> None:
    body = f"{line}\n".encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    if allow:
        headers.append((b"allow", b"GET, HEAD"))
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


async def _let_in(send: Send, location: bytes, cookie: str, token: str) -> None:
    # The secret leaves the address bar (and the history) at once; the cookie carries it from
    # here on, sent back to this server only (SameSite=Strict: no other site's page can make the
    # browser send it).
    set_cookie = f"{cookie}={token}; Path=/; HttpOnly; SameSite=Strict"
    headers = [(b"location", location), (b"set-cookie", set_cookie.encode("latin-1"))]
    await send({"type": "http.response.start", "status": 303, "headers": [*headers, *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": b""})
