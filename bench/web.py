"""`dsh web` benchmarks: each page against the session-query read it shows, in the same run.

A page's figure is the page served in process: the guarded application (`Guard` around the
Starlette app, the whole middleware stack `dsh web` serves) called as an ASGI application with a
scope, `receive` and `send`, with the launch's secret as a cookie, on this process's event loop
and no socket. That is what the pages add to their reads. Each figure's note also gives every
read the page makes, together, and the page against them; the same page fetched over HTTP from
uvicorn on loopback (in a thread of this process, in a run of its own, as a browser fetches it)
and that connection's floor (an unrouted GET: uvicorn, HTTP and the guard with no
page), which a browser pays on top and which is not the pages' to cut, and the in-process floor
(the same unrouted GET in process). The baseline is the read the page rests on, in process, on
the same store and the same event loop. Rendered messages and rows are kept by the app (a
logged message never changes; the list's rows repeat on every refresh and poll), so the figures
are of a page seen before, as its polls and refreshes are.

- `web_list_10k`: the list page (50 rows) over 10,000 sessions against `list_page(limit=50)`.
- `web_search_100k`: the search page for a rare phrase over 100,000 sessions against
  `search_candidates(limit=50)` of the same words.
- `web_session_200k`: the page of the newest 200 messages of a 200,000-event session against
  `read_surface_page(limit=200)` of them.
- `web_session_200k_first_view` (report): the same page the first time an app shows it (its
  messages' Markdown and markup rendered, then kept), against the same read.
- `web_live_seconds` (report): from a message's append to the store until a client polling as
  an open page polls (`LIVE_POLL_MS`, starting at a random phase) has it; the mean of 10.
- `web_startup_seconds` (report): `dsh web --no-open --port 0` from spawn to its first answered
  request, against the start-up floor of any `dsh` command (`bench/startup_floor.py`).
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sized
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from starlette.types import Message

from bench.mcp import dsh_path
from bench.search import QUERIES, build
from bench.store import compacted_session, persist, start_host
from bench.timing import Figure, Timing, best_of, interleaved, paired_ratio
from dsh_host.host import Host
from dsh_host.query import SessionQuery
from dsh_host.session.events import Event
from dsh_host.store.base import CandidateRow
from dsh_host.web.app import build_app
from dsh_host.web.cli import bind, make_reader
from dsh_host.web.guard import Guard, cookie_name
from dsh_host.web.jinja import LIVE_POLL_MS

TOKEN = "bench-secret"
IN_PROCESS_PORT = 8767
UNROUTED = "/no-such-page"
"""A GET the guard lets through to no route (Starlette's 404): the floor of any page."""
LIVE_SAMPLES = 10
FIRST_VIEWS = 5


def web_host(home: Path) -> Host:
    """A host on `home` with session-reference and the web plugin mounted."""
    import dsh_host.web
    from dsh_host.config import load_config

    config = load_config(env={"DSH_HOME": str(home), "DSH_LOAD_PLUGINS": "session-reference"}, cwd=home)
    return Host.start(config, plugins={"web": dsh_host.web})


@contextmanager
def serving(host: Host) -> Iterator[httpx.Client]:
    """The guarded pages of `host` on a loopback port; a client signed in to them."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    app = Guard(build_app(make_reader(host)), token=TOKEN, port=port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"cookie": f"{cookie_name(port)}={TOKEN}"})
    try:
        while client.get("/static/app.js").status_code != 200:
            pass
        yield client
    finally:
        client.close()
        server.should_exit = True
        thread.join()


class InProcess:
    """The guarded app of `host` called in this process on `loop`: an ASGI scope, `receive` and
    `send`, no socket; its lifespan started as uvicorn starts it."""

    def __init__(self, host: Host, loop: asyncio.AbstractEventLoop) -> None:
        self._app = Guard(build_app(make_reader(host)), token=TOKEN, port=IN_PROCESS_PORT)
        self._loop = loop
        self._headers = [
            (b"host", f"127.0.0.1:{IN_PROCESS_PORT}".encode()),
            (b"cookie", f"{cookie_name(IN_PROCESS_PORT)}={TOKEN}".encode()),
        ]
        self._lifespan: asyncio.Queue[Message] = asyncio.Queue()
        self._said: asyncio.Queue[Message] = asyncio.Queue()
        self._running: asyncio.Task[None] | None = None

    def __enter__(self) -> InProcess:
        async def start() -> Message:
            self._running = asyncio.ensure_future(
                self._app({"type": "lifespan", "asgi": {"version": "3.0"}}, self._lifespan.get, self._said.put)
            )
            await self._lifespan.put({"type": "lifespan.startup"})
            return await self._said.get()

        said = self._loop.run_until_complete(start())
        assert said["type"] == "lifespan.startup.complete", said
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            await self._lifespan.put({"type": "lifespan.shutdown"})
            assert self._running is not None
            await self._running

        self._loop.run_until_complete(stop())

    def get(self, target: str) -> tuple[int, bytes]:
        """The status and body of a GET of `target` (a path with its query)."""
        return self._loop.run_until_complete(self._get(target))

    async def _get(self, target: str) -> tuple[int, bytes]:
        path, _, query = target.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": self._headers,
            "client": ("127.0.0.1", 50_000),
            "server": ("127.0.0.1", IN_PROCESS_PORT),
        }
        status = 0
        body: list[bytes] = []

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            else:
                body.append(message.get("body", b""))

        await self._app(scope, receive, send)
        return status, b"".join(body)


@dataclass(frozen=True)
class PageTimes:
    """A page's timings: its read, the page in process, the unrouted GET in process (the floor)
    and every read the page makes together (as it makes them: at once, on worker threads), in
    one interleaved run; then its read, the page over HTTP and the unrouted GET over HTTP in
    another, with the server running (its thread would weigh on the first run's times)."""

    read: Timing
    page: Timing
    floor: Timing
    reads: Timing
    http_read: Timing
    http_page: Timing
    http_floor: Timing

    def figure(self, name: str, target: float, what: str) -> Figure:
        """The figure of the page in process against its read; the rest in the note."""
        ms = 1000
        return Figure.timed(
            name,
            self.page,
            self.read,
            target=target,
            note=f"{what}, the guarded app called in process (ASGI, no socket); "
            f"an unrouted GET in process takes {self.floor.best * ms:.3f} ms; every read the page makes, "
            f"together, takes {self.reads.best * ms:.3f} ms "
            f"(the page is {paired_ratio(self.page, self.reads):.2f}x them). "
            f"Over HTTP to uvicorn on loopback the page takes {self.http_page.best * ms:.2f} ms "
            f"({paired_ratio(self.http_page, self.http_read):.2f}x the read), of which the connection's floor "
            f"(an unrouted GET over HTTP) is {self.http_floor.best * ms:.2f} ms",
        )


def answered(status_and_body: tuple[int, bytes], expect: str, path: str) -> None:
    status, body = status_and_body
    assert status == 200 and expect.encode() in body, (status, path)


def unrouted(direct: InProcess) -> None:
    assert direct.get(UNROUTED)[0] == 404


def page_vs_read(
    host: Host,
    path: str,
    expect: str,
    read: Callable[[SessionQuery], Awaitable[Sized]],
    size: int,
    reads: Callable[[SessionQuery], Awaitable[object]],
) -> PageTimes:
    """The read a page rests on (in process, `size` results), the page in process and over HTTP,
    the unrouted GET in process and over HTTP, and all of the page's `reads`."""
    query = host.services.session_query
    loop = asyncio.new_event_loop()

    def in_process() -> None:
        assert len(loop.run_until_complete(read(query))) == size

    def all_reads() -> None:
        loop.run_until_complete(reads(query))

    def over_http(client: httpx.Client, target: str, status: int) -> None:
        answer = client.get(target)
        assert answer.status_code == status, (answer.status_code, target)

    try:
        with InProcess(host, loop) as direct:
            answered(direct.get(path), expect, path)
            times = interleaved(
                in_process,
                lambda: answered(direct.get(path), expect, path),
                lambda: unrouted(direct),
                all_reads,
                rounds=10,
            )
        with serving(host) as client:
            over_http(client, path, 200)
            times += interleaved(
                in_process, lambda: over_http(client, path, 200), lambda: over_http(client, UNROUTED, 404), rounds=10
            )
    finally:
        loop.close()
    return PageTimes(*times)


def page_figures(workdir: Path) -> Iterator[Figure]:
    home = workdir / "pages"
    home.mkdir()
    build(home / "sessions.sqlite3", 10_000, seed=3).close()
    with web_host(home) as host:

        async def listing(query: SessionQuery) -> Sized:
            return (await query.list_page(limit=50)).records

        async def list_reads(query: SessionQuery) -> object:
            return await asyncio.gather(listing(query), query.list_cwds())

        times = page_vs_read(host, "/", "Refactor module 9999", listing, 50, list_reads)
    yield times.figure(
        "web_list_10k", 1.5, "GET / (50 rows) over 10,000 sessions vs session_query.list_page(limit=50) in process"
    )

    home = workdir / "search"
    home.mkdir()
    build(home / "sessions.sqlite3", 100_000, seed=4).close()
    phrase = QUERIES["rare"][0]
    with web_host(home) as host:

        async def search(query: SessionQuery) -> list[CandidateRow]:
            return await query.search_candidates(phrase, target_id=None, target_cwd=None, limit=50, group_by_cwd=False)

        path = "/search?q=" + phrase.replace(" ", "+")

        async def search_reads(query: SessionQuery) -> object:
            return [query.agent_name(found.id) for found in await search(query)]

        times = page_vs_read(host, path, "<mark>", search, 50, search_reads)
    yield times.figure(
        "web_search_100k",
        1.3,
        "GET /search for a rare phrase over 100,000 sessions vs session_query.search_candidates(limit=50)",
    )


def session_figures(workdir: Path) -> Iterator[Figure]:
    from dsh_session_reference import encode_uri

    home = workdir / "session"
    with start_host(home) as host:
        persist(host, "log-200k", compacted_session(200_000))
        persist(host, "tiny", one_message("a page to render the templates with"))
    uri = encode_uri("log-200k")
    with web_host(home) as host:

        async def newest(query: SessionQuery) -> Sized:
            return (await query.read_surface_page("log-200k", limit=200)).entries

        # The page's one read is the baseline itself: its page carries the header and title.
        times = page_vs_read(host, f"/s/{uri}", "record 1999 ", newest, 200, newest)
        yield times.figure(
            "web_session_200k",
            1.2,
            "GET of a 200,000-event session's page (newest 200 messages) vs session_query.read_surface_page(limit=200)",
        )
        yield first_view_figure(host, uri, newest)
        with serving(host) as client:
            yield live_figure(host, client, uri)


def one_message(text: str, *, seq: int = 0, turn: int = 1) -> list[Event]:
    """Turn `turn` of a log holding one user message, its events numbered from `seq`."""
    user = {"kind": "user"}
    return [
        Event("turn/start", seq, 0, {"turn": turn, "trigger": {"kind": "message", "source": user}}),
        Event("user/message", seq + 1, 0, {"content": [{"type": "text", "text": text}], "source": user}, "append"),
        Event("turn/end", seq + 2, 0, {"turn": turn, "reason": {"kind": "completed"}}),
    ]


def first_view_figure(host: Host, uri: str, newest: Callable[[SessionQuery], Awaitable[Sized]]) -> Figure:
    """A session's page the app has not rendered yet (each sample a new app whose templates one
    page of another session has compiled) against the same read, each read just before."""
    from dsh_session_reference import encode_uri

    query = host.services.session_query
    loop = asyncio.new_event_loop()
    reads, pages = [], []
    try:
        for _ in range(FIRST_VIEWS):
            with InProcess(host, loop) as direct:
                answered(direct.get(f"/s/{encode_uri('tiny')}"), "a page to render", "tiny")
                reads.append(best_of(lambda: loop.run_until_complete(newest(query)), repeat=3))
                start = time.perf_counter()
                answered(direct.get(f"/s/{uri}"), "record 1999 ", uri)
                pages.append(time.perf_counter() - start)
    finally:
        loop.close()
    return Figure.timed(
        "web_session_200k_first_view",
        Timing(tuple(pages)),
        Timing(tuple(reads)),
        note=f"the same page the first time the app shows it (its 200 messages' Markdown and markup rendered, "
        f"then kept) vs the same read (report; best of {FIRST_VIEWS} apps)",
    )


def live_figure(host: Host, client: httpx.Client, uri: str) -> Figure:
    """Append a message at a random phase of a page's polling; time until a poll has it."""
    header, lines = host.store.read_lines("log-200k")
    seq = len(lines)
    position = client.get(f"/s/{uri}/after").json()["position"]
    delays = []
    for sample in range(LIVE_SAMPLES):
        text = f"live message {sample}"
        events = one_message(text, seq=seq, turn=5_000 + sample)
        # The page polls every LIVE_POLL_MS; the message lands anywhere in that cycle.
        next_poll = time.perf_counter() + random.uniform(0, LIVE_POLL_MS / 1000)
        appended = time.perf_counter()
        host.store.append(header, events)
        seq += len(events)
        while True:
            time.sleep(max(0.0, next_poll - time.perf_counter()))
            news = client.get(f"/s/{uri}/after", params={"position": position}).json()
            if text in news["html"]:
                delays.append(time.perf_counter() - appended)
                position = news["position"]
                break
            next_poll += LIVE_POLL_MS / 1000
    mean = sum(delays) / len(delays)
    return Figure(
        "web_live_seconds",
        mean,
        LIVE_POLL_MS / 1000,
        note=f"seconds from a store append to an open page's poll having it (mean of {LIVE_SAMPLES}); "
        f"baseline: the poll interval",
    )


def startup_figure(workdir: Path) -> Figure:
    """Spawn to the first answered request of `dsh web`, against the start-up floor."""
    env = {**os.environ, "DSH_HOME": str(workdir / "startup"), "DSH_LOAD_PLUGINS": "session-reference,web"}
    floor_script = Path(__file__).with_name("startup_floor.py")

    def floor() -> None:
        subprocess.run([sys.executable, str(floor_script)], check=True, env=env)

    def first_answer() -> None:
        process = subprocess.Popen(
            [dsh_path(), "web", "--no-open", "--port", "0"], env=env, stdout=subprocess.PIPE, text=True
        )
        try:
            assert process.stdout is not None
            url = process.stdout.readline().split()[-1]
            assert httpx.get(url, follow_redirects=True).status_code == 200
        finally:
            process.terminate()
            process.wait()

    baseline, value = interleaved(floor, first_answer, rounds=5, repeat=1)
    return Figure.timed(
        "web_startup_seconds",
        value,
        baseline,
        note="`dsh web --no-open --port 0` from spawn to its first answered page vs the start-up floor (report)",
    )


def figures(workdir: Path) -> Iterator[Figure]:
    yield from page_figures(workdir)
    yield from session_figures(workdir)
    yield startup_figure(workdir)
