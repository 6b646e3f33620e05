"""Checking a 2026-07-28 ``tools/call`` POST's ``Mcp-Param-*`` headers against its arguments.

A tool whose ``inputSchema`` marks parameters with ``x-mcp-header``
(:func:`~mcp_sync.server.signatures.mcp_header`, :mod:`mcp_sync.mirrored_headers`) has each
such argument repeated by the client in the header ``Mcp-Param-<name>``. The server MUST
refuse the call (400, -32020) when a header is missing while the argument has a value, when
its value (after decoding the ``=?base64?...?=`` form) differs from the argument (integers
compared numerically, booleans as ``true``/``false``), or when it holds characters a header
value may not carry. An argument that is absent or ``null`` needs no header; a header sent
for one is a mismatch too (a proxy would route on a value the server never sees).

WSGI gives headers as ``HTTP_<NAME>`` with ``-`` turned into ``_``, so the lookup ignores
case, as HTTP does. Many WSGI servers drop a header whose name holds ``_`` (they cannot tell
it from ``-``): annotation names without ``_`` are the portable ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import McpError
from ..jsonrpc import HEADER_MISMATCH
from ..mirrored_headers import MirroredParam, value_matches
from .routing_headers import decode_header_value

if TYPE_CHECKING:  # pragma: no cover
    from ..server import Server

__all__ = ["check_param_headers"]

_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")
"""What an HTTP field value may hold (RFC 9110: visible ASCII, space and tab)."""


def _environ_key(param: MirroredParam) -> str:
    return "HTTP_" + param.header.upper().replace("-", "_")


def check_param_headers(
    environ: Mapping[str, Any], server: Server, method: str, params: Any
) -> McpError | None:
    """The -32020 error owed when a ``tools/call``'s ``Mcp-Param-*`` headers do not mirror
    its arguments (``environ``: the WSGI environ); ``None`` when they do, for other methods,
    and for an unknown tool (the call itself is refused then, -32602)."""
    if method != "tools/call" or not isinstance(params, Mapping):
        return None
    name = params.get("name")
    tool = server.registry.tool(name) if isinstance(name, str) else None
    if tool is None:
        return None
    arguments = params.get("arguments")
    for param in tool.signature.mirrored:
        error = _check_one(param, environ.get(_environ_key(param)), param.value_in(arguments))
        if error is not None:
            return McpError(HEADER_MISMATCH, error)
    return None


def _check_one(param: MirroredParam, raw: Any, value: Any) -> str | None:
    where = f"arguments.{'.'.join(param.path)}"
    if value is None:
        if raw is None:
            return None
        return f"{param.header} is sent but {where} has no value"
    if not isinstance(raw, str):
        return f"the {param.header} header is missing ({where} is mirrored in it)"
    if not _FIELD_VALUE.fullmatch(raw):
        return f"{param.header} holds characters a header value may not carry"
    decoded = decode_header_value(raw)
    if decoded is None:
        return f"{param.header} is not valid =?base64?...?= text"
    if not value_matches(decoded, value):
        return f"{param.header} {decoded!r} does not match {where} {value!r}"
    return None
