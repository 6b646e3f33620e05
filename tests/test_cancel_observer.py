"""``on_cancelled`` on Client, Server and Endpoint: every notifications/cancelled received is
seen (request id and reason), on the callback thread, after the request's token has fired.

Before the change there was no such hook: these tests could not be written.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any

from support.endpoints import Blocker, raw_server
from support.probes import ObservedCancels
from support.sessions import FakeServer, connected, holding_server
from support.waiting import WAIT, wait_until

from mcp_sync import Client


def test_endpoint_observer_sees_matched_unknown_and_reasonless_cancels_on_the_callback_thread():
    observed = ObservedCancels()
    blocker = Blocker()
    with raw_server({"block": blocker}) as s:
        token_state: list[bool] = []

        def observe(request_id: Any, reason: Any) -> None:
            if request_id == 1:
                token_state.append(blocker.request(1).token.cancelled)
            observed(request_id, reason)

        s.server.on_cancelled = observe
        s.peer.send({"jsonrpc": "2.0", "id": 1, "method": "block"})
        blocker.wait_started(1)
        s.peer.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 1, "reason": "user"},
            }
        )
        s.peer.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "nope"}}
        )
        s.peer.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": True}}
        )  # malformed
        s.peer.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 7, "reason": 3},
            }
        )
        seen = observed.wait_for(3)
        assert [(i, r) for i, r, _ in seen] == [(1, "user"), ("nope", None), (7, None)]
        assert all(name.endswith("-callbacks") for _, _, name in seen), seen
        assert token_state == [True], "the observer ran before the request's token fired"


def test_server_on_cancelled_sees_a_client_cancelling_a_tool_call():
    observed = ObservedCancels()
    server, started = holding_server("observer", on_cancelled=observed)
    with connected(server) as conn:
        pending = conn.client.call_tool_future("hold")
        assert started.wait(WAIT)
        pending.cancel("changed my mind")
        ((request_id, reason, thread),) = observed.wait_for(1)
        assert request_id == pending.request_id and reason == "changed my mind"
        assert "reader" not in thread


def test_client_on_cancelled_sees_the_server_cancelling_its_request():
    observed = ObservedCancels()
    fake = FakeServer()
    try:
        client = Client.connect(fake.client_transport, on_cancelled=observed, init_timeout=WAIT)
        try:
            fake.endpoint.notify(
                "notifications/cancelled", {"requestId": 12, "reason": "server gave up"}
            )
            ((request_id, reason, thread),) = observed.wait_for(1)
            assert (request_id, reason) == (12, "server gave up")
            assert thread.endswith("-callbacks")
            wait_until(
                lambda: (
                    client.stats().dropped.get("cancellation of an unknown or finished request")
                    == 1
                ),
                "the cancellation to be counted as dropped too",
            )
        finally:
            client.close()
    finally:
        fake.close()


# -- over real transports: a spawned stdio server, and Streamable HTTP ----------------------------
# A tool that asks the client for its roots; cancelling the tool call makes the server cancel
# that nested request: the server's observer sees the client's cancel, the client's sees the
# server's. The stdio server reports what its observer saw on stderr.
NESTED_SERVER = """
import sys
from mcp_sync import Context, Server

def observed(request_id, reason):
    sys.stderr.write(f"observed {request_id!r} {reason!r}\\n")
    sys.stderr.flush()

server = Server("observed", on_cancelled=observed)

@server.tool()
def ask(ctx: Context) -> str:
    ctx.session.list_roots()
    return "answered"

server.run()
"""


class BlockingRoots:
    """A client ``roots`` provider that blocks until released (the server cancels it first)."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> list[Any]:
        self.asked.set()
        assert self.release.wait(WAIT), "the test never released the roots request"
        return []


def test_both_observers_over_a_spawned_stdio_server():
    client_seen = ObservedCancels()
    server_lines: list[str] = []
    server_saw = threading.Event()

    def on_stderr(line: str) -> None:
        server_lines.append(line)
        if line.startswith("observed"):
            server_saw.set()

    roots = BlockingRoots()
    with (
        Client.stdio(
            [sys.executable, "-c", NESTED_SERVER],
            stderr=on_stderr,
            roots=roots,
            on_cancelled=client_seen,
            init_timeout=20,
            protocol="legacy",
        ) as client,
        contextlib.ExitStack() as stack,
    ):  # server-to-client requests
        stack.callback(roots.release.set)  # before close(), which waits for the roots handler
        pending = client.call_tool_future("ask")
        assert roots.asked.wait(WAIT), "the server did not ask for roots"
        pending.cancel("user stop")
        assert server_saw.wait(WAIT), (
            f"the server's observer saw nothing; its stderr: {server_lines}"
        )
        assert f"observed {pending.request_id!r} 'user stop'" in server_lines
        ((_, reason, thread),) = client_seen.wait_for(1)
        assert reason and thread.endswith("-callbacks"), client_seen.seen
