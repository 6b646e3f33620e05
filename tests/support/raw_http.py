"""A raw TCP server for HTTP client tests: what a real server rarely does (hold a request
for ever, close an idle connection, reset one, drop a request it read), scripted per test."""

from __future__ import annotations

import socket
import threading

from support.waiting import WAIT


def read_request(conn: socket.socket, buffer: bytes) -> tuple[bytes, bytes, bytes] | None:
    """Read one request (``Content-Length`` bodies only) from ``conn``, after the bytes of
    ``buffer`` already read: ``(head, body, rest)``, or ``None`` if the client closed first."""
    while b"\r\n\r\n" not in buffer:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buffer += chunk
    head, _, buffer = buffer.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    while len(buffer) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buffer += chunk
    return head, buffer[:length], buffer[length:]


class RawHttpServer:
    """Accepts connections on a free loopback port and serves each with :meth:`serve` on a
    thread of its own; :meth:`close` stops accepting and joins every thread."""

    name = "raw-http"

    def __init__(self, path: str = "/") -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}{path}"
        self.lock = threading.Lock()
        self.connections = 0
        self.threads: list[threading.Thread] = []
        self.stop = threading.Event()
        self.acceptor = threading.Thread(target=self._accept, name=f"{self.name}-accept")
        self.acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if self.stop.is_set():  # the wake-up of close()
                conn.close()
                return
            with self.lock:
                self.connections += 1
            thread = threading.Thread(target=self._run, args=(conn,), name=f"{self.name}-conn")
            self.threads.append(thread)
            thread.start()

    def _run(self, conn: socket.socket) -> None:
        conn.settimeout(WAIT)
        try:
            self.serve(conn)
        except OSError:
            return
        finally:
            conn.close()

    def serve(self, conn: socket.socket) -> None:
        """Serve one connection (closed afterwards)."""
        raise NotImplementedError

    def close(self) -> None:
        self.stop.set()
        # wake the blocked accept(): closing the listener alone does not
        socket.create_connection(self.listener.getsockname(), timeout=WAIT).close()
        self.listener.close()
        self.acceptor.join(WAIT)
        for thread in self.threads:
            thread.join(WAIT)
