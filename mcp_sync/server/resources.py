"""The resources feature: listing, reading and subscribing, and the conversion of what a
resource function returns."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..cancel import CancelToken
from ..context import Context
from ..errors import McpError
from ..jsonrpc import INVALID_PARAMS, RESOURCE_NOT_FOUND
from ..protocol import InboundRequest
from ..wire import model_to_wire
from . import input_rounds
from .pagination import paginate
from .records import RegisteredResource

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession

__all__ = [
    "to_resource_contents",
    "find_resource",
    "list_resources",
    "list_templates",
    "read_resource",
    "subscribe",
    "unsubscribe",
]


def to_resource_contents(value: Any, uri: str, mime_type: str | None) -> dict[str, Any]:
    """Convert what a resource handler returned into a ``ReadResourceResult`` dict.

    ``str`` → text; ``bytes`` → base64 blob; a dict, list or pydantic model → JSON text
    (``application/json``); content objects (with ``uri`` and ``text``/``blob``) as they are.
    """
    if isinstance(value, BaseModel) and type(value).__name__ == "ReadResourceResult":
        return model_to_wire(value, result=True)
    items = (
        value
        if isinstance(value, list) and value and all(_is_contents(v) for v in value)
        else [value]
    )
    contents = []
    for item in items:
        contents.append(_one(item, uri, mime_type))
    return {"contents": contents}


def _is_contents(value: Any) -> bool:
    data = model_to_wire(value) if isinstance(value, BaseModel) else value
    return isinstance(data, dict) and "uri" in data and ("text" in data or "blob" in data)


def _one(value: Any, uri: str, mime_type: str | None) -> dict[str, Any]:
    if _is_contents(value):
        return model_to_wire(value) if isinstance(value, BaseModel) else dict(value)
    entry: dict[str, Any] = {"uri": uri}
    if isinstance(value, str):
        entry["text"] = value
        if mime_type:
            entry["mimeType"] = mime_type
    elif isinstance(value, (bytes, bytearray, memoryview)):
        entry["blob"] = base64.b64encode(bytes(value)).decode()
        entry["mimeType"] = mime_type or "application/octet-stream"
    else:
        data = model_to_wire(value) if isinstance(value, BaseModel) else value
        entry["text"] = json.dumps(data, ensure_ascii=False, default=str)
        entry["mimeType"] = mime_type or "application/json"
    return entry


def list_resources(
    session: ServerSession, request: InboundRequest, token: CancelToken
) -> dict[str, Any]:
    """``resources/list``: one page of the fixed-URI resources."""
    items = [r.to_wire() for r in session.server.registry.resources() if not r.is_template]
    return paginate(items, request.params, session.server.page_size, "resources")


def list_templates(
    session: ServerSession, request: InboundRequest, token: CancelToken
) -> dict[str, Any]:
    """``resources/templates/list``: one page of the resource templates."""
    items = [r.to_wire() for r in session.server.registry.resources() if r.is_template]
    return paginate(items, request.params, session.server.page_size, "resourceTemplates")


def find_resource(
    resources: list[RegisteredResource], uri: Any
) -> tuple[RegisteredResource, dict[str, str]]:
    """The resource serving ``uri`` (a fixed URI first, then the first matching template)
    and the template's variables; -32602 without a URI, -32002 when none serves it."""
    if not isinstance(uri, str):
        raise McpError(INVALID_PARAMS, "a resource request needs a uri")
    for resource in resources:
        if not resource.is_template and resource.uri == uri:
            return resource, {}
    for resource in resources:
        if resource.is_template:
            values = resource.template.match(uri)
            if values is not None:
                return resource, values
    raise McpError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})


def read_resource(
    session: ServerSession, request: InboundRequest, token: CancelToken
) -> dict[str, Any] | input_rounds.InputRequired:
    """``resources/read``: call the resource's function."""
    uri = request.params.get("uri")
    resource, values = find_resource(session.server.registry.resources(), uri)
    ctx = Context(session, request, token)
    kwargs = resource.signature.bind(values, ctx)
    value = resource.signature.fn(**kwargs)
    if isinstance(value, input_rounds.InputRequired):
        return value
    return to_resource_contents(value, str(uri), resource.mime_type)


def subscribe(
    session: ServerSession, request: InboundRequest, token: CancelToken
) -> dict[str, Any]:
    """``resources/subscribe``: the session gets ``notifications/resources/updated`` for it."""
    uri = request.params.get("uri")
    find_resource(session.server.registry.resources(), uri)
    session.subscriptions.add(str(uri))
    return {}


def unsubscribe(
    session: ServerSession, request: InboundRequest, token: CancelToken
) -> dict[str, Any]:
    """``resources/unsubscribe``."""
    uri = request.params.get("uri")
    if not isinstance(uri, str):
        raise McpError(INVALID_PARAMS, "resources/unsubscribe needs a uri")
    session.subscriptions.discard(uri)
    return {}
