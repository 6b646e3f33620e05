"""Turning a tool function's return value into a ``CallToolResult`` wire object."""

from __future__ import annotations

import inspect
import json
from typing import Any, get_args, get_origin

from pydantic import BaseModel

from ..wire import model_to_wire

__all__ = ["to_call_tool_result", "tool_error", "output_schema_for", "CONTENT_TYPES"]

CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})
"""``type`` values of MCP content blocks."""


def _is_content_block(value: Any) -> bool:
    if isinstance(value, BaseModel):
        return getattr(value, "type", None) in CONTENT_TYPES
    return isinstance(value, dict) and value.get("type") in CONTENT_TYPES


def _content_block(value: Any) -> dict[str, Any]:
    return model_to_wire(value) if isinstance(value, BaseModel) else dict(value)


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_error(message: str) -> dict[str, Any]:
    """A ``CallToolResult`` reporting a tool failure (``isError: true``)."""
    return {"content": [_text(message)], "isError": True}


def output_schema_for(annotation: Any, schema_of: Any) -> tuple[dict[str, Any] | None, bool]:
    """The ``outputSchema`` for a return annotation and whether values are wrapped as
    ``{"result": value}`` (for non-object results)."""
    if annotation in (None, type(None), str, Any) or annotation is _EMPTY:
        return None, False
    origin = get_origin(annotation) or annotation
    if isinstance(origin, type) and issubclass(origin, BaseModel):
        if getattr(annotation, "model_fields", {}).get("type") is not None:
            return None, False  # a content block type
        schema = schema_of(annotation)
        return schema, False
    if origin is dict:
        schema = schema_of(annotation)
        return schema, False
    if _is_typed_dict(annotation):
        return schema_of(annotation), False
    if origin in (list, tuple) and get_args(annotation):
        item = get_args(annotation)[0]
        item_origin = get_origin(item) or item
        if (
            isinstance(item_origin, type)
            and issubclass(item_origin, BaseModel)
            and "type" in getattr(item, "model_fields", {})
        ):
            return None, False  # a list of content blocks
    inner = schema_of(annotation)
    if inner is None:
        return None, False
    return {"type": "object", "properties": {"result": inner}, "required": ["result"]}, True


_EMPTY = inspect.Signature.empty


def _is_typed_dict(annotation: Any) -> bool:
    return (
        isinstance(annotation, type)
        and issubclass(annotation, dict)
        and hasattr(annotation, "__total__")
    )


def to_call_tool_result(value: Any, wrap: bool) -> dict[str, Any]:
    """Convert what a tool returned into a ``CallToolResult`` dict.

    * a ``CallToolResult`` model or a dict with ``content`` and ``isError``: as is;
    * a ``str``: one text block;
    * a content block (model or dict with a content ``type``) or a list of them: as content;
    * a pydantic model or a dict: ``structuredContent``, with its JSON as text;
    * ``None``: no content;
    * anything else: its JSON as text, and ``{"result": value}`` as ``structuredContent``
      when the tool declared an output schema for it (``wrap``).
    """
    if value is None:
        return {"content": []}
    if isinstance(value, str):
        return {"content": [_text(value)]}
    if isinstance(value, BaseModel):
        if type(value).__name__ == "CallToolResult":
            return model_to_wire(value, result=True)
        if _is_content_block(value):
            return {"content": [_content_block(value)]}
        structured = model_to_wire(value)
        return {
            "content": [_text(json.dumps(structured, ensure_ascii=False))],
            "structuredContent": structured,
        }
    if isinstance(value, dict):
        if isinstance(value.get("content"), list) and "isError" in value:
            return dict(value)  # already a CallToolResult
        if _is_content_block(value):
            return {"content": [dict(value)]}
        structured = value
        return {
            "content": [_text(json.dumps(structured, ensure_ascii=False, default=str))],
            "structuredContent": structured,
        }
    if isinstance(value, (list, tuple)) and value and all(_is_content_block(v) for v in value):
        return {"content": [_content_block(v) for v in value]}
    try:
        text = json.dumps(value, ensure_ascii=False, default=_json_default)
        jsonable = json.loads(text)
    except (TypeError, ValueError):
        text, jsonable = str(value), str(value)
    result: dict[str, Any] = {"content": [_text(text)]}
    if wrap:
        result["structuredContent"] = {"result": jsonable}
    return result


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return model_to_wire(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
