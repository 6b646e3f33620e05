"""Pydantic models (``mcp_types`` or the user's) as the JSON objects sent on the wire."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["model_to_wire"]

_CACHE_HINTS = frozenset(
    {"ttlMs", "cacheScope"}
)  # 2026-07-28 members mcp_types fills in by default


def model_to_wire(model: BaseModel, *, result: bool = False) -> dict[str, Any]:
    """``model`` as a JSON object: field aliases (``mimeType``), no ``null`` members.

    With ``result=True`` the members that ``mcp_types`` adds to results by default, and that
    the handshake-era revisions do not know, are left out: ``resultType`` always, and the
    caching hints ``ttlMs`` and ``cacheScope`` unless they were given explicitly (passed to
    the constructor or present in the validated data). A 2026-07-28 answer gets its
    ``resultType`` and the server's caching hints where the server session stamps them.
    """
    data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    if result:
        data.pop("resultType", None)
        for name, field in type(model).model_fields.items():
            member = field.serialization_alias or field.alias or name
            if member in _CACHE_HINTS and name not in model.model_fields_set:
                data.pop(member, None)
    return data
