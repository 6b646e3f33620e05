"""``model_to_wire``: a pydantic model as the JSON object that goes on the wire (aliases, no
``null`` members, JSON types), and ``result=True`` leaving out ``resultType`` and the caching
hints the model filled in by default."""

from __future__ import annotations

import json

import mcp_types
import pytest
from pydantic import BaseModel, Field

from mcp_sync.wire import model_to_wire


def test_members_use_their_wire_aliases():
    tool = mcp_types.Tool.model_validate(
        {"name": "x", "inputSchema": {"type": "object"}, "_meta": {"k": 1}}
    )
    wire = model_to_wire(tool)
    assert wire == {"name": "x", "inputSchema": {"type": "object"}, "_meta": {"k": 1}}
    image = mcp_types.ImageContent.model_validate(
        {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    )
    assert model_to_wire(image) == {"type": "image", "data": "AAAA", "mimeType": "image/png"}


def test_none_members_are_left_out_but_other_falsy_values_stay():
    result = mcp_types.CallToolResult.model_validate(
        {"content": [], "isError": False, "structuredContent": {}}
    )
    wire = model_to_wire(result)
    assert wire["content"] == [] and wire["isError"] is False and wire["structuredContent"] == {}
    assert not [key for key, value in wire.items() if value is None]
    text = mcp_types.TextContent.model_validate({"type": "text", "text": ""})
    assert model_to_wire(text) == {
        "type": "text",
        "text": "",
    }  # no "annotations": null, no "_meta": null


def test_nested_models_and_lists_are_converted_all_the_way_down():
    result = mcp_types.CallToolResult.model_validate(
        {
            "content": [
                {"type": "text", "text": "a"},
                {
                    "type": "resource",
                    "resource": {"uri": "file:///x", "mimeType": "text/plain", "text": "t"},
                },
            ]
        }
    )
    wire = model_to_wire(result)
    assert wire["content"][1] == {
        "type": "resource",
        "resource": {"uri": "file:///x", "mimeType": "text/plain", "text": "t"},
    }
    json.dumps(wire)  # plain JSON types only


def test_json_mode_turns_non_json_values_into_json_ones():
    root = mcp_types.Root.model_validate({"uri": "file:///tmp/a b", "name": "r"})
    wire = model_to_wire(root)
    assert isinstance(wire["uri"], str) and wire["uri"].startswith("file:///tmp/")
    json.dumps(wire)


def test_result_leaves_out_result_type_and_nothing_else():
    result = mcp_types.CallToolResult.model_validate({"content": [{"type": "text", "text": "hi"}]})
    full = model_to_wire(result)
    assert "resultType" in full
    trimmed = model_to_wire(result, result=True)
    assert "resultType" not in trimmed
    assert trimmed == {key: value for key, value in full.items() if key != "resultType"}


@pytest.mark.parametrize(
    ("model", "payload"),
    [
        (mcp_types.ListToolsResult, {"tools": []}),
        (mcp_types.ListPromptsResult, {"prompts": []}),
        (mcp_types.ListResourcesResult, {"resources": []}),
        (mcp_types.ListResourceTemplatesResult, {"resourceTemplates": []}),
        (mcp_types.ReadResourceResult, {"contents": []}),
    ],
)
def test_result_leaves_out_caching_hints_the_model_filled_in(model, payload):
    value = model.model_validate(payload)
    assert {"ttlMs", "cacheScope"} <= model_to_wire(value).keys()  # mcp_types fills them in
    assert not {"ttlMs", "cacheScope", "resultType"} & model_to_wire(value, result=True).keys()


def test_result_keeps_caching_hints_given_explicitly():
    given = mcp_types.ListToolsResult(tools=[], ttl_ms=60_000)
    assert model_to_wire(given, result=True) == {"tools": [], "ttlMs": 60_000}
    parsed = mcp_types.ReadResourceResult.model_validate(
        {"contents": [], "ttlMs": 0, "cacheScope": "public"}
    )
    assert model_to_wire(parsed, result=True) == {
        "contents": [],
        "ttlMs": 0,
        "cacheScope": "public",
    }


def test_result_on_a_model_without_result_type_changes_nothing():
    text = mcp_types.TextContent.model_validate({"type": "text", "text": "x"})
    assert model_to_wire(text, result=True) == model_to_wire(text) == {"type": "text", "text": "x"}


def test_a_users_own_model_gets_the_same_treatment():
    class Weather(BaseModel):
        city: str
        feels_like: float = Field(alias="feelsLike")
        note: str | None = None
        result_type: str = Field(default="x", alias="resultType")

    model = Weather(city="Oslo", feelsLike=-3.5)
    assert model_to_wire(model) == {"city": "Oslo", "feelsLike": -3.5, "resultType": "x"}
    assert model_to_wire(model, result=True) == {"city": "Oslo", "feelsLike": -3.5}


def test_the_wire_form_parses_back_to_an_equal_model_and_is_a_fresh_dict():
    tool = mcp_types.Tool.model_validate(
        {
            "name": "t",
            "description": "d",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}}},
        }
    )
    first = model_to_wire(tool)
    assert mcp_types.Tool.model_validate(first) == tool
    first["name"] = "changed"
    first["inputSchema"]["properties"].clear()
    assert model_to_wire(tool)["name"] == "t"
    assert model_to_wire(tool)["inputSchema"]["properties"] == {"a": {"type": "integer"}}
