"""How the agent calls its hooks, in one of three modes: emit, serial and waterfall.

- emit: a notification. Every implementation is called, each failure is logged and contained,
  and an awaitable an implementation returns is handed to `track` (the agent keeps it until it
  settles and logs its failure), so no listener can starve the others or veto anything.
- serial: implementations are awaited one after the other, in pluggy's call order; the first
  that returns a bail value (anything but None or False) ends the chain with that value.
- waterfall: a pluggy `firstresult` hook whose host default runs last (`trylast`) and whose
  wrappers (`wrapper=True`) wrap the rest; the result may be awaitable, so it is resolved.

Serial and waterfall failures propagate: the turn they run in fails.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from pluggy import HookCaller, HookImpl

from dsh_host.asyncs import resolve

if TYPE_CHECKING:
    pass

log = logging.getLogger("dsh.agent")

Track = Callable[[Awaitable[object], str], None]


def _plain(caller: HookCaller) -> list[HookImpl]:
    """The implementations in call order, wrappers left out (a notification has no result to wrap)."""
    return [impl for impl in reversed(caller.get_hookimpls()) if not (impl.hookwrapper or impl.wrapper)]


def _call(impl: HookImpl, arguments: Mapping[str, object]) -> object:
    return impl.function(*(arguments[name] for name in impl.argnames))


def emit(caller: HookCaller, arguments: Mapping[str, object], track: Track) -> None:
    """Notify every implementation of `caller` with `arguments`; never raises."""
    for impl in _plain(caller):
        try:
            result = _call(impl, arguments)
        except Exception:
            log.warning("%s of %s failed", caller.name, impl.plugin_name, exc_info=True)
            continue
        if inspect.isawaitable(result):
            track(result, f"{caller.name} of {impl.plugin_name}")


async def serial(caller: HookCaller, arguments: Mapping[str, object]) -> object:
    """Await each implementation in turn; returns the first bail value, or None when none bailed."""
    for impl in _plain(caller):
        result = await resolve(_call(impl, arguments))
        if result is not None and result is not False:
            return result
    return None


async def waterfall(caller: HookCaller, arguments: Mapping[str, object]) -> object:
    """The chain's result (the host default's when no plugin takes part), resolved."""
    return await resolve(caller(**arguments))
