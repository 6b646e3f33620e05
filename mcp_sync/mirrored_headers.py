"""Tool parameters mirrored in ``Mcp-Param-{Name}`` HTTP headers (protocol 2026-07-28).

A tool's ``inputSchema`` may mark a property with ``"x-mcp-header": "<Name>"``: over
Streamable HTTP a client then repeats that argument's value in the header
``Mcp-Param-<Name>`` of every ``tools/call`` POST, so that a load balancer or gateway can
route on it without parsing JSON, and the server checks that the header and the body agree
(400 with -32020 otherwise).

The specification's constraints on an annotation (:func:`mirrored_params` enforces them):
the name is a non-empty HTTP token (RFC 9110 ``tchar``), unique among the schema's
annotations ignoring case; the property has a primitive type (``string``, ``integer`` or
``boolean``; never ``number``); and it is *statically reachable* from the schema root through
``properties`` keys only (not through ``items``, ``oneOf``/``anyOf``/``allOf``/``not``,
``if``/``then``/``else`` or ``$ref``).

Values travel as text: a string as is, an integer in decimal, a boolean as ``true`` /
``false``; a value that is not a plain visible-ASCII header value (non-ASCII, control
characters, leading or trailing white space, or text that looks like the sentinel itself) as
``=?base64?<base64 of its UTF-8>?=``. An argument that is absent or ``null`` has no header.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = [
    "HEADER_PREFIX",
    "X_MCP_HEADER",
    "MirroredParam",
    "encode_header_value",
    "mirrored_params",
    "value_matches",
]

X_MCP_HEADER = "x-mcp-header"
"""The JSON Schema extension keyword that marks a property to be mirrored in a header."""

HEADER_PREFIX = "Mcp-Param-"
"""The header that carries a mirrored parameter is this prefix plus the annotation's name."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_PRIMITIVE = frozenset({"string", "integer", "boolean"})
_INSTANCE_DATA = frozenset({"default", "examples", "enum", "const"})
"""Keywords whose values are argument data, not schemas (never searched for annotations)."""
_SENTINEL_START, _SENTINEL_END = "=?base64?", "?="
_SAFE = re.compile(r"[\x20-\x7e]*")
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class MirroredParam:
    """One annotated property: where it is in the arguments and which header mirrors it.

    Attributes:
        path: the chain of ``properties`` keys from the arguments object to the value.
        name: the annotation's name; the header is ``Mcp-Param-<name>``.
        type: the property's JSON type (``string``, ``integer`` or ``boolean``).
    """

    path: tuple[str, ...]
    name: str
    type: str

    @property
    def header(self) -> str:
        """The header's name, ``Mcp-Param-<name>``."""
        return HEADER_PREFIX + self.name

    def value_in(self, arguments: Any) -> Any:
        """The argument at :attr:`path` in ``arguments``; ``None`` when absent (no header)."""
        value = arguments
        for key in self.path:
            if not isinstance(value, Mapping) or key not in value:
                return None
            value = value[key]
        return value


def mirrored_params(schema: Mapping[str, Any]) -> tuple[MirroredParam, ...]:
    """The properties of a tool's ``inputSchema`` marked with ``x-mcp-header``.

    Raises :class:`ValueError` naming the first annotation that breaks the specification's
    constraints (a client drops such a tool, so a server must not publish it)."""
    found: list[MirroredParam] = []
    _walk(schema, (), found, static=True)
    seen: dict[str, MirroredParam] = {}
    for param in found:
        clash = seen.get(param.name.lower())
        if clash is not None:
            raise ValueError(
                f"x-mcp-header {param.name!r} (at {'.'.join(param.path)}) repeats "
                f"{clash.name!r} (at {'.'.join(clash.path)}): names must differ ignoring case"
            )
        seen[param.name.lower()] = param
    return tuple(found)


def _walk(node: Any, path: tuple[str, ...], found: list[MirroredParam], *, static: bool) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, path, found, static=False)
        return
    if not isinstance(node, Mapping):
        return
    where = ".".join(path) or "the schema root"
    if X_MCP_HEADER in node:
        name = node[X_MCP_HEADER]
        if not static or not path:
            raise ValueError(
                f"x-mcp-header at {where} is not statically reachable "
                "(only a chain of `properties` keys may lead to it)"
            )
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ValueError(f"x-mcp-header at {where} must be a non-empty HTTP token: {name!r}")
        kind = node.get("type")
        if kind not in _PRIMITIVE:
            raise ValueError(
                f"x-mcp-header at {where} needs type string, integer or boolean (got {kind!r})"
            )
        found.append(MirroredParam(path, name, kind))
    for key, child in node.items():
        if key == "properties" and isinstance(child, Mapping):
            for prop, sub in child.items():
                _walk(sub, (*path, str(prop)), found, static=static)
        elif key not in _INSTANCE_DATA and key != X_MCP_HEADER:
            # items, oneOf/anyOf/allOf/not, if/then/else, $defs, ...: nothing below is static
            _walk(child, path, found, static=False)


def encode_header_value(value: str | int | bool) -> str:
    """The header text of a mirrored value (the base64 form when plain text is not safe)."""
    text = "true" if value is True else "false" if value is False else str(value)
    unsafe = (
        not _SAFE.fullmatch(text)
        or text != text.strip(" \t")
        or (text.startswith(_SENTINEL_START) and text.endswith(_SENTINEL_END))
    )
    if unsafe:
        return _SENTINEL_START + base64.b64encode(text.encode()).decode("ascii") + _SENTINEL_END
    return text


def value_matches(decoded: str, value: Any) -> bool:
    """True when header text ``decoded`` (base64 form already decoded) carries ``value``:
    booleans as ``true``/``false``, numbers compared numerically (``42.0`` is ``42``),
    strings exactly (case-sensitive)."""
    if isinstance(value, bool):
        return decoded == ("true" if value else "false")
    if isinstance(value, (int, float)):
        if not _JSON_NUMBER.fullmatch(decoded):
            return False
        try:
            return Decimal(decoded) == Decimal(value)
        except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
            return False
    if isinstance(value, str):
        return decoded == value
    return False
