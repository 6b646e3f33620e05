"""``Mcp-Param-*`` headers at 2026-07-28: a tool parameter marked with
:func:`~mcp_sync.server.signatures.mcp_header` is published with ``x-mcp-header`` in its
``inputSchema``, and a ``tools/call`` POST must mirror it in ``Mcp-Param-<name>`` (the
``=?base64?...?=`` form decoded; integers compared numerically) or get 400 with -32020.
Judged with raw ``httpx`` requests against real WSGI servers (the built-in one and waitress)
(the official ``mcp`` client, which mirrors the headers itself:
tests/interop/test_http_params_official_client.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from support.http import run_waitress
from test_http_modern import b64, error_code, headers_for, modern, post

from mcp_sync import Server, mcp_header
from mcp_sync.http import McpWsgiApp, serve_http
from mcp_sync.mirrored_headers import encode_header_value, mirrored_params, value_matches


def make_param_server() -> Server:
    server = Server("params-http", version="1.0.0")

    @server.tool()
    def execute_sql(
        region: Annotated[str, mcp_header("Region"), "where to run it"],
        query: str,
        shard: Annotated[int, mcp_header("Shard")] = 0,
        dry: Annotated[bool, mcp_header("Dry-Run")] = False,
    ) -> str:
        """Pretends to run SQL."""
        return f"{region}/{shard}/{dry}: {query}"

    @server.tool()
    def plain(text: str) -> str:
        """No mirrored parameter."""
        return text

    return server


@pytest.fixture(params=["embedded", "waitress"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    app = McpWsgiApp(make_param_server(), path="/mcp")
    if request.param == "embedded":
        handle = serve_http(app, "127.0.0.1", 0)
        yield handle.url
        handle.stop()
        return
    base, stop = run_waitress(app)
    yield base + "/mcp"
    app.close()
    stop()


def call(arguments: dict[str, Any], name: str = "execute_sql") -> dict[str, Any]:
    return modern("tools/call", {"name": name, "arguments": arguments})


def test_the_schema_carries_x_mcp_header() -> None:
    (tool,) = [t for t in make_param_server().tools() if t.name == "execute_sql"]
    properties = tool.to_wire()["inputSchema"]["properties"]
    assert properties["region"]["x-mcp-header"] == "Region"
    assert properties["region"]["description"] == "where to run it"
    assert properties["shard"]["x-mcp-header"] == "Shard"
    assert "x-mcp-header" not in properties["query"]


def test_mirrored_headers_that_match_are_served(url: str) -> None:
    body = call({"region": "us-west1", "query": "SELECT 1", "shard": 7, "dry": True})
    headers = headers_for(
        body,
        **{"Mcp-Param-Region": "us-west1", "Mcp-Param-Shard": "7", "Mcp-Param-Dry-Run": "true"},
    )
    response = post(url, body, headers)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["content"][0]["text"] == "us-west1/7/True: SELECT 1"


@pytest.mark.parametrize(
    ("arguments", "extra", "why"),
    [
        ({"region": "eu", "query": "q"}, {}, "missing"),
        ({"region": "eu", "query": "q"}, {"Mcp-Param-Region": "us"}, "mismatched"),
        ({"region": "eu", "query": "q"}, {"Mcp-Param-Region": "EU"}, "values are case-sensitive"),
        ({"region": "eu", "query": "q"}, {"Mcp-Param-Region": "=?base64?!!?="}, "bad base64"),
        ({"region": "eu", "query": "q"}, {"Mcp-Param-Region": b64("us")}, "base64 of another"),
        (
            {"region": "eu", "query": "q", "shard": 3},
            {"Mcp-Param-Region": "eu"},
            "an integer given but not mirrored",
        ),
        (
            {"region": "eu", "query": "q", "shard": 3},
            {"Mcp-Param-Region": "eu", "Mcp-Param-Shard": "4"},
            "another integer",
        ),
        (
            {"region": "eu", "query": "q", "shard": 3},
            {"Mcp-Param-Region": "eu", "Mcp-Param-Shard": "three"},
            "not a number",
        ),
        (
            {"region": "eu", "query": "q", "dry": True},
            {"Mcp-Param-Region": "eu", "Mcp-Param-Dry-Run": "True"},
            "booleans are lowercase",
        ),
        (
            {"region": "eu", "query": "q"},
            {"Mcp-Param-Region": "eu", "Mcp-Param-Shard": "0"},
            "a header for an argument that is absent",
        ),
    ],
)
def test_a_missing_or_mismatched_param_header_is_400_with_32020(
    url: str, arguments: dict[str, Any], extra: dict[str, str], why: str
) -> None:
    body = call(arguments)
    response = post(url, body, headers_for(body, **extra))
    assert response.status_code == 400, why
    assert error_code(response) == -32020, why
    assert response.json()["id"] == 1


@pytest.mark.parametrize(
    ("arguments", "extra"),
    [
        ({"region": "Hello, 世界", "query": "q"}, {"Mcp-Param-Region": b64("Hello, 世界")}),
        ({"region": " padded ", "query": "q"}, {"Mcp-Param-Region": b64(" padded ")}),
        ({"region": "line1\nline2", "query": "q"}, {"Mcp-Param-Region": b64("line1\nline2")}),
        (
            {"region": "=?base64?literal?=", "query": "q"},
            {"Mcp-Param-Region": b64("=?base64?literal?=")},
        ),
        (
            {"region": "eu", "query": "q", "shard": 42},
            {"Mcp-Param-Region": "eu", "Mcp-Param-Shard": "42.0"},
        ),
        (
            {"region": "eu", "query": "q", "shard": -7},
            {"Mcp-Param-Region": "eu", "mcp-param-shard": "-7"},
        ),
        ({"region": "eu", "query": "q", "shard": None}, {"Mcp-Param-Region": "eu"}),
    ],
    ids=["non-ascii", "padded", "newline", "sentinel-lookalike", "numeric", "name-case", "null"],
)
def test_encoded_numeric_and_null_values_are_accepted(
    url: str, arguments: dict[str, Any], extra: dict[str, str]
) -> None:
    body = call(arguments)
    response = post(url, body, headers_for(body, **extra))
    # a null shard fails the tool's own argument check (a tool error), not the header check
    assert response.status_code == 200, response.text
    assert "error" not in response.json()


def test_tools_without_mirrored_parameters_need_no_header(url: str) -> None:
    body = call({"text": "x"}, name="plain")
    response = post(url, body, headers_for(body))
    assert response.status_code == 200
    assert response.json()["result"]["content"][0]["text"] == "x"


def test_an_unknown_tool_is_judged_by_the_call_not_the_headers(url: str) -> None:
    body = call({"region": "eu"}, name="nope")
    response = post(url, body, headers_for(body))
    assert error_code(response) == -32602


def test_2025_sessions_do_not_check_param_headers(url: str) -> None:
    from support.messages import initialize_request, notification

    init = post(url, initialize_request(), {"Accept": "application/json, text/event-stream"})
    session = init.headers["mcp-session-id"]
    common = {
        "Accept": "application/json",
        "Mcp-Session-Id": session,
        "MCP-Protocol-Version": "2025-11-25",
    }
    assert post(url, notification("notifications/initialized"), common).status_code == 202
    body = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "execute_sql", "arguments": {"region": "eu", "query": "q"}},
    }
    response = post(url, body, common)
    assert response.status_code == 200
    assert response.json()["result"]["content"][0]["text"] == "eu/0/False: q"


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}, "type"),
        ({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}, "token"),
        ({"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}, "token"),
        ({"properties": {"a": {"type": "string", "x-mcp-header": "A\r\n"}}}, "token"),
        (
            {
                "properties": {
                    "a": {"type": "string", "x-mcp-header": "Key"},
                    "b": {"type": "string", "x-mcp-header": "KEY"},
                }
            },
            "ignoring case",
        ),
        (
            {
                "properties": {
                    "a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}
                }
            },
            "statically",
        ),
        (
            {"properties": {"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}]}}},
            "statically",
        ),
        ({"$defs": {"D": {"type": "string", "x-mcp-header": "A"}}}, "statically"),
    ],
)
def test_invalid_annotations_are_refused(schema: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        mirrored_params({"type": "object", **schema})


def test_a_hand_written_schema_with_an_invalid_annotation_is_published_verbatim(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Clients drop such a tool (the spec says they MUST); the server warns, publishes the
    schema as written and checks no Mcp-Param header for it."""
    schema = {"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}}
    server = Server("bad")
    with caplog.at_level(logging.WARNING, "mcp_sync.server"):
        tool = server.add_tool(lambda **kw: "", name="bad", input_schema=schema)
    assert any("tool bad: x-mcp-header at a needs type" in r.getMessage() for r in caplog.records)
    assert tool.to_wire()["inputSchema"] == schema
    assert tool.signature.mirrored == ()


def test_a_float_parameter_cannot_be_mirrored() -> None:
    server = Server("bad")
    with pytest.raises(ValueError, match="x-mcp-header at ratio needs type"):

        @server.tool()
        def scaled(ratio: Annotated[float, mcp_header("Ratio")]) -> str:
            return str(ratio)


def test_nested_properties_are_reachable() -> None:
    (param,) = mirrored_params(
        {
            "type": "object",
            "properties": {
                "target": {
                    "type": "object",
                    "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
                }
            },
        }
    )
    assert param.path == ("target", "zone") and param.header == "Mcp-Param-Zone"
    assert param.value_in({"target": {"zone": "z1"}}) == "z1"
    assert param.value_in({"target": "flat"}) is None


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        (42, "42"),
        (-7, "-7"),
        (True, "true"),
        (False, "false"),
    ],
)
def test_values_encode_as_the_spec_shows(value: str | int | bool, text: str) -> None:
    assert encode_header_value(value) == text


@pytest.mark.parametrize(
    ("decoded", "value", "matches"),
    [
        ("42", 42, True),
        ("42.0", 42, True),
        ("4.2e1", 42, True),
        ("042", 42, False),
        ("42", "42", True),
        ("true", True, True),
        ("1", True, False),
        ("true", 1, False),
        ("x", {"a": 1}, False),
        ("9007199254740993", 9007199254740993, True),
        ("9007199254740992", 9007199254740993, False),
    ],
)
def test_values_compare_by_type(decoded: str, value: Any, matches: bool) -> None:
    assert value_matches(decoded, value) is matches


def test_a_hand_written_schema_marks_params_with_the_keyword() -> None:
    server = Server("declared")
    server.add_tool(
        lambda **kw: f"{kw['zone']}",
        name="declared",
        input_schema={
            "type": "object",
            "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
            "required": ["zone"],
        },
    )
    handle = serve_http(McpWsgiApp(server, path="/mcp"), "127.0.0.1", 0)
    try:
        body = call({"zone": "z9"}, name="declared")
        assert post(handle.url, body, headers_for(body)).status_code == 400
        ok = post(handle.url, body, headers_for(body, **{"Mcp-Param-Zone": "z9"}))
        assert ok.status_code == 200 and ok.json()["result"]["content"][0]["text"] == "z9"
    finally:
        handle.stop()
