"""On the plain ``http://`` path, the answers of futures (``call_tool_future``, ``submit``)
are read by one selector thread (mcp_sync.http.plain_response_loop), not by a thread per
open response: progress arrives, cancels close the stream, close() ends every answer, and a
full loop leaves the answer to the reader that wrote the request."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from support.http import make_server, run_waitress
from support.probes import GateProbe
from support.waiting import WAIT, wait_until

from mcp_sync import Client
from mcp_sync.cancel import CancelToken
from mcp_sync.errors import Cancelled, ConnectionClosed
from mcp_sync.http import McpWsgiApp
from mcp_sync.http.client_transport import HttpClientTransport
from mcp_sync.http.plain_response_loop import ResponseLoop

MODERN = "2026-07-28"
LOOP = "mcp_sync-http-responses"
READER = "mcp_sync-http-reader"


@pytest.fixture
def served() -> Iterator[tuple[str, GateProbe]]:
    probe = GateProbe()
    # long calls turn into SSE streams with keep-alive comments: a closed stream is seen
    app = McpWsgiApp(make_server(probe), path="/mcp", modern_json_window=0.05, keepalive=0.05)
    base, stop = run_waitress(app, threads=16)
    try:
        yield base + "/mcp", probe
    finally:
        app.close()
        stop()


def loop_of(client: Client) -> ResponseLoop:
    transport = client.transport
    assert isinstance(transport, HttpClientTransport) and transport._loop is not None
    return transport._loop


def threads_named(name: str) -> int:
    return sum(1 for thread in threading.enumerate() if thread.name == name)


def busy_readers(client: Client) -> int:
    transport = client.transport
    assert isinstance(transport, HttpClientTransport)
    readers = transport._readers
    with readers._lock:
        return len(readers._threads) - readers._idle


def test_futures_in_flight_are_read_by_one_thread(served: tuple[str, GateProbe]) -> None:
    url, probe = served
    with Client.http(url, protocol=MODERN) as client:
        calls = [client.call_tool_future("gated", {"tag": f"g{n}"}) for n in range(6)]
        for n in range(6):
            assert probe.started(f"g{n}").wait(WAIT)
        loop = loop_of(client)
        wait_until(lambda: loop.open_responses == 6, "six answers open on the loop")
        wait_until(lambda: busy_readers(client) == 0, "no reader held by an open answer")
        assert threads_named(LOOP) == 1
        for n in range(6):
            probe.release(f"g{n}")
        texts = sorted(call.result(WAIT).content[0].text for call in calls)
        assert texts == [f"g{n}: released" for n in range(6)]
        wait_until(lambda: loop.open_responses == 0, "the loop to let the answers go")
    assert threads_named(LOOP) == 0


def test_progress_on_a_futures_stream_arrives_through_the_loop(
    served: tuple[str, GateProbe],
) -> None:
    url, probe = served
    seen: list[tuple[float, str]] = []
    two = threading.Event()

    def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, threading.current_thread().name))
        if progress == 2:
            two.set()

    with Client.http(url, protocol=MODERN) as client:
        call = client.call_tool_future("progress_gated", {"tag": "p"}, on_progress=on_progress)
        assert two.wait(WAIT)
        assert loop_of(client).open_responses == 1
        probe.release("p")
        assert call.result(WAIT).content[0].text == "p: done"
    assert [progress for progress, _ in seen] == [1, 2, 3]


def test_a_cancelled_future_closes_its_stream_on_the_loop(served: tuple[str, GateProbe]) -> None:
    url, probe = served
    with Client.http(url, protocol=MODERN) as client:
        token = CancelToken()
        call = client.call_tool_future("gated", {"tag": "c"}, cancel_token=token)
        assert probe.started("c").wait(WAIT)
        loop = loop_of(client)
        wait_until(lambda: loop.open_responses == 1, "the answer open on the loop")
        token.cancel()
        with pytest.raises(Cancelled):
            call.result(WAIT)
        assert probe.cancelled("c").wait(WAIT)  # the server's handler saw its cancellation
        wait_until(lambda: loop.open_responses == 0, "the loop to drop the cancelled answer")
        assert client.call_tool("echo", {"text": "after"}).content[0].text == "after"


def test_close_ends_the_answers_open_on_the_loop_and_its_thread(
    served: tuple[str, GateProbe],
) -> None:
    url, probe = served
    client = Client.http(url, protocol=MODERN)
    calls = [client.call_tool_future("gated", {"tag": f"x{n}"}) for n in range(3)]
    for n in range(3):
        assert probe.started(f"x{n}").wait(WAIT)
    loop = loop_of(client)
    wait_until(lambda: loop.open_responses == 3, "three answers open on the loop")
    client.close()
    for call in calls:
        with pytest.raises(ConnectionClosed):
            call.result(WAIT)
    for n in range(3):
        assert probe.cancelled(f"x{n}").wait(WAIT)
    assert threads_named(LOOP) == 0


def test_a_full_loop_leaves_the_answer_to_the_reader_that_wrote_the_request(
    served: tuple[str, GateProbe], monkeypatch: Any
) -> None:
    url, probe = served
    with Client.http(url, protocol=MODERN) as client:
        loop = loop_of(client)
        monkeypatch.setattr(loop, "_max_open", 1)
        first = client.call_tool_future("gated", {"tag": "a"})
        assert probe.started("a").wait(WAIT)
        wait_until(lambda: loop.open_responses == 1, "the first answer on the loop")
        second = client.call_tool_future("gated", {"tag": "b"})
        assert probe.started("b").wait(WAIT)
        wait_until(lambda: busy_readers(client) == 1, "a reader reading the second answer")
        assert loop.open_responses == 1
        probe.release("a")
        probe.release("b")
        assert first.result(WAIT).content[0].text == "a: released"
        assert second.result(WAIT).content[0].text == "b: released"
