"""Tools with hand-written JSON Schemas (``input_schema=`` / ``output_schema=``).

Published verbatim, validated with ``jsonschema`` in the dialect the schema names (2020-12
without ``$schema``); arguments passed as keyword arguments by name, values as decoded from
JSON; invalid arguments and non-conforming results are tool errors.
"""

from __future__ import annotations

import copy
import logging
import sys
from typing import Any

import pytest
from pydantic import BaseModel
from support.sessions import connected
from support.waiting import WAIT

from mcp_sync import Context, McpError, Server

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

ROUTE_INPUT: dict[str, Any] = {
    "$schema": DRAFT_2020_12,
    "type": "object",
    "$defs": {
        "point": {
            "type": "object",
            "properties": {
                "lat": {"type": "number", "minimum": -90, "maximum": 90},
                "lon": {"type": "number"},
            },
            "required": ["lat", "lon"],
            "additionalProperties": False,
        }
    },
    "properties": {
        "start": {"$ref": "#/$defs/point"},
        "stops": {"type": "array", "items": {"$ref": "#/$defs/point"}, "maxItems": 3},
        "mode": {"enum": ["walk", "drive"]},
    },
    "required": ["start"],
    "additionalProperties": False,
}

ROUTE_OUTPUT: dict[str, Any] = {
    "$schema": DRAFT_2020_12,
    "type": "object",
    "properties": {"legs": {"type": "integer", "minimum": 0}, "mode": {"type": "string"}},
    "required": ["legs", "mode"],
    "additionalProperties": False,
}


def route_server(seen: list[Any] | None = None) -> Server:
    server = Server("routes")

    @server.tool(input_schema=ROUTE_INPUT, output_schema=ROUTE_OUTPUT)
    def route(start: dict, ctx: Context, stops: list | None = None, mode: str = "walk") -> dict:
        """Plan a route."""
        if seen is not None:
            seen.append(
                {"start": start, "stops": stops, "mode": mode, "ctx": isinstance(ctx, Context)}
            )
        return {"legs": len(stops or []) + 1, "mode": mode}

    return server


def listed(conn, name: str) -> dict[str, Any]:
    return next(
        t for t in conn.client.request("tools/list", timeout=WAIT)["tools"] if t["name"] == name
    )


def test_declared_schemas_are_published_verbatim():
    with connected(route_server()) as conn:
        tool = listed(conn, "route")
        assert tool["inputSchema"] == ROUTE_INPUT
        assert tool["outputSchema"] == ROUTE_OUTPUT
        assert tool["description"] == "Plan a route."
        # and the typed view parses them
        [typed] = conn.client.list_tools(timeout=WAIT)
        assert typed.input_schema["$defs"]["point"]["additionalProperties"] is False


def test_a_registered_schema_is_a_copy():
    schema = copy.deepcopy(ROUTE_INPUT)
    server = Server("copy")
    server.add_tool(lambda start, stops=None, mode="walk": "ok", name="route", input_schema=schema)
    schema["properties"]["start"] = {"type": "string"}
    with connected(server) as conn:
        assert listed(conn, "route")["inputSchema"] == ROUTE_INPUT


def test_valid_arguments_are_passed_by_name_as_decoded_json():
    seen: list[Any] = []
    with connected(route_server(seen)) as conn:
        arguments = {
            "start": {"lat": 1.5, "lon": 2},
            "stops": [{"lat": 0, "lon": 0}],
            "mode": "drive",
        }
        result = conn.client.call_tool("route", arguments, timeout=WAIT)
        assert result.is_error is not True
        assert result.structured_content == {"legs": 2, "mode": "drive"}
        assert seen == [
            {
                "start": {"lat": 1.5, "lon": 2},
                "stops": [{"lat": 0, "lon": 0}],
                "mode": "drive",
                "ctx": True,
            }
        ]
        # an argument left out gets the parameter's default
        conn.client.call_tool("route", {"start": {"lat": 0, "lon": 0}}, timeout=WAIT)
        assert seen[-1] == {
            "start": {"lat": 0, "lon": 0},
            "stops": None,
            "mode": "walk",
            "ctx": True,
        }


@pytest.mark.parametrize(
    "arguments,problems",
    [
        ({}, ["arguments: 'start' is a required property"]),
        (
            {"start": {"lat": 1, "lon": 2}, "speed": 3},
            ["arguments: Additional properties are not allowed ('speed' was unexpected)"],
        ),
        (
            {"start": {"lat": 91, "lon": "east"}},
            [
                "start.lat: 91 is greater than the maximum of 90",
                "start.lon: 'east' is not of type 'number'",
            ],
        ),
        (
            {"start": {"lat": 0, "lon": 0}, "stops": [{"lat": 0}], "mode": "fly"},
            [
                "mode: 'fly' is not one of ['walk', 'drive']",
                "stops.0: 'lon' is a required property",
            ],
        ),
    ],
)
def test_arguments_failing_the_declared_schema_are_a_tool_error(arguments, problems):
    seen: list[Any] = []
    with connected(route_server(seen)) as conn:
        result = conn.client.call_tool("route", arguments, timeout=WAIT)
        assert result.is_error is True
        assert result.content[0].text == "Invalid arguments for tool 'route': " + "; ".join(
            problems
        )
        assert seen == [], "the handler ran with invalid arguments"


def test_kwargs_receives_every_argument_including_names_that_are_not_identifiers():
    server = Server("kw")
    schema = {
        "type": "object",
        "properties": {"user-id": {"type": "integer"}},
        "additionalProperties": {"type": "string"},
    }
    received: list[dict[str, Any]] = []

    @server.tool(input_schema=schema)
    def tag(**arguments: Any) -> str:
        received.append(arguments)
        return "tagged"

    with connected(server) as conn:
        assert (
            conn.client.call_tool("tag", {"user-id": 7, "colour": "red"}, timeout=WAIT)
            .content[0]
            .text
            == "tagged"
        )
        assert received == [{"user-id": 7, "colour": "red"}]
        rejected = conn.client.call_tool("tag", {"user-id": 7, "size": 3}, timeout=WAIT)
        assert (
            rejected.is_error is True
            and "size: 3 is not of type 'string'" in rejected.content[0].text
        )


def test_type_hints_do_not_convert_arguments_of_a_declared_schema():
    server = Server("raw")

    class Point(BaseModel):
        x: int

    got: list[Any] = []

    @server.tool(
        input_schema={"type": "object", "properties": {"p": {"type": "object"}}, "required": ["p"]}
    )
    def show(p: Point) -> str:
        got.append(p)
        return "ok"

    with connected(server) as conn:
        conn.client.call_tool("show", {"p": {"x": "not an int"}}, timeout=WAIT)
        assert got == [{"x": "not an int"}]


def test_the_schema_dialect_comes_from_dollar_schema():
    # draft-07's array form of "items" (a tuple) is invalid in 2020-12, the default dialect
    tuple_schema = {
        "type": "object",
        "properties": {
            "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}
        },
    }
    server = Server("dialects")
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        server.add_tool(lambda pair=None: "ok", name="t2020", input_schema=tuple_schema)
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", **tuple_schema}
    server.add_tool(lambda pair=None: "ok", name="t7", input_schema=draft7)
    with connected(server) as conn:
        assert conn.client.call_tool("t7", {"pair": ["a", 1]}, timeout=WAIT).is_error is not True
        rejected = conn.client.call_tool("t7", {"pair": ["a", "b"]}, timeout=WAIT)
        assert (
            rejected.content[0].text
            == "Invalid arguments for tool 't7': pair.1: 'b' is not of type 'integer'"
        )


@pytest.mark.parametrize(
    "schema,fn,error,match",
    [
        ({"type": "array"}, lambda: 1, ValueError, '"type": "object"'),
        (
            {"type": "object", "properties": {"a": {"type": "nope"}}},
            lambda a=None: 1,
            ValueError,
            "not a valid JSON Schema",
        ),
        (
            {"$schema": "https://example.com/my-dialect", "type": "object"},
            lambda: 1,
            ValueError,
            "unknown \\$schema",
        ),
        (
            {"type": "object", "properties": {"a": {}, "b": {}}},
            lambda a=None: 1,
            TypeError,
            r"\['b'\], which no parameter takes",
        ),
        (
            {"type": "object", "properties": {"a": {}}},
            lambda a: 1,
            TypeError,
            r"\['a'\] have no default but .* does not require",
        ),
        ("not a schema", lambda: 1, TypeError, "must be a JSON Schema object"),
    ],
)
def test_a_declared_input_schema_is_checked_at_registration(schema, fn, error, match):
    server = Server("bad")
    with pytest.raises(error, match=match):
        server.add_tool(fn, name="t", input_schema=schema)
    assert server.tools() == []


def test_a_clear_error_at_registration_without_the_jsonschema_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "jsonschema.validators", None)
    server = Server("no-extra")
    with pytest.raises(ImportError, match=r"pip install 'mcp-sync-threaded\[jsonschema\]'"):
        server.add_tool(lambda: 1, name="t", input_schema={"type": "object"})
    with pytest.raises(ImportError, match="jsonschema"):
        server.add_tool(lambda: 1, name="t", output_schema={"type": "object"})
    # type hints alone do not need it
    server.add_tool(lambda n=1: n, name="hinted")


# -- output schemas -------------------------------------------------------------------------------
def output_server() -> Server:
    server = Server("outputs")
    schema = {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}

    class Total(BaseModel):
        total: int

    @server.tool(output_schema=schema)
    def good(n: int) -> dict:
        return {"total": n}

    @server.tool(output_schema=schema)
    def model(n: int) -> Total:
        return Total(total=n)

    @server.tool(output_schema=schema)
    def wrong_type(n: int) -> dict:
        return {"total": str(n)}

    @server.tool(output_schema=schema)
    def text_only(n: int) -> str:
        return "no structure"

    @server.tool(output_schema=schema)
    def fails(n: int) -> dict:
        raise RuntimeError("broke before returning")

    return server


def test_a_result_matching_the_output_schema_is_sent_as_is():
    with connected(output_server()) as conn:
        assert listed(conn, "good")["outputSchema"] == {
            "type": "object",
            "properties": {"total": {"type": "integer"}},
            "required": ["total"],
        }
        assert (
            listed(conn, "good")["inputSchema"]["properties"]["n"]["type"] == "integer"
        )  # hints still give the input
        for name in ("good", "model"):
            result = conn.client.call_tool(name, {"n": 3}, timeout=WAIT)
            assert result.is_error is not True and result.structured_content == {"total": 3}


def test_a_result_breaking_the_output_schema_is_a_tool_error(caplog):
    caplog.set_level(logging.WARNING, logger="mcp_sync.server")
    with connected(output_server()) as conn:
        wrong = conn.client.call_tool("wrong_type", {"n": 3}, timeout=WAIT)
        [record] = [r for r in caplog.records if r.name == "mcp_sync.server"]
        assert (
            record.levelno == logging.WARNING
            and "wrong_type broke its output schema" in record.getMessage()
        )
        assert wrong.is_error is True and wrong.structured_content is None
        assert wrong.content[0].text == (
            "Tool 'wrong_type' returned a result that does not match its output schema: total: '3' is not of type 'integer'"
        )
        text = conn.client.call_tool("text_only", {"n": 3}, timeout=WAIT)
        assert text.is_error is True and "no structuredContent" in text.content[0].text
        # a tool's own error is reported as it is
        failed = conn.client.call_tool("fails", {"n": 3}, timeout=WAIT)
        assert failed.is_error is True and failed.content[0].text == "broke before returning"


def test_output_schema_conflicts_with_structured_output_false():
    with pytest.raises(ValueError, match="structured_output=False"):
        Server("x").add_tool(
            dict, name="t", output_schema={"type": "object"}, structured_output=False
        )


def test_hinted_tools_still_reject_unknown_tools_with_invalid_params():
    with connected(route_server()) as conn:
        with pytest.raises(McpError) as info:
            conn.client.call_tool("no_route", {}, timeout=WAIT)
        assert info.value.code == -32602


# -- bounded error messages -----------------------------------------------------------------------
def test_the_description_of_invalid_arguments_is_bounded_whatever_was_sent():
    from mcp_sync.server.schemas import MAX_PROBLEM_CHARS, MAX_REPORTED_PROBLEMS

    server = Server("bounded")

    @server.tool()
    def total(numbers: list[int]) -> int:
        return sum(numbers)

    @server.tool(
        input_schema={
            "type": "object",
            "properties": {"n": {"type": "array", "items": {"type": "integer"}}},
        }
    )
    def declared(n: Any = None) -> str:
        return "ok"

    @server.tool(input_schema={"type": "object", "properties": {"s": {"type": "integer"}}})
    def huge(s: Any = None) -> str:
        return "ok"

    prefix = "Invalid arguments for tool '{}': "
    with connected(server) as conn:
        for name, arguments in (
            ("total", {"numbers": ["x"] * 1000}),
            ("declared", {"n": ["x"] * 1000}),
        ):
            text = conn.client.call_tool(name, arguments, timeout=WAIT).content[0].text
            problems = text.removeprefix(prefix.format(name)).split("; ")
            assert len(problems) == MAX_REPORTED_PROBLEMS + 1, text
            assert problems[-1] == "(more problems not shown)"
        text = conn.client.call_tool("huge", {"s": "y" * 100_000}, timeout=WAIT).content[0].text
        [problem] = text.removeprefix(prefix.format("huge")).split("; ")
        assert (
            len(problem) == MAX_PROBLEM_CHARS
            and problem.startswith("s: 'yyy")
            and problem.endswith("...")
        )
