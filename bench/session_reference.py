"""Session-reference benchmarks: `prepare` over three big persisted sessions, and candidates.

- `prepare_3x200k`: one `prepare` with three references to three persisted 200,000-event
  sessions (2,000 surface messages each, enough text that retention drops and cuts with the
  default 65,536-byte budget), against the slowest single `read_surface` of the three, each
  read through the query service in the same run. `prepare` reads all three sources in one
  request that decodes no event (the store keeps each surface node's display text), and
  retention sizes only the messages that can stay, so it costs little more than one full read.
- `list_candidates_10k`: `list_candidates` with a query over 10,000 titled sessions, against
  `list_sessions` of the same corpus.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.timing import Figure, Timing, interleaved
from dsh_host.config import load_config
from dsh_host.host import Host
from dsh_host.session.events import Event, SessionHeader

EVENTS_PER_SESSION = 200_000
SURFACE_MESSAGES = 2_000
SOURCES = ("bench-source-a", "bench-source-b", "bench-source-c")
CANDIDATE_SESSIONS = 10_000

# About 190 bytes a message (ASCII, some `<` to escape, a few multi-byte characters), so the
# 2,000 messages of a source hold about 380 KB and retention drops most of them.
MESSAGE_WORDS = "build step <ok> naïve café 漢字 exit=0 elapsed=12ms retry later; "


def _message_text(session_index: int, number: int) -> str:
    return f"[{session_index}:{number}] " + MESSAGE_WORDS * 3


def _chunk_data(turn: int, number: int) -> dict[str, Any]:
    return {"turn": turn, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": f"d{number} "}}


def build_events(session_index: int, events: int = EVENTS_PER_SESSION, messages: int = SURFACE_MESSAGES) -> list[Event]:
    """A valid log of `events` events of which `messages` are surface messages.

    User and assistant messages alternate; between them the log holds `assistant/chunk`
    events (log-only), as a streamed turn leaves them.
    """
    per_message = events // messages
    out: list[Event] = []
    seq = 0
    for number in range(messages):
        turn = number // 2 + 1
        text = {"type": "text", "text": _message_text(session_index, number)}
        if number % 2 == 0:
            data: dict[str, Any] = {"content": [text], "source": {"kind": "user"}}
            out.append(Event("user/message", seq, seq, data, "append"))
        else:
            data = {
                "turn": turn,
                "step": 1,
                "content": [text],
                "provenance": {"provider": "bench", "model": "b"},
            }
            out.append(Event("assistant/message", seq, seq, data, "append"))
        seq += 1
        for chunk in range(per_message - 1):
            out.append(Event("assistant/chunk", seq, seq, _chunk_data(turn, chunk)))
            seq += 1
    return out


def _start_host(workdir: Path) -> Host:
    env = {"DSH_HOME": str(workdir), "DSH_LOAD_PLUGINS": "session-reference"}
    return Host.start(load_config(env=env, cwd=workdir))


def _runner(loop: asyncio.AbstractEventLoop, make: Any) -> Any:
    return lambda: loop.run_until_complete(make())


def prepare_figure(workdir: Path) -> Figure:
    host = _start_host(workdir / "prepare")
    loop = asyncio.new_event_loop()
    try:
        for index, session_id in enumerate(SOURCES):
            header = SessionHeader(id=session_id, created_at=index, cwd=f"/bench/{index}")
            host.store.import_log(header, build_events(index))
        target = host.sessions.create("/bench/target", "bench-target")
        query = host.services.session_query
        service = host.services.session_references
        references = [{"sessionId": session_id} for session_id in SOURCES]
        content = [{"type": "text", "text": "compare @a @b @c"}]

        # Warm up: every worker thread opens its connection, every page is in the OS cache.
        prepared = loop.run_until_complete(service.prepare(target, content, references))
        meta = prepared.contexts[0]["meta"]["references"]
        assert all(ref["truncated"] and ref["omittedMessages"] > 0 for ref in meta), meta
        for session_id in SOURCES:
            snapshot = loop.run_until_complete(query.read_surface(session_id))
            assert len(snapshot.events) == SURFACE_MESSAGES
            assert snapshot.captured_through_seq == EVENTS_PER_SESSION - 1

        *reads, value = interleaved(
            *(_runner(loop, lambda sid=sid: query.read_surface(sid)) for sid in SOURCES),
            _runner(loop, lambda: service.prepare(target, content, references)),
        )
        baseline = Timing.slowest(*reads)
        retained = sum(ref["retainedMessages"] for ref in meta)
        return Figure.timed(
            "prepare_3x200k",
            value,
            baseline,
            target=1.5,
            note=(
                f"prepare() of 3 references to persisted {EVENTS_PER_SESSION:,}-event sessions "
                f"({SURFACE_MESSAGES:,} surface messages each; {retained} retained in all) vs the "
                "slowest single read_surface of the three"
            ),
        )
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
        host.close()


def candidates_figure(workdir: Path) -> Figure:
    host = _start_host(workdir / "candidates")
    loop = asyncio.new_event_loop()
    try:
        for number in range(CANDIDATE_SESSIONS):
            cwd = None if number % 10 == 0 else f"/projects/p{number % 7}"
            header = SessionHeader(id=f"session-{number:05d}", created_at=number, cwd=cwd)
            title = {
                "title": f"Chat {number} about topic {number % 13}",
                "messageSeqs": [0],
                "source": {"kind": "fallback"},
            }
            user = {"content": [{"type": "text", "text": f"hello {number}"}], "source": {"kind": "user"}}
            events = [Event("user/message", 0, 0, user, "append"), Event("session/title", 1, 1, title)]
            host.store.import_log(header, events)
        # A target whose cwd no listed session shares: every record is filtered and ranked
        # (a full same-cwd group would let ranking stop early).
        target = host.sessions.create("/projects/elsewhere", "candidates-target")
        query = host.services.session_query
        service = host.services.session_references

        found = loop.run_until_complete(service.list_candidates(target, "topic 1", limit=50))
        assert len(found) == 50 and all("topic 1" in c.label for c in found), found[:3]
        listed = loop.run_until_complete(query.list_sessions())
        assert len(listed) == CANDIDATE_SESSIONS + 1

        baseline, value = interleaved(
            _runner(loop, query.list_sessions),
            _runner(loop, lambda: service.list_candidates(target, "topic 1", limit=50)),
        )
        return Figure.timed(
            "list_candidates_10k",
            value,
            baseline,
            target=1.5,
            note=(
                f"list_candidates(query, limit 50) over {CANDIDATE_SESSIONS:,} titled sessions, none in "
                "the target's cwd, vs list_sessions()"
            ),
        )
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
        host.close()


def figures(workdir: Path) -> Iterator[Figure]:
    yield prepare_figure(workdir)
    yield candidates_figure(workdir)


if __name__ == "__main__":  # pragma: no cover - manual runs
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for figure in figures(Path(tmp)):
            print(json.dumps(figure.as_json()))
