"""Waiting in a test for the moment it needs, by the events that mark it (never by time or ticks)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from dsh_host import Event, Session


async def appended(session: Session, predicate: Callable[[Event], object]) -> Event:
    """The first event of `session` for which `predicate(event)` is true: one already in the log,
    else the next such event appended.

    It waits on the session's own notification of each append (`Session.subscribe`), so a test
    resumes at the moment it needs (a model that started streaming, a tool call logged) whatever
    order the event loop runs tasks in.
    """
    for event in session.events:
        if predicate(event):
            return event
    found: asyncio.Future[Event] = asyncio.get_running_loop().create_future()

    def listener(_: Session, event: Event) -> None:
        if not found.done() and predicate(event):
            found.set_result(event)

    unsubscribe = session.subscribe(listener)
    try:
        return await found
    finally:
        unsubscribe()
