"""JSON-RPC batches over line transports: answered with one array line in a session at
revision 2025-03-26, refused with -32600 at later revisions (over a memory pair, driven
by hand, and over a real stdio server process)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.endpoints import RawPeer
from support.messages import notification, request
from support.paths import PEERS, ROOT
from support.waiting import WAIT

from mcp_sync import Context, Server, memory_pair
from mcp_sync.transports import SubprocessTransport
from mcp_sync.transports.base import OutboundMeta

OLD = "2025-03-26"


def call(name: str, arguments: dict[str, Any], request_id: Any) -> dict[str, Any]:
    return request("tools/call", {"name": name, "arguments": arguments}, request_id)


def answers(request_id: Any) -> OutboundMeta:
    """What the endpoint says of its response to ``request_id``."""
    return OutboundMeta("response", related_request_id=request_id)


def initialize(version: str) -> dict[str, Any]:
    return request(
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
        0,
    )


class Gates:
    def __init__(self) -> None:
        self.started: dict[str, threading.Event] = {}
        self.cancelled: dict[str, threading.Event] = {}
        self.ran: set[str] = set()

    def started_event(self, tag: str) -> threading.Event:
        return self.started.setdefault(tag, threading.Event())

    def cancelled_event(self, tag: str) -> threading.Event:
        return self.cancelled.setdefault(tag, threading.Event())


@contextmanager
def session(version: str) -> Iterator[tuple[RawPeer, Gates]]:
    """A server over a memory pair whose raw peer negotiated ``version``."""
    gates = Gates()
    server = Server("batches")

    @server.tool()
    def echo(text: str) -> str:
        """Echo."""
        gates.ran.add(text)
        return text

    @server.tool()
    def gated(tag: str, ctx: Context) -> str:
        """Block until cancelled."""
        gates.started_event(tag).set()
        if ctx.wait(WAIT):
            gates.cancelled_event(tag).set()
        return tag

    client_side, server_side = memory_pair()
    handle = server.serve_in_thread(server_side)
    peer = RawPeer(client_side)
    try:
        peer.send(initialize(version))
        assert peer.recv()["result"]["protocolVersion"] == version
        peer.send(notification("notifications/initialized"))
        yield peer, gates
    finally:
        handle.stop()
        client_side.close()


def by_id(answers: list[dict[str, Any]]) -> dict[tuple[str, Any], dict[str, Any]]:
    return {(type(a["id"]).__name__, a["id"]): a for a in answers}


def test_a_batch_is_answered_with_one_array_line():
    with session(OLD) as (peer, _):
        peer.send(
            [
                call("echo", {"text": "one"}, 1),
                call("echo", {"text": "two"}, "1"),
                notification("notifications/roots/list_changed"),
                request("tools/list", None, 3),
            ]
        )
        answers = peer.recv()
        assert isinstance(answers, list) and len(answers) == 3
        got = by_id(answers)
        assert got[("int", 1)]["result"]["content"][0]["text"] == "one"
        assert got[("str", "1")]["result"]["content"][0]["text"] == "two"
        assert {t["name"] for t in got[("int", 3)]["result"]["tools"]} == {"echo", "gated"}
        peer.send(request("ping", None, 4))  # ordinary messages still work, one per line
        assert peer.recv() == {"jsonrpc": "2.0", "id": 4, "result": {}}


def test_a_batch_of_notifications_gets_no_answer():
    with session(OLD) as (peer, _):
        peer.send(
            [
                notification("notifications/roots/list_changed"),
                notification("notifications/roots/list_changed"),
            ]
        )
        peer.send(request("ping", None, 5))
        assert peer.recv() == {"jsonrpc": "2.0", "id": 5, "result": {}}  # nothing came before it


def test_invalid_elements_and_initialize_get_error_elements():
    with session(OLD) as (peer, _):
        peer.send([42, initialize(OLD) | {"id": 9}, call("echo", {"text": "ok"}, 2)])
        answers = peer.recv()
        errors = {a["id"]: a["error"]["code"] for a in answers if "error" in a}
        assert errors == {None: -32600, 9: -32600}
        assert [a["result"]["content"][0]["text"] for a in answers if "result" in a] == ["ok"]


def test_an_empty_batch_is_one_invalid_request_error():
    with session(OLD) as (peer, _):
        peer.send([])
        answer = peer.recv()
        assert answer["id"] is None and answer["error"]["code"] == -32600


def test_a_cancelled_request_is_left_out_and_an_all_cancelled_batch_gets_no_line():
    with session(OLD) as (peer, gates):
        peer.send([call("gated", {"tag": "g"}, 1), call("echo", {"text": "kept"}, 2)])
        assert gates.started_event("g").wait(WAIT)
        peer.send(notification("notifications/cancelled", {"requestId": 1}))
        assert gates.cancelled_event("g").wait(WAIT)
        assert [a["id"] for a in peer.recv()] == [2]

        peer.send([call("gated", {"tag": "h"}, 3)])
        assert gates.started_event("h").wait(WAIT)
        peer.send(notification("notifications/cancelled", {"requestId": 3}))
        assert gates.cancelled_event("h").wait(WAIT)
        peer.send(request("ping", None, 4))
        assert peer.recv() == {"jsonrpc": "2.0", "id": 4, "result": {}}  # no empty array before it


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_batches_are_refused_at_later_revisions(version):
    with session(version) as (peer, gates):
        peer.send([call("echo", {"text": "never"}, 1)])
        answer = peer.recv()
        assert answer["id"] is None and answer["error"]["code"] == -32600
        peer.send(request("ping", None, 2))
        assert peer.recv()["id"] == 2
        assert "never" not in gates.ran


def test_a_batch_to_a_stdio_server_process():
    transport = SubprocessTransport(
        [sys.executable, str(PEERS / "demo_server.py")],
        env={"PYTHONPATH": str(ROOT)},
        stderr="discard",
    )

    def send(message: Any) -> None:
        transport.write(json.dumps(message).encode() + b"\n")

    def recv() -> Any:
        line = transport.read_line()
        assert line is not None, "the server closed its stdout"
        return json.loads(line)

    try:
        send(initialize(OLD))
        assert recv()["result"]["protocolVersion"] == OLD
        send(notification("notifications/initialized"))
        send([call("echo", {"text": "a"}, 1), call("echo", {"text": "b"}, 2)])
        answers = recv()
        assert sorted(a["result"]["content"][0]["text"] for a in answers) == ["a", "b"]
    finally:
        transport.close()


class Lines:
    """An inner transport: lines to read, and what was written."""

    def __init__(self, *lines: bytes) -> None:
        self.to_read = list(lines)
        self.written: list[bytes] = []

    def read_line(self) -> bytes | None:
        return self.to_read.pop(0) if self.to_read else None

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        pass


def test_the_last_answer_and_the_last_cancellation_racing_write_the_batch_once(fast_switching):
    from mcp_sync.transports.batching import BatchingTransport

    for round_ in range(1000):
        batch = json.dumps(
            [
                call("echo", {"text": "x"}, 1),
                call("echo", {"text": "y"}, 2),
                call("echo", {"text": "z"}, 3),
            ]
        )
        inner = Lines(batch.encode())
        transport = BatchingTransport(inner, lambda: True)
        assert [json.loads(transport.read_line())["id"] for _ in range(3)] == [1, 2, 3]
        transport.send(b'{"jsonrpc":"2.0","id":1,"result":{}}\n', answers(1))
        go = threading.Barrier(2)

        def answer() -> None:
            go.wait(WAIT)
            transport.send(b'{"jsonrpc":"2.0","id":2,"result":{}}\n', answers(2))

        def cancel() -> None:
            go.wait(WAIT)
            transport.inbound_cancelled(3)

        threads = [
            threading.Thread(target=answer, name="answer"),
            threading.Thread(target=cancel, name="cancel"),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        assert len(inner.written) == 1, (round_, inner.written)
        assert sorted(a["id"] for a in json.loads(inner.written[0])) == [1, 2]


def test_progress_for_a_batch_request_goes_out_at_once():
    from mcp_sync.transports.batching import BatchingTransport

    inner = Lines(json.dumps([call("echo", {"text": "x"}, 1)]).encode())
    transport = BatchingTransport(inner, lambda: True)
    transport.read_line()
    progress = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n'
    transport.send(
        progress, OutboundMeta("notification", "notifications/progress", related_request_id=1)
    )
    assert inner.written == [progress]
    transport.send(b'{"jsonrpc":"2.0","id":1,"result":{}}\n', answers(1))
    assert json.loads(inner.written[1]) == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
