"""Resources and resource templates: registration records and result conversion."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .handlers import Signature
from .uri_template import UriTemplate
from .wire import model_to_wire

__all__ = ["RegisteredResource", "to_resource_contents"]


@dataclass
class RegisteredResource:
    """A resource (fixed URI) or resource template (URI with variables)."""

    uri: str
    name: str
    signature: Signature
    template: UriTemplate
    description: str | None = None
    title: str | None = None
    mime_type: str | None = None

    @property
    def is_template(self) -> bool:
        """True for a resource template."""
        return self.template.is_template

    def to_wire(self) -> dict[str, Any]:
        """The ``Resource`` or ``ResourceTemplate`` listing object."""
        item: dict[str, Any] = {"name": self.name}
        item["uriTemplate" if self.is_template else "uri"] = self.uri
        if self.title:
            item["title"] = self.title
        if self.description:
            item["description"] = self.description
        if self.mime_type:
            item["mimeType"] = self.mime_type
        return item


def to_resource_contents(value: Any, uri: str, mime_type: str | None) -> dict[str, Any]:
    """Convert what a resource handler returned into a ``ReadResourceResult`` dict.

    ``str`` → text; ``bytes`` → base64 blob; a dict, list or pydantic model → JSON text
    (``application/json``); content objects (with ``uri`` and ``text``/``blob``) as they are.
    """
    if isinstance(value, BaseModel) and type(value).__name__ == "ReadResourceResult":
        return model_to_wire(value, result=True)
    items = value if isinstance(value, list) and value and all(_is_contents(v) for v in value) else [value]
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
