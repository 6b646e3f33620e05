"""The 2026-07-28 Streamable HTTP request headers, checked against the body they travel with.

Every 2026-07-28 POST repeats parts of its body in headers, so that a proxy or load balancer
can route it without parsing JSON: ``MCP-Protocol-Version`` (the envelope's version),
``Mcp-Method`` (the method) and, for ``tools/call`` and ``prompts/get``, ``Mcp-Name``
(``params.name``; ``params.uri`` for ``resources/read``; ``params.taskId`` for ``tasks/get``,
``tasks/update`` and ``tasks/cancel``). A value that is not safe in a header
is sent as ``=?base64?<base64 of its UTF-8>?=``; it is decoded before comparing.

:func:`check_routing_headers` returns the -32020 error owed for a missing or mismatched
header; :func:`http_status_for` maps a 2026-07-28 JSON-RPC error to its HTTP status.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from ..errors import McpError
from ..jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from ..lifecycle import PROTOCOL_VERSION_KEY

__all__ = [
    "NAME_PARAMS",
    "check_routing_headers",
    "decode_header_value",
    "encode_header_value",
    "http_status_for",
]

NAME_PARAMS: Mapping[str, str] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
"""The methods whose POST carries ``Mcp-Name``, and the parameter it repeats (the tasks
extension's ``tasks/get|update|cancel`` repeat ``params.taskId``, so that a load balancer can
route them to the instance holding the task)."""

_SENTINEL_START, _SENTINEL_END = "=?base64?", "?="

_BAD_REQUEST_CODES = frozenset(
    {
        INVALID_PARAMS,
        HEADER_MISMATCH,
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        UNSUPPORTED_PROTOCOL_VERSION,
    }
)


def decode_header_value(value: str) -> str | None:
    """The value a header carries: the decoded text of the ``=?base64?...?=`` form, the value
    itself otherwise; ``None`` for a sentinel whose content is not base64 of UTF-8."""
    if not (value.startswith(_SENTINEL_START) and value.endswith(_SENTINEL_END)) or len(
        value
    ) < len(_SENTINEL_START) + len(_SENTINEL_END):
        return value
    encoded = value[len(_SENTINEL_START) : -len(_SENTINEL_END)]
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def encode_header_value(value: str) -> str:
    """``value`` as a header carries it: as is when it is header-safe (visible ASCII, space
    and tab, no leading or trailing whitespace, not itself of the sentinel form), else
    ``=?base64?<base64 of its UTF-8>?=`` -- the inverse of :func:`decode_header_value`."""
    safe = (
        value.isascii()
        and all(ch == "\t" or " " <= ch <= "~" for ch in value)
        and value == value.strip(" \t")
        and not (value.startswith(_SENTINEL_START) and value.endswith(_SENTINEL_END))
    )
    if safe:
        return value
    encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
    return f"{_SENTINEL_START}{encoded}{_SENTINEL_END}"


_VERSION_HEADER = "HTTP_MCP_PROTOCOL_VERSION"
_METHOD_HEADER = "HTTP_MCP_METHOD"
_NAME_HEADER = "HTTP_MCP_NAME"
"""The WSGI environ keys of ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name``."""


def _header(environ: Mapping[str, Any], key: str) -> str | None:
    value = environ.get(key)
    return value if isinstance(value, str) else None


def check_routing_headers(environ: Mapping[str, Any], method: str, params: Any) -> McpError | None:
    """The -32020 error owed for a 2026-07-28 request whose headers do not match its body
    (``environ``: the WSGI environ), ``None`` when they match.

    ``MCP-Protocol-Version`` must be present and, when the body's envelope names a version,
    equal it (a body without one is refused by admission, -32602); ``Mcp-Method`` must equal
    the method; ``Mcp-Name`` must equal the named parameter of :data:`NAME_PARAMS` methods."""
    version = _header(environ, _VERSION_HEADER)
    # type() first: a dict (what JSON decodes to) needs no ABC check
    mapping = type(params) is dict or isinstance(params, Mapping)
    meta = params.get("_meta") if mapping else None
    body_version = (
        meta.get(PROTOCOL_VERSION_KEY) if type(meta) is dict or isinstance(meta, Mapping) else None
    )
    if version is None:
        return _mismatch("the MCP-Protocol-Version header is missing")
    if isinstance(body_version, str) and version != body_version:
        return _mismatch(
            f"MCP-Protocol-Version {version!r} does not match the body's {body_version!r}"
        )
    sent_method = _header(environ, _METHOD_HEADER)
    if sent_method is None:
        return _mismatch("the Mcp-Method header is missing")
    if sent_method != method:
        return _mismatch(f"Mcp-Method {sent_method!r} does not match the body's method {method!r}")
    key = NAME_PARAMS.get(method)
    if key is None:
        return None
    sent_name = _header(environ, _NAME_HEADER)
    if sent_name is None:
        return _mismatch(
            f"the Mcp-Name header is missing (a {method} request repeats params.{key} in it)"
        )
    expected = params.get(key) if mapping else None
    decoded = decode_header_value(sent_name)
    if decoded is None:
        return _mismatch("Mcp-Name is not valid =?base64?...?= text")
    if decoded != expected:
        return _mismatch(f"Mcp-Name {decoded!r} does not match params.{key} {expected!r}")
    return None


def _mismatch(detail: str) -> McpError:
    return McpError(HEADER_MISMATCH, detail)


def http_status_for(code: int | None) -> str:
    """The HTTP status of a 2026-07-28 answer carrying JSON-RPC error ``code`` (``None``: a
    result): 400 for -32602, -32020, -32021 and -32022, 404 for -32601, 200 otherwise."""
    if code in _BAD_REQUEST_CODES:
        return "400 Bad Request"
    if code == METHOD_NOT_FOUND:
        return "404 Not Found"
    return "200 OK"
