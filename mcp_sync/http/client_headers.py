"""The headers a client stamps on a 2026-07-28 POST, and the tools' ``x-mcp-header`` maps.

Every 2026-07-28 request repeats parts of its body in headers (``streamable-http.mdx``,
"Request metadata"): ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` (the tool or prompt
name, the resource URI) and one ``Mcp-Param-{Name}`` for each argument of a ``tools/call``
whose property in the tool's ``inputSchema`` carries ``x-mcp-header: Name``. Values are
encoded with :func:`~mcp_sync.http.routing_headers.encode_header_value` -- the one encoder
the server's check decodes.

:class:`ToolHeaders` learns the annotations from every ``tools/list`` answer the client
reads, and drops the tools whose annotations are invalid from that answer (the spec says a
client MUST, and SHOULD log why).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Mapping
from typing import Any

from ..lifecycle import PROTOCOL_VERSION_KEY
from .routing_headers import NAME_PARAMS, encode_header_value

__all__ = [
    "MAX_TOOL_HEADER_MAPS",
    "HeaderPath",
    "ToolHeaders",
    "header_annotations",
    "reads_as_its_json",
    "request_headers",
]

_log = logging.getLogger("mcp_sync.http_client")

MAX_TOOL_HEADER_MAPS = 10_000
"""Most tools whose ``x-mcp-header`` annotations one client remembers (a bound on what a
server's ``tools/list`` can make it hold); past it the oldest are forgotten."""

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110 tchar
_SAFE_INTEGER = 2**53 - 1

HeaderPath = tuple[tuple[str, ...], str]
"""One annotation: the chain of ``properties`` keys to the argument, and the header's name
part (``Region`` for ``Mcp-Param-Region``)."""


def header_annotations(schema: Any) -> list[HeaderPath]:
    """The ``x-mcp-header`` annotations of a tool's ``inputSchema``; raises
    :class:`ValueError` (saying why) if one breaks the spec's constraints: an empty or
    non-token name, a name used twice (case-insensitively), a type other than string,
    integer or boolean, or an annotation not reachable through ``properties`` keys alone."""
    found: list[HeaderPath] = []
    _walk(schema, (), True, found)
    seen: set[str] = set()
    for _, name in found:
        if name.lower() in seen:
            raise ValueError(f"x-mcp-header {name!r} is used twice")
        seen.add(name.lower())
    return found


def _walk(node: Any, path: tuple[str, ...], reachable: bool, found: list[HeaderPath]) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, path, False, found)
        return
    if not isinstance(node, Mapping):
        return
    if "x-mcp-header" in node:
        name = node["x-mcp-header"]
        if not reachable or not path:
            raise ValueError(
                "x-mcp-header is only allowed on a property reached by properties keys"
            )
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise ValueError(f"x-mcp-header {name!r} is not an HTTP field-name token")
        if node.get("type") not in ("string", "integer", "boolean"):
            raise ValueError(
                f"x-mcp-header {name!r} is on a property of type {node.get('type')!r}"
                " (string, integer or boolean only)"
            )
        found.append((path, name))
    for key, value in node.items():
        if key == "properties" and isinstance(value, Mapping):
            for prop, sub in value.items():
                _walk(sub, (*path, str(prop)), reachable, found)
        elif isinstance(value, (Mapping, list)):
            _walk(value, path, False, found)


def _header_text(value: Any) -> str | None:
    """The header text of one argument value (``None``: no header -- null, or a type the
    annotation does not allow)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) <= _SAFE_INTEGER else None
    if isinstance(value, str):
        return encode_header_value(value)
    return None


class ToolHeaders:
    """The ``x-mcp-header`` annotations of the tools this client has listed (thread-safe,
    at most :data:`MAX_TOOL_HEADER_MAPS` tools)."""

    def __init__(self, limit: int = MAX_TOOL_HEADER_MAPS) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._tools: dict[str, list[HeaderPath]] = {}

    def learn(self, result: Any) -> Any:
        """Read a ``tools/list`` result: remember each tool's annotations and return the
        result without the tools whose annotations are invalid (the same object when all
        are valid)."""
        tools = result.get("tools") if isinstance(result, Mapping) else None
        if not isinstance(tools, list):
            return result
        kept: list[Any] = []
        for tool in tools:
            name = tool.get("name") if isinstance(tool, Mapping) else None
            if not isinstance(name, str):
                kept.append(tool)
                continue
            try:
                annotations = header_annotations(tool.get("inputSchema"))
            except ValueError as exc:
                _log.warning("dropped tool %r from tools/list: %s", name, exc)
                continue
            self._remember(name, annotations)
            kept.append(tool)
        return result if len(kept) == len(tools) else {**result, "tools": kept}

    def _remember(self, name: str, annotations: list[HeaderPath]) -> None:
        with self._lock:
            self._tools.pop(name, None)
            if annotations:
                self._tools[name] = annotations
                while len(self._tools) > self._limit:
                    del self._tools[next(iter(self._tools))]

    def annotates(self, name: str) -> bool:
        """True if calls of tool ``name`` carry ``Mcp-Param-*`` headers."""
        with self._lock:
            return name in self._tools

    def for_call(self, name: str, arguments: Any) -> dict[str, str]:
        """The ``Mcp-Param-*`` headers of a call of tool ``name`` with ``arguments``."""
        with self._lock:
            annotations = self._tools.get(name)
        if not annotations:
            return {}
        headers: dict[str, str] = {}
        for path, header in annotations:
            value: Any = arguments
            for key in path:
                value = value.get(key) if isinstance(value, Mapping) else None
            text = _header_text(value)
            if text is not None:
                headers[f"Mcp-Param-{header}"] = text
        return headers


_cached_name = functools.lru_cache(maxsize=1024)(encode_header_value)


def _encoded_name(name: str) -> str:
    """``encode_header_value(name)``, remembered for the names of a few hundred tools,
    prompts and short resource URIs (a client calls the same ones again and again)."""
    return (
        _cached_name(name) if len(name) <= 256 and type(name) is str else encode_header_value(name)
    )


def request_headers(
    method: str, params: Any, tools: ToolHeaders | None = None
) -> dict[str, str] | None:
    """The routing headers of a 2026-07-28 request or notification (``None`` when its
    ``params._meta`` names no protocol version: not a 2026-07-28 message)."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, Mapping) else None
    if not isinstance(version, str):
        return None
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": method}
    key = NAME_PARAMS.get(method)
    if key is not None and isinstance(params, Mapping):
        name = params.get(key)
        if isinstance(name, str):
            headers["Mcp-Name"] = _encoded_name(name)
            if method == "tools/call" and tools is not None:
                headers.update(tools.for_call(name, params.get("arguments")))
    return headers


def reads_as_its_json(method: str, params: Any, tools: ToolHeaders | None = None) -> bool:
    """True if :func:`request_headers` reads from ``params`` what it would read from the
    JSON they encode to: plain ``dict``\\ s, a ``str`` version and name, and no
    ``Mcp-Param-*`` arguments (whose values JSON may change). A sender that has the
    object need not decode the line it encoded."""
    if type(params) is not dict:
        return False
    meta = params.get("_meta")
    if type(meta) is not dict or type(meta.get(PROTOCOL_VERSION_KEY)) is not str:
        return False
    key = NAME_PARAMS.get(method)
    name = params.get(key) if key is not None else None
    if name is None:
        return True
    return type(name) is str and not (
        method == "tools/call" and tools is not None and tools.annotates(name)
    )
