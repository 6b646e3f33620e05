"""Opaque cursors and pages for the ``*/list`` requests."""

from __future__ import annotations

import base64
import json
from typing import Any

from ..errors import McpError
from ..jsonrpc import INVALID_PARAMS

__all__ = ["encode_cursor", "decode_cursor", "paginate"]


def encode_cursor(offset: int) -> str:
    """An opaque pagination cursor."""
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def decode_cursor(cursor: Any) -> int:
    """The offset inside a cursor made by :func:`encode_cursor`; -32602 for a bad one."""
    if cursor is None:
        return 0
    try:
        offset = json.loads(base64.urlsafe_b64decode(str(cursor).encode()))["o"]
        if type(offset) is not int or offset < 0:
            raise ValueError(offset)
        return offset
    except Exception:
        raise McpError(INVALID_PARAMS, "Invalid cursor") from None


def paginate(items: list[Any], params: dict[str, Any], page_size: int, key: str) -> dict[str, Any]:
    """One page of ``items`` for a list request, with ``nextCursor`` when more remain."""
    offset = decode_cursor(params.get("cursor"))
    page = items[offset : offset + page_size]
    result: dict[str, Any] = {key: page}
    if offset + page_size < len(items):
        result["nextCursor"] = encode_cursor(offset + page_size)
    return result
