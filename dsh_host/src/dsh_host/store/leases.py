"""What both stores keep of the leases they hand out: the ones not released yet, released when the store closes."""

from __future__ import annotations

import threading
from typing import Generic, Protocol, TypeVar


class _Releasable(Protocol):
    def release(self) -> None: ...


L = TypeVar("L", bound=_Releasable)


class OutstandingLeases(Generic[L]):
    """The leases a store handed out and nobody released yet. Thread-safe.

    A lease reports its release with `discard`; `release_all` releases the rest (the store is
    closing, and no lock may outlive it).
    """

    def __init__(self) -> None:
        self._held: set[L] = set()
        self._lock = threading.Lock()

    def add(self, lease: L) -> L:
        with self._lock:
            self._held.add(lease)
        return lease

    def discard(self, lease: L) -> None:
        with self._lock:
            self._held.discard(lease)

    def release_all(self) -> None:
        with self._lock:
            held, self._held = self._held, set()
        for lease in held:
            lease.release()
