"""Bounded reads in the HTTP client: an SSE event over ``max_event_bytes`` or a JSON answer
over ``max_response_bytes`` fails that call (``ResponseTooLarge``), the connection lives on,
and memory stays bounded whatever the server sends.

The server here is a tiny hostile WSGI app under the standard library's threaded server: it
answers ``initialize`` honestly and then sends 256 MiB answers (one reused 1 MiB chunk, so it
costs the server nothing). Memory is measured in a fresh client process, as growth of its
peak RSS (``VmHWM``) against its own baseline.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.waiting import WAIT

from mcp_sync import Client, PeerMisbehaved
from mcp_sync.errors import ResponseTooLarge
from mcp_sync.http import serve_http
from mcp_sync.http.client_transport import ReconnectPolicy

pytestmark = pytest.mark.usefixtures("client_path")  # both client paths (conftest)

HUGE = 256 * 1024 * 1024
CHUNK = b"x" * (1024 * 1024)
DEEP = 5000  # deeper than Python's json module can parse (its recursion limit)
INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "hostile", "version": "0"},
}


class HostileApp:
    """A Streamable HTTP server whose ``tools/call`` answers are huge (by tool name):
    ``huge_event`` (one SSE event), ``huge_json`` (chunked JSON), ``huge_json_length`` (JSON
    with a Content-Length); ``deep_event`` and ``deep_json`` answer with a result nested
    ``DEEP`` levels, ``both_event`` with both ``result`` and ``error``; ``echo`` answers normally. A GET stream sends one oversize
    event (its id first), then, when resumed after it, a normal notification."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cancelled: list[Any] = []
        self.cancel_seen = threading.Event()
        self.gets: list[str | None] = []
        self.resumed_after_oversize = threading.Event()
        self.broken_id: Any = None

    def __call__(self, environ: dict, start_response: Any) -> Iterator[bytes] | list[bytes]:
        method = environ["REQUEST_METHOD"]
        if method == "DELETE":
            start_response("200 OK", [("Content-Length", "0")])
            return [b""]
        if method == "GET":
            return self._get(environ, start_response)
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        message = json.loads(body)
        if "id" not in message:
            if message.get("method") == "notifications/cancelled":
                with self.lock:
                    self.cancelled.append(message["params"]["requestId"])
                self.cancel_seen.set()
            start_response("202 Accepted", [("Content-Length", "0")])
            return [b""]
        if message["method"] == "initialize":
            return self._json(
                start_response,
                {"jsonrpc": "2.0", "id": message["id"], "result": INIT},
                [("Mcp-Session-Id", "s1")],
            )
        name = message["params"]["name"] if message["method"] == "tools/call" else "echo"
        rid = json.dumps(message["id"]).encode()
        if name == "huge_event":
            start_response("200 OK", [("Content-Type", "text/event-stream")])
            return self._huge(
                b'event: message\nid: r1:1\ndata: {"jsonrpc":"2.0","id":'
                + rid
                + b',"result":{"x":"',
                b'"}}\n\n',
            )
        if name == "huge_json":
            start_response("200 OK", [("Content-Type", "application/json")])
            return self._huge(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"x":"', b'"}}')
        if name == "huge_json_length":
            head, tail = b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"x":"', b'"}}'
            start_response(
                "200 OK",
                [
                    ("Content-Type", "application/json"),
                    ("Content-Length", str(len(head) + HUGE + len(tail))),
                ],
            )
            return self._huge(head, tail)
        if name in ("deep_event", "deep_json", "both_event"):  # invalid answers with their id
            if name == "both_event":
                answer = (
                    b'{"jsonrpc":"2.0","id":'
                    + rid
                    + b',"result":{},"error":{"code":1,"message":"x"}}'
                )
            else:  # valid JSON, nested far past MAX_NESTING_DEPTH
                answer = (
                    b'{"jsonrpc":"2.0","id":'
                    + rid
                    + b',"result":{"x":'
                    + b"[" * DEEP
                    + b"]" * DEEP
                    + b"}}"
                )
            if name == "deep_json":
                start_response(
                    "200 OK",
                    [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))],
                )
                return [answer]
            start_response("200 OK", [("Content-Type", "text/event-stream")])
            return [b"id: d:1\ndata: " + answer + b"\n\n"]
        if name == "broken":  # the stream breaks in the middle of an event; resumed, it answers
            with self.lock:
                self.broken_id = message["id"]
            start_response("200 OK", [("Content-Type", "text/event-stream")])
            return iter([b"id: b:1\ndata: \n\n", b'data: {"jsonrpc": "2.0", "half'])
        result = (
            {"content": [{"type": "text", "text": "fine"}], "isError": False}
            if message["method"] == "tools/call"
            else {}
        )
        return self._json(start_response, {"jsonrpc": "2.0", "id": message["id"], "result": result})

    def _get(self, environ: dict, start_response: Any) -> Iterator[bytes]:
        last = environ.get("HTTP_LAST_EVENT_ID")
        with self.lock:
            self.gets.append(last)
        start_response("200 OK", [("Content-Type", "text/event-stream")])
        if last == "b:1":
            result = {"content": [{"type": "text", "text": "resumed"}], "isError": False}
            answer = json.dumps({"jsonrpc": "2.0", "id": self.broken_id, "result": result}).encode()
            return iter([b"id: b:2\ndata: " + answer + b"\n\n"])
        if last == "s:1":  # resumed after the oversize event: a normal one, then hold on
            self.resumed_after_oversize.set()
            tick = json.dumps(
                {"jsonrpc": "2.0", "method": "notifications/test/after", "params": {}}
            ).encode()
            return iter([b"id: s:2\ndata: " + tick + b"\n\n"])
        return self._huge(
            b'id: s:1\ndata: {"jsonrpc":"2.0","method":"notifications/test/huge","params":{"x":"',
            b'"}}\n\n',
        )

    @staticmethod
    def _huge(head: bytes, tail: bytes) -> Iterator[bytes]:
        yield head
        for _ in range(HUGE // len(CHUNK)):
            yield CHUNK
        yield tail

    @staticmethod
    def _json(
        start_response: Any, message: dict, headers: list[tuple[str, str]] | None = None
    ) -> list[bytes]:
        body = json.dumps(message).encode()
        start_response(
            "200 OK",
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                *(headers or []),
            ],
        )
        return [body]


@pytest.fixture
def hostile():
    app = HostileApp()
    handle = serve_http(app, "127.0.0.1", 0)
    try:
        yield app, f"http://127.0.0.1:{handle.port}/mcp"
    finally:
        handle.stop()


CLIENT = textwrap.dedent(
    """
    import json, sys
    from mcp_sync import Client
    from mcp_sync.errors import ResponseTooLarge
    from mcp_sync.http.client_transport import ReconnectPolicy

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    with Client.http(sys.argv[1]) as client:
        client.call_tool("echo", {})   # warm up: every code path the big calls use
        baseline = hwm()
        errors = []
        for name in ("huge_event", "huge_json", "huge_json_length"):
            try:
                client.call_tool(name, {}, timeout=60)
                errors.append(None)
            except ResponseTooLarge as exc:
                errors.append(str(exc))
        after = client.call_tool("echo", {}, timeout=60).content[0].text
        print(json.dumps({"growth": hwm() - baseline, "errors": errors, "after": after, "closed": client.closed}))
    """
)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="measures VmHWM in /proc")
def test_oversize_answers_fail_their_call_with_bounded_memory(hostile):
    app, url = hostile
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(error and "larger than max_" in error for error in report["errors"]), report
    assert report["after"] == "fine" and not report["closed"], report  # the connection survived
    # three 256 MiB answers: the client's peak grew by a bounded amount (the 8 MiB limits
    # plus the copies made while joining them), not by anything near what was sent
    assert report["growth"] < 48 * 1024 * 1024, report
    assert app.cancel_seen.wait(WAIT), (
        "the request whose stream overflowed was not cancelled on the server"
    )


def test_limits_are_configurable_and_the_oversize_call_is_cancelled_on_the_server(hostile):
    app, url = hostile
    with Client.http(
        url, max_event_bytes=4096, max_response_bytes=4096, open_get_stream=False
    ) as client:
        future = client.call_tool_future("huge_event", {})
        with pytest.raises(ResponseTooLarge) as info:
            future.result(WAIT)
        assert info.value.limit == 4096
        assert app.cancel_seen.wait(WAIT)
        with app.lock:
            assert app.cancelled == [future.request_id]
        with pytest.raises(ResponseTooLarge):
            client.call_tool("huge_json", {}, timeout=WAIT)
        assert client.call_tool("echo", {}, timeout=WAIT).content[0].text == "fine"
        assert client.endpoint.in_flight() == (0, 0)


@pytest.mark.parametrize(
    ("name", "detail"),
    [
        ("deep_event", "nesting too deep"),
        ("deep_json", "nesting too deep"),
        ("both_event", "both result and error"),
    ],
)
def test_an_invalid_answer_fails_its_call_and_the_connection_survives(hostile, name, detail):
    """The client's own look at answers (which request a stream answers) goes through the
    depth-limited decoder too: an invalid answer with a readable id -- nested too deep, or
    with both result and error -- fails its call at once; it is not taken for a broken
    stream (resumed, then the whole connection failed)."""
    app, url = hostile
    with Client.http(url, open_get_stream=False) as client:
        with pytest.raises(PeerMisbehaved, match=detail):
            client.call_tool(name, {}, timeout=WAIT)
        assert client.call_tool("echo", {}, timeout=WAIT).content[0].text == "fine"
        assert not client.closed and client.endpoint.in_flight() == (0, 0)
        with app.lock:
            assert app.gets == [], "the answer's stream was resumed as if it had broken"


def test_an_oversize_event_on_the_get_stream_is_skipped_by_resuming_after_it(hostile):
    app, url = hostile
    seen: list[str] = []
    after = threading.Event()

    def on_notification(method: str, params: dict) -> None:
        seen.append(method)
        if method == "notifications/test/after":
            after.set()

    with Client.http(url, on_notification=on_notification, max_event_bytes=65536) as client:
        assert after.wait(WAIT), (
            f"the GET stream was not resumed after the oversize event: {app.gets}"
        )
        assert seen == ["notifications/test/after"]  # the oversize one was dropped
        with app.lock:
            assert app.gets[:2] == [None, "s:1"]
        assert client.call_tool("echo", {}, timeout=WAIT).content[0].text == "fine"


# -- the parser, without I/O -----------------------------------------------------------------------
def test_parser_splits_any_line_ending_across_chunks():
    from mcp_sync.http.sse import SseParser

    parser = SseParser(1024)
    stream = (
        b"id: a\r\ndata: one\r\rretry: 250\ndata: two\r\n\r\n: comment\nid: b\ndata: x\ndata: y\n\n"
    )
    events = [
        event for i in range(len(stream)) for event in parser.feed_bytes(stream[i : i + 1])
    ]  # one byte at a time
    assert events == [("a", "message", "one"), ("a", "message", "two"), ("b", "message", "x\ny")]
    assert parser.retry_ms == 250 and parser.last_event_id == "b"


def test_parser_drops_an_oversize_event_whose_id_comes_last_and_goes_on():
    from mcp_sync.http.sse import Oversize, SseParser

    parser = SseParser(100)
    out = parser.feed_bytes(b"data: " + b"z" * 60)
    assert out == []
    out = parser.feed_bytes(b"z" * 60)  # over the limit, in the middle of a line
    assert len(out) == 1 and isinstance(out[0], Oversize) and not out[0].id_known
    assert parser._partial_size == 0 and parser._data == []  # nothing of it is kept
    for _ in range(1000):  # the rest of the huge line streams through, costing nothing
        assert parser.feed_bytes(b"z" * 4096) == []
    out = parser.feed_bytes(b"\nid: big\n\nid: next\ndata: fine\n\n")
    assert out == [("next", "message", "fine")]


def test_a_new_stream_does_not_continue_an_event_the_last_one_broke_off():
    from mcp_sync.http.sse import SseParser

    parser = SseParser(1024)
    assert (
        parser.feed_bytes(b'retry: 10\nid: s:1\n\ndata: {"half') == []
    )  # the connection breaks here
    parser.new_stream()
    assert parser.feed_bytes(b"id: s:2\ndata: whole\n\n") == [("s:2", "message", "whole")]
    assert parser.retry_ms == 10


def test_a_request_stream_broken_mid_event_is_resumed_cleanly(hostile):
    _, url = hostile
    with Client.http(url, open_get_stream=False, reconnect=ReconnectPolicy(delay=0.01)) as client:
        assert client.call_tool("broken", {}, timeout=WAIT).content[0].text == "resumed"
