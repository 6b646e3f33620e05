"""CORS for browser-based MCP clients: the preflight answer and the headers of every answer.

A browser sends a cross-origin ``POST`` of JSON (and any request with ``Authorization``,
``Mcp-Session-Id`` or ``MCP-Protocol-Version``) only after a *preflight*: an ``OPTIONS``
request with ``Origin`` and ``Access-Control-Request-Method``, and never with credentials.
:class:`~mcp_sync.http.wsgi_app.McpWsgiApp` therefore answers a preflight before any
authentication (``BearerAuth`` or a raw auth hook); with ``cors=True`` it answers it
``204`` with the headers of :func:`preflight_headers`, and adds those of
:func:`response_headers` to every answer to an allowed ``Origin`` -- the ``401`` of the
bearer guard included, whose ``WWW-Authenticate`` a browser may read only when it is
exposed (:data:`EXPOSED_HEADERS`).

The origins answered are those the app's ``Origin`` check lets through (localhost ones and
``allowed_origins``): an origin it refuses gets ``403``, preflight or not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .responses import StartResponse

__all__ = [
    "EXPOSED_HEADERS",
    "PREFLIGHT_MAX_AGE",
    "is_preflight",
    "requested_headers",
    "preflight_headers",
    "response_headers",
    "exposing",
]

EXPOSED_HEADERS = ("Mcp-Session-Id", "MCP-Protocol-Version", "WWW-Authenticate", "Retry-After")
"""The response headers a browser client may read (``Access-Control-Expose-Headers``): the
session id, the protocol version, the bearer challenge of a ``401``/``403`` and the
``Retry-After`` of a ``503``."""

PREFLIGHT_MAX_AGE = 600
"""Seconds a browser may cache a preflight answer (``Access-Control-Max-Age``)."""

_FIELD_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP field name (RFC 9110's ``token``)."""


def is_preflight(environ: Mapping[str, Any]) -> bool:
    """True for a CORS preflight: ``OPTIONS`` with ``Origin`` and
    ``Access-Control-Request-Method``."""
    return (
        environ.get("REQUEST_METHOD") == "OPTIONS"
        and "HTTP_ORIGIN" in environ
        and "HTTP_ACCESS_CONTROL_REQUEST_METHOD" in environ
    )


def requested_headers(environ: Mapping[str, Any]) -> list[str]:
    """The field names of a preflight's ``Access-Control-Request-Headers`` (malformed ones
    left out)."""
    asked = environ.get("HTTP_ACCESS_CONTROL_REQUEST_HEADERS", "")
    names = (name.strip() for name in asked.split(","))
    return [name for name in names if _FIELD_NAME.fullmatch(name)]


def preflight_headers(
    environ: Mapping[str, Any], origin: str, methods: str
) -> list[tuple[str, str]]:
    """The headers of the ``204`` answering a preflight from ``origin``: the methods the
    endpoint serves, the request headers the browser asked for (every header the client
    sends is read or ignored, never refused), and how long to cache the answer."""
    headers = [
        ("Access-Control-Allow-Origin", origin),
        ("Access-Control-Allow-Methods", methods),
        ("Access-Control-Max-Age", str(PREFLIGHT_MAX_AGE)),
        ("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
    ]
    asked = requested_headers(environ)
    if asked:
        headers.append(("Access-Control-Allow-Headers", ", ".join(asked)))
    return headers


def response_headers(origin: str) -> list[tuple[str, str]]:
    """The headers added to an answer to ``origin``: it may read the answer and the headers
    of :data:`EXPOSED_HEADERS`."""
    return [
        ("Access-Control-Allow-Origin", origin),
        ("Access-Control-Expose-Headers", ", ".join(EXPOSED_HEADERS)),
        ("Vary", "Origin"),
    ]


def exposing(start_response: StartResponse, origin: str) -> StartResponse:
    """``start_response`` adding :func:`response_headers` of ``origin`` to the answer."""
    added = response_headers(origin)

    def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
        return start_response(status, [*headers, *added], *exc_info)

    return start
