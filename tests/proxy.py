"""A TCP proxy on loopback that a test can cut and restore: a database server that goes away and comes back.

Cut, every connection through it is closed and its port refuses new ones (as a stopped server's
does); restored, it listens on the same port again.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    """Forwards connections on `127.0.0.1:port` to `target` until cut."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.restore()

    def restore(self) -> None:
        """Listen (again, on the same port) and forward every connection."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="proxy-accept", daemon=True).start()

    def cut(self) -> None:
        """Close every forwarded connection and stop listening."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, []
        for sock in [listener, *sockets]:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, sink), name="proxy-pump", daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    for sock in (source, sink):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
