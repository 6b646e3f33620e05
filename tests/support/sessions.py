"""A :class:`~mcp_sync.Server` served over an in-memory pair with a connected
:class:`~mcp_sync.Client`, and fake servers.

* :func:`connected` yields a :class:`Connection` whose ``wire`` records the server's end.
* :func:`pair` yields a :class:`Pair` recording both ends (the feature tests).
* :class:`FakeServer` is a raw :class:`~mcp_sync.Endpoint` playing a (mis)behaving server.
* :func:`holding_server` is a server whose ``hold`` tool blocks until released or cancelled.

Ordering barrier used by the "no response was written" tests: with a pool of ONE worker, a
request's handling (handler, then the decision to write or drop its response) finishes before
the next request starts. So once the answer to a follow-up request has arrived, every message
the cancelled request could have produced would already be on the wire, in order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mcp_sync import Client, Context, Endpoint, McpError, Server, ServerHandle, memory_pair
from support.recording import RecordingTransport
from support.waiting import WAIT, wait_until


@dataclass
class Connection:
    client: Client
    handle: ServerHandle
    wire: RecordingTransport
    """The server side of the connection: ``wire.sent`` is what the server wrote."""

    def barrier(self) -> None:
        """Return once every message the server queued so far has reached the client.

        Waits until the server has no inbound request in flight, then pings: the ping's answer
        is written after everything queued before it and read in order by the client.
        """
        endpoint = self.handle.session.endpoint
        wait_until(lambda: endpoint.in_flight()[0] == 0, "the server to finish its requests")
        self.client.ping(timeout=WAIT)


@contextmanager
def _served(
    server: Server, server_workers: int | None, record_client: bool, client_options: dict[str, Any]
) -> Iterator[tuple[Client, ServerHandle, RecordingTransport, RecordingTransport | None]]:
    """Serve ``server`` over a memory pair; yield ``(client, handle, server_wire, client_wire)``
    (``client_wire`` only with ``record_client``); close both after."""
    client_end, server_end = memory_pair()
    server_wire = RecordingTransport(server_end)
    client_wire = RecordingTransport(client_end) if record_client else None
    handle = server.serve_in_thread(server_wire, max_workers=server_workers)
    client: Client | None = None
    try:
        client_options.setdefault("init_timeout", WAIT)
        # the 2025-11-25 session these helpers were written for (server-to-client requests,
        # ping as a barrier); a test of the 2026-07-28 era passes protocol="auto" or "modern"
        client_options.setdefault("protocol", "legacy")
        client = Client.connect(client_wire or client_end, **client_options)
        yield client, handle, server_wire, client_wire
    finally:
        if client is not None:
            client.close()
        else:
            client_end.close()
        handle.stop()


@contextmanager
def connected(
    server: Server, *, server_workers: int | None = None, **client_options: Any
) -> Iterator[Connection]:
    """Serve ``server`` over a memory pair and yield a connected client; close both after."""
    with _served(server, server_workers, False, client_options) as (client, handle, wire, _):
        yield Connection(client, handle, wire)


INIT_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "serverInfo": {"name": "fake", "version": "0"},
}


class FakeServer:
    """A raw endpoint playing the server side; records every line it receives.

    ``handler(request)`` answers requests (default: ``initialize`` with ``init_result``,
    everything else -32601). Runs on the endpoint's workers, gets the request's token.
    """

    def __init__(
        self, handler: Callable[[Any], Any] | None = None, init_result: dict[str, Any] | None = None
    ) -> None:
        self.client_transport, server_side = memory_pair()
        self.wire = RecordingTransport(server_side)
        self.init_result = dict(INIT_RESULT if init_result is None else init_result)
        self.endpoint = Endpoint(
            self.wire,
            request_handler=handler or self._default,
            inline_handlers={"ping": lambda _request: {}},
            max_workers=2,
            name="fake-server",
        )
        self.endpoint.start()

    def _default(self, request: Any) -> Any:
        if request.method == "initialize":
            return self.init_result
        raise McpError(-32601, f"Method not found: {request.method}")

    def close(self) -> None:
        self.client_transport.close()
        self.endpoint.close(WAIT)

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def holding_server(
    name: str, release: threading.Event | None = None, **options: Any
) -> tuple[Server, threading.Event]:
    """A server whose ``hold`` tool sets the returned event when it starts, then waits (bounded)
    for ``release`` -- or, without one, for its own cancellation."""
    server = Server(name, **options)
    started = threading.Event()

    @server.tool()
    def hold(ctx: Context) -> str:
        started.set()
        if release is None:
            ctx.wait(WAIT)
        else:
            release.wait(WAIT)
        return "done"

    return server, started


@dataclass
class Pair:
    client: Client
    handle: ServerHandle
    server_wire: RecordingTransport
    """The server's end: ``sent`` is what the server wrote."""
    client_wire: RecordingTransport
    """The client's end: ``received`` is what the client read, ``sent`` what it wrote."""

    @property
    def session(self) -> Any:
        return self.handle.session


@contextmanager
def pair(
    server: Server, *, server_workers: int | None = None, **client_options: Any
) -> Iterator[Pair]:
    """Serve ``server`` over an in-memory pair and yield a connected client recording both
    ends; close both after."""
    with _served(server, server_workers, True, client_options) as (
        client,
        handle,
        server_wire,
        client_wire,
    ):
        assert client_wire is not None
        yield Pair(client, handle, server_wire, client_wire)
