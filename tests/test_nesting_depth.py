"""Deeply nested input: every id-bearing request gets exactly one reply, the connection lives.

Before the fix a request nested a few hundred levels deep was decoded by the json fallback and
one nested a thousand levels raised RecursionError in the reader, which logged it and answered
nothing: the raw peers below waited for a reply that never came.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from support.endpoints import endpoint_pair, raw_server
from support.paths import PEERS, ROOT
from support.waiting import WAIT

from mcp_sync import Client, McpError
from mcp_sync.jsonrpc import (
    INVALID_REQUEST,
    MAX_NESTING_DEPTH,
    ErrorResponse,
    InvalidMessage,
    Request,
    Response,
    decode,
    encode,
)
from mcp_sync.transports.subprocess import SubprocessTransport

HOSTILE = PEERS / "hostile_input_server.py"


def nested(depth: int, shape: str) -> str:
    """JSON text of ``depth`` nested containers around a ``1``: arrays, objects, or both
    alternating. The ``1`` sits ``depth`` levels below the outermost container."""
    opens, closes = [], []
    for level in range(depth):
        array = shape == "array" or (shape == "mixed" and level % 2 == 1)
        opens.append("[" if array else '{"k":')
        closes.append("]" if array else "}")
    return "".join(opens) + "1" + "".join(reversed(closes))


def request_line(
    request_id: Any, value: str, *, id_first: bool = True, method: str = "test/echo"
) -> bytes:
    head = f'"jsonrpc":"2.0","method":{json.dumps(method)}'
    body = f'"params":{{"v":{value}}}'
    ident = f'"id":{json.dumps(request_id)}'
    parts = [head, ident, body] if id_first else [head, body, ident]
    return ("{" + ",".join(parts) + "}").encode()


SHAPES = ("array", "object", "mixed")
ECHO_MAX = MAX_NESTING_DEPTH - 2
"""The deepest value ``params.v`` can hold: params is level 1, ``v`` level 2, so the ``1`` of
``nested(d)`` sits at level d + 2."""
TOOL_MAX = MAX_NESTING_DEPTH - 3
"""The same for ``params.arguments.value`` of a tool call."""
DEEP = (ECHO_MAX + 1, ECHO_MAX + 50, 1_000, 5_000, 100_000)


# -- the decoder -----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
def test_decoder_accepts_the_limit_exactly(shape):
    message = decode(request_line(1, nested(ECHO_MAX, shape)))
    assert isinstance(message, Request), message


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("depth", DEEP)
@pytest.mark.parametrize("id_first", [True, False])
def test_decoder_refuses_deeper_requests_with_their_id(shape, depth, id_first):
    message = decode(request_line('x"7', nested(depth, shape), id_first=id_first))
    assert isinstance(message, InvalidMessage), message
    assert message.reply == ErrorResponse('x"7', INVALID_REQUEST, message.detail)
    assert "nesting too deep" in message.detail and str(MAX_NESTING_DEPTH) in message.detail


@pytest.mark.parametrize("depth", [ECHO_MAX, ECHO_MAX + 1, 5_000])
def test_decoder_json_fallback_path_enforces_the_same_limit(depth):
    # an escaped lone surrogate sends the line through the json module instead
    # (the value is one level deeper inside the list)
    line = request_line(3, f'["\\ud800",{nested(depth - 1, "array")}]')
    if depth <= ECHO_MAX:
        assert isinstance(decode(line), Request)
        return
    message = decode(line)
    assert isinstance(message, InvalidMessage) and message.reply is not None, message
    assert message.reply.id == 3 and "nesting too deep" in message.reply.message
    shallow = decode(request_line(3, f'["\\ud800",{nested(10, "array")}]'))
    assert isinstance(shallow, Request)


def test_decoder_deep_notification_gets_no_reply_and_deep_response_names_its_id():
    note = decode(
        b'{"jsonrpc":"2.0","method":"n","params":{"v":' + nested(1000, "array").encode() + b"}}"
    )
    assert isinstance(note, InvalidMessage) and note.reply is None and note.response_id is None
    response = decode(b'{"jsonrpc":"2.0","result":' + nested(1000, "object").encode() + b',"id":9}')
    assert (
        isinstance(response, InvalidMessage)
        and response.reply is None
        and response.response_id == 9
    )


def test_decoder_str_input_is_limited_too():
    message = decode(request_line(5, nested(1000, "array")).decode())
    assert (
        isinstance(message, InvalidMessage) and message.reply is not None and message.reply.id == 5
    )


def test_encode_of_a_too_deep_value_raises_value_error():
    value: Any = []
    for _ in range(5_000):
        value = [value]
    with pytest.raises(ValueError, match="nest too deep"):
        encode(Response(1, value))


def test_what_the_decoder_accepts_can_be_encoded_and_decoded_again():
    for shape in SHAPES:
        message = decode(request_line(1, nested(ECHO_MAX, shape)))
        assert isinstance(message, Request)
        again = decode(encode(Response(1, message.params)).rstrip(b"\n"))
        assert isinstance(again, Response) and again.result == message.params


# -- an endpoint -------------------------------------------------------------------------------------
def test_endpoint_answers_every_deep_request_once_and_keeps_serving():
    with raw_server({"test/echo": lambda req: req.params}) as s:
        sent = 0
        for shape in SHAPES:
            for depth in DEEP:
                s.peer.send(
                    request_line(f"{shape}-{depth}", nested(depth, shape), id_first=depth % 2 == 0)
                )
                sent += 1
        s.peer.send(request_line("ok", nested(ECHO_MAX, "mixed")))
        replies = [s.peer.recv() for _ in range(sent + 1)]
        by_id = {r["id"]: r for r in replies}
        assert len(by_id) == sent + 1, replies
        for shape in SHAPES:
            for depth in DEEP:
                error = by_id[f"{shape}-{depth}"]["error"]
                assert error["code"] == INVALID_REQUEST and "nesting too deep" in error["message"]
        assert (
            by_id["ok"]["result"]
            == json.loads(request_line("ok", nested(ECHO_MAX, "mixed")))["params"]
        )
        assert s.server.in_flight() == (0, 0)


def test_submit_with_params_too_deep_to_encode_raises_and_leaves_nothing_in_flight():
    value: Any = []
    for _ in range(5_000):
        value = [value]
    with endpoint_pair({"echo": lambda req: req.params}) as pair:
        with pytest.raises(ValueError, match="nest too deep"):
            pair.client.submit("echo", {"v": value}, timeout=WAIT)
        assert pair.client.in_flight() == (0, 0)
        assert pair.client.request("echo", {"v": 1}, timeout=WAIT) == {"v": 1}


def test_handler_result_too_deep_to_encode_is_an_internal_error_that_says_so():
    def deep(req):
        value: Any = []
        for _ in range(5_000):
            value = [value]
        return {"v": value}

    with endpoint_pair({"deep": deep}) as pair:
        with pytest.raises(McpError, match="nest too deep"):
            pair.client.request("deep", None, timeout=WAIT)
        assert pair.server.in_flight() == (0, 0)


# -- a real stdio server, end to end -----------------------------------------------------------------
class RawStdioPeer:
    """Drives a spawned server with hand-written lines; every read is bounded."""

    def __init__(self, transport: SubprocessTransport) -> None:
        self.transport = transport
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.thread = threading.Thread(target=self._pump, name="raw-stdio-peer", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        while True:
            line = self.transport.read_line()
            self.lines.put(line)
            if line is None:
                return

    def send(self, data: bytes | dict[str, Any]) -> None:
        self.transport.write(
            (json.dumps(data).encode() if isinstance(data, dict) else data) + b"\n"
        )

    def recv(self, timeout: float = 20.0) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"the server wrote nothing within {timeout} s")
        assert line is not None, "the server closed the connection"
        return json.loads(line)

    def close(self) -> None:
        self.transport.close()
        self.thread.join(WAIT)


@pytest.fixture
def stdio_peer() -> Iterator[RawStdioPeer]:
    transport = SubprocessTransport(
        [sys.executable, str(HOSTILE)], env={"PYTHONPATH": str(ROOT)}, stderr="discard"
    )
    peer = RawStdioPeer(transport)
    try:
        peer.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        )
        assert "result" in peer.recv()
        peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield peer
    finally:
        peer.close()


def test_stdio_server_answers_deep_requests_of_every_shape(stdio_peer):
    expected: dict[str, str] = {}
    for shape in SHAPES:
        for depth in (10, ECHO_MAX, *DEEP):
            request_id = f"{shape}-{depth}"
            expected[request_id] = "result" if depth <= ECHO_MAX else "error"
            stdio_peer.send(request_line(request_id, nested(depth, shape), id_first=depth % 2 == 1))
    # a tool call: arguments sit one level deeper than a custom method's params
    tool_ok = '{"jsonrpc":"2.0","id":"tool-ok","method":"tools/call","params":{"name":"echo_value","arguments":{"value":%s}}}'
    stdio_peer.send((tool_ok % nested(TOOL_MAX, "mixed")).encode())
    stdio_peer.send(
        (tool_ok.replace("tool-ok", "tool-deep") % nested(TOOL_MAX + 1, "mixed")).encode()
    )
    expected["tool-ok"], expected["tool-deep"] = "result", "error"
    replies = {}
    for _ in expected:
        reply = stdio_peer.recv()
        assert reply["id"] not in replies, f"two replies to {reply['id']}"
        replies[reply["id"]] = reply
    for request_id, kind in expected.items():
        assert kind in replies[request_id], (request_id, replies[request_id])
        if kind == "error":
            assert replies[request_id]["error"]["code"] == INVALID_REQUEST
            assert "nesting too deep" in replies[request_id]["error"]["message"]
    assert replies["tool-ok"]["result"].get("isError") is not True, replies["tool-ok"]
    # the connection is still up
    stdio_peer.send({"jsonrpc": "2.0", "id": "last", "method": "ping"})
    assert stdio_peer.recv() == {"jsonrpc": "2.0", "id": "last", "result": {}}


def test_typed_client_round_trip_at_the_deepest_tool_argument():
    # every layer that walks the value: the client's encoder, the server's decoder and argument
    # validation, the tool result's JSON text and structured content, the client's model
    value = json.loads(nested(TOOL_MAX, "mixed"))
    env = {"PYTHONPATH": str(ROOT)}
    with Client.stdio(
        [sys.executable, str(HOSTILE)], env=env, stderr="discard", init_timeout=20
    ) as client:
        result = client.call_tool("echo_value", {"value": value}, timeout=20)
        assert not result.is_error, result
        assert result.structured_content == {"value": value}
        with pytest.raises(McpError) as info:
            client.call_tool("echo_value", {"value": [value]}, timeout=20)
        assert info.value.code == INVALID_REQUEST and "nesting too deep" in info.value.message
        assert client.call_tool("pid", timeout=20).structured_content
