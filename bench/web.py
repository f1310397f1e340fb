"""`dsh web` benchmarks: each page against the session-query read it shows, in the same run.

The pages are served by uvicorn on loopback (in a thread of this process) and fetched over HTTP
with the launch's secret as a cookie, as a browser fetches them; each baseline is the read the
page rests on, in process, on the same store.

- `web_list_10k`: the list page (50 rows) over 10,000 sessions against `list_page(limit=50)`.
- `web_search_100k`: the search page for a rare phrase over 100,000 sessions against
  `search_candidates(limit=50)` of the same words.
- `web_session_200k`: the page of the newest 200 messages of a 200,000-event session against
  `read_surface_page(limit=200)` of them.
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
from pathlib import Path

import httpx
import uvicorn

from bench.mcp import dsh_path
from bench.search import QUERIES, build
from bench.store import compacted_session, persist, start_host
from bench.timing import Figure, Timing, interleaved
from dsh_host.host import Host
from dsh_host.query import SessionQuery
from dsh_host.session.events import Event
from dsh_host.web.app import build_app
from dsh_host.web.cli import bind, make_reader
from dsh_host.web.guard import Guard, cookie_name
from dsh_host.web.jinja import LIVE_POLL_MS

TOKEN = "bench-secret"
LIVE_SAMPLES = 10


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


def floor(client: httpx.Client) -> None:
    """The HTTP floor: a GET the guard lets through to no route (Starlette's 404)."""
    assert client.get("/no-such-page").status_code == 404


def floor_note(timing: Timing) -> str:
    return f"; an unrouted GET over the same connection (the HTTP floor) takes {timing.best * 1000:.2f} ms"


def fetch(client: httpx.Client, path: str, expect: str) -> None:
    answer = client.get(path)
    assert answer.status_code == 200 and expect in answer.text, (answer.status_code, path)


def page_vs_read(
    host: Host, path: str, expect: str, read: Callable[[SessionQuery], Awaitable[Sized]], size: int
) -> tuple[Timing, Timing, Timing]:
    """The read a page rests on (in process, `size` results), the page over HTTP, and the floor."""
    query = host.services.session_query
    loop = asyncio.new_event_loop()

    def in_process() -> None:
        assert len(loop.run_until_complete(read(query))) == size

    try:
        with serving(host) as client:
            baseline, page, bare = interleaved(
                in_process, lambda: fetch(client, path, expect), lambda: floor(client), rounds=10
            )
    finally:
        loop.close()
    return baseline, page, bare


def page_figures(workdir: Path) -> Iterator[Figure]:
    home = workdir / "pages"
    home.mkdir()
    build(home / "sessions.sqlite3", 10_000, seed=3).close()
    with web_host(home) as host:

        async def listing(query: SessionQuery) -> Sized:
            return (await query.list_page(limit=50)).records

        baseline, value, bare = page_vs_read(host, "/", "Refactor module 9999", listing, 50)
    yield Figure.timed(
        "web_list_10k",
        value,
        baseline,
        target=1.5,
        note="GET / (50 rows) over 10,000 sessions vs session_query.list_page(limit=50) in process" + floor_note(bare),
    )

    home = workdir / "search"
    home.mkdir()
    build(home / "sessions.sqlite3", 100_000, seed=4).close()
    phrase = QUERIES["rare"][0]
    with web_host(home) as host:

        async def search(query: SessionQuery) -> Sized:
            return await query.search_candidates(phrase, target_id=None, target_cwd=None, limit=50, group_by_cwd=False)

        path = "/search?q=" + phrase.replace(" ", "+")
        baseline, value, bare = page_vs_read(host, path, "<mark>", search, 50)
    yield Figure.timed(
        "web_search_100k",
        value,
        baseline,
        target=1.3,
        note="GET /search for a rare phrase over 100,000 sessions vs session_query.search_candidates(limit=50)"
        + floor_note(bare),
    )


def session_figures(workdir: Path) -> Iterator[Figure]:
    from dsh_session_reference import encode_uri

    home = workdir / "session"
    with start_host(home) as host:
        persist(host, "log-200k", compacted_session(200_000))
    uri = encode_uri("log-200k")
    with web_host(home) as host:

        async def newest(query: SessionQuery) -> Sized:
            return (await query.read_surface_page("log-200k", limit=200)).entries

        baseline, value, bare = page_vs_read(host, f"/s/{uri}", "record 1999 ", newest, 200)
        yield Figure.timed(
            "web_session_200k",
            value,
            baseline,
            target=1.2,
            note="GET of a 200,000-event session's page (newest 200 messages) vs "
            "session_query.read_surface_page(limit=200)" + floor_note(bare),
        )
        with serving(host) as client:
            yield live_figure(host, client, uri)


def live_figure(host: Host, client: httpx.Client, uri: str) -> Figure:
    """Append a message at a random phase of a page's polling; time until a poll has it."""
    header, lines = host.store.read_lines("log-200k")
    seq = len(lines)
    position = client.get(f"/s/{uri}/after").json()["position"]
    delays = []
    for sample in range(LIVE_SAMPLES):
        turn = 5_000 + sample
        text = f"live message {sample}"
        user = {"kind": "user"}
        events = [
            Event("turn/start", seq, 0, {"turn": turn, "trigger": {"kind": "message", "source": user}}),
            Event("user/message", seq + 1, 0, {"content": [{"type": "text", "text": text}], "source": user}, "append"),
            Event("turn/end", seq + 2, 0, {"turn": turn, "reason": {"kind": "completed"}}),
        ]
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
