"""Pydantic models (``mcp_types`` or the user's) as the JSON objects sent on the wire."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["model_to_wire"]


def model_to_wire(model: BaseModel, *, result: bool = False) -> dict[str, Any]:
    """``model`` as a JSON object: field aliases (``mimeType``), no ``null`` members.

    With ``result=True`` the ``resultType`` member that ``mcp_types`` adds to every result
    (a 2026-07-28 field the handshake-era revisions do not know) is left out.
    """
    data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    if result:
        data.pop("resultType", None)
    return data
