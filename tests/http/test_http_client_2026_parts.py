"""The parts of the 2026-07-28 HTTP client on their own: header encoding, ``x-mcp-header``
annotations, and the reader threads that are reused from request to request."""

from __future__ import annotations

import threading

import pytest
from support.waiting import WAIT, wait_until

from mcp_sync.http.client_headers import (
    ToolHeaders,
    header_annotations,
    reads_as_its_json,
    request_headers,
)
from mcp_sync.http.client_readers import ReaderPool
from mcp_sync.http.routing_headers import decode_header_value, encode_header_value


@pytest.mark.parametrize(
    ("value", "encoded"),
    [  # the spec's table (streamable-http.mdx, "Value Encoding")
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ("file:///tmp/a b", "file:///tmp/a b"),
    ],
)
def test_header_values_are_encoded_as_the_spec_says_and_decode_back(
    value: str, encoded: str
) -> None:
    assert encode_header_value(value) == encoded
    assert decode_header_value(encoded) == value


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}}, "type"),
        ({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": ""}}}, "token"),
        (
            {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A B"}}},
            "token",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "x-mcp-header": "Dup"},
                    "b": {"type": "string", "x-mcp-header": "dup"},
                },
            },
            "twice",
        ),
        (
            {
                "type": "object",
                "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}],
            },
            "reached",
        ),
        ({"type": "object", "x-mcp-header": "Root"}, "reached"),
    ],
)
def test_invalid_annotations_are_refused(schema: dict, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        header_annotations(schema)


def test_nested_annotations_are_found_and_mirrored() -> None:
    tools = ToolHeaders()
    listed = {
        "tools": [
            {
                "name": "t",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "o": {
                            "type": "object",
                            "properties": {"n": {"type": "integer", "x-mcp-header": "N"}},
                        },
                        "big": {"type": "integer", "x-mcp-header": "Big"},
                    },
                },
            },
            {"name": "bad", "inputSchema": {"type": "object", "x-mcp-header": "X"}},
        ]
    }
    learnt = tools.learn(listed)
    assert [tool["name"] for tool in learnt["tools"]] == ["t"]
    params = {
        "name": "t",
        "arguments": {"o": {"n": -7}, "big": 2**60},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
    }
    headers = request_headers("tools/call", params, tools)
    assert headers == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "t",
        "Mcp-Param-N": "-7",  # an integer outside JavaScript's safe range gets no header
    }
    assert request_headers("tools/call", {"name": "t"}, tools) is None  # not a 2026 message


def test_tool_header_maps_are_bounded() -> None:
    tools = ToolHeaders(limit=2)
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"}}}
    tools.learn({"tools": [{"name": n, "inputSchema": schema} for n in "xyz"]})
    assert tools.for_call("x", {"a": "1"}) == {}
    assert tools.for_call("z", {"a": "1"}) == {"Mcp-Param-A": "1"}


def test_headers_are_read_from_the_params_object_only_when_its_json_reads_the_same() -> None:
    class Name(str):
        pass

    tools = ToolHeaders()
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"}}}
    tools.learn({"tools": [{"name": "annotated", "inputSchema": schema}]})
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    assert reads_as_its_json("tools/call", {"name": "echo", "_meta": meta}, tools)
    assert reads_as_its_json("tools/list", {"_meta": meta}, tools)
    # what JSON could read otherwise: the line is decoded instead
    assert not reads_as_its_json("tools/call", {"name": "annotated", "_meta": meta}, tools)
    assert not reads_as_its_json("tools/call", {"name": Name("echo"), "_meta": meta}, tools)
    assert not reads_as_its_json("tools/call", {"name": "echo"}, tools)  # no version
    assert not reads_as_its_json("tools/call", None, tools)


def test_reader_threads_are_reused_and_bounded_and_closed() -> None:
    pool = ReaderPool(max_idle=2, idle_timeout=WAIT)
    try:
        names: list[int] = []
        done = threading.Event()
        pool.submit(lambda: (names.append(threading.get_ident()), done.set()))
        assert done.wait(WAIT)
        wait_until(lambda: pool._idle == 1, "the reader to go idle")
        done.clear()
        pool.submit(lambda: (names.append(threading.get_ident()), done.set()))
        assert done.wait(WAIT)
        assert names[0] == names[1] and pool.threads == 1  # the same thread ran both
        # four at once: four threads; afterwards at most two stay
        release = threading.Event()
        started = threading.Barrier(5)
        for _ in range(4):
            pool.submit(lambda: (started.wait(WAIT), release.wait(WAIT)))
        started.wait(WAIT)
        assert pool.threads == 4
        release.set()
        wait_until(lambda: pool.threads == 2, "the readers past max_idle to exit")
    finally:
        pool.close()
    assert pool.threads == 0
    assert pool.submit(lambda: None) is False


def test_an_idle_reader_exits_after_its_timeout() -> None:
    pool = ReaderPool(idle_timeout=0.01)
    done = threading.Event()
    pool.submit(done.set)
    assert done.wait(WAIT)
    wait_until(lambda: pool.threads == 0, "the idle reader to exit")
    pool.close()
