"""``on_cancelled`` over Streamable HTTP: the server's observer sees the client's cancel (a
POST), and the client's sees the server cancelling the request it had sent the client."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from support.http import legacy_http
from support.probes import ObservedCancels
from support.waiting import WAIT

from mcp_sync import Context, Server
from mcp_sync.http.embedded_server import HttpServerHandle


def test_both_observers_see_the_cancellations_over_http(
    serve: Callable[..., HttpServerHandle],
) -> None:
    server_seen, client_seen = ObservedCancels(), ObservedCancels()
    server = Server("observed", on_cancelled=server_seen)
    asked, release = threading.Event(), threading.Event()

    @server.tool()
    def ask(ctx: Context) -> str:
        ctx.session.list_roots()  # cancelled on the wire when this call is
        return "answered"

    def roots() -> list[Any]:
        asked.set()
        assert release.wait(WAIT), "the test never released the roots request"
        return []

    handle = serve(server)
    try:
        with legacy_http(handle.url, roots=roots, on_cancelled=client_seen) as client:
            pending = client.call_tool_future("ask")
            assert asked.wait(WAIT), "the server did not ask for roots"
            pending.cancel("user stop")
            assert [(i, r) for i, r, _ in server_seen.wait_for(1)] == [
                (pending.request_id, "user stop")
            ]
            ((_, reason, _),) = client_seen.wait_for(1)
            assert reason, client_seen.seen
            release.set()  # before close(), which waits for the roots handler
    finally:
        release.set()
