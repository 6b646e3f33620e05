"""How a client picks the protocol era of a connection: the ``protocol=`` option and the
``server/discover`` probe.

``Client(protocol=...)`` accepts:

``"auto"`` (the default)
    Probe with ``server/discover`` (at :data:`~mcp_sync.lifecycle.LATEST_MODERN_VERSION`).
    A discover result naming a modern version we speak, or an error only a modern server
    sends (-32020, -32021, -32022), means 2026-07-28; any other error, a result without a
    modern version, or no answer within ``discover_timeout`` means an older server:
    ``initialize`` follows on the same connection. The fallback is never keyed to one error
    code (older servers answer -32601, -32602, -32600, or nothing).
``"modern"`` or a modern version (``"2026-07-28"``)
    The same probe, but without a fallback: a server that does not speak that version fails
    the connection (:class:`~mcp_sync.errors.ConnectionClosed`).
``"legacy"`` (or ``"handshake"``), or a handshake version (``"2025-11-25"`` ...)
    No probe: ``initialize`` at once, asking for that version (``"legacy"``: the client's
    ``protocol_version``), as mcp_sync did before 2026-07-28.

This module holds the parsing of the option and the reading of the probe's outcome; the
client sends the messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .lifecycle import HANDSHAKE_VERSIONS, LATEST_MODERN_VERSION, MODERN_VERSIONS, SERVER_INFO_KEY

__all__ = [
    "DISCOVER_TIMEOUT",
    "ProtocolChoice",
    "DiscoveredServer",
    "parse_protocol",
    "discovered_server",
]

DISCOVER_TIMEOUT = 10.0
"""Default longest wait, in seconds, for the answer to the ``server/discover`` probe
(``discover_timeout``); past it the server is taken for an older one."""


@dataclass(frozen=True)
class ProtocolChoice:
    """What a client may speak, read from its ``protocol=`` option.

    Attributes:
        modern: the modern version to probe with and speak, or ``None``: no probe.
        handshake: the version to ask for in ``initialize``, or ``None``: no fallback.
    """

    modern: str | None
    handshake: str | None

    @property
    def probe(self) -> bool:
        """True when the connection starts with the ``server/discover`` probe."""
        return self.modern is not None


def parse_protocol(value: str, handshake_version: str) -> ProtocolChoice:
    """Read ``protocol=`` (see the module docs); ``handshake_version`` is the version asked
    for in ``initialize`` unless ``value`` names one. A value that is none of these raises
    :class:`ValueError`."""
    if value == "auto":
        return ProtocolChoice(LATEST_MODERN_VERSION, handshake_version)
    if value == "modern":
        return ProtocolChoice(LATEST_MODERN_VERSION, None)
    if value in ("legacy", "handshake"):
        return ProtocolChoice(None, handshake_version)
    if value in MODERN_VERSIONS:
        return ProtocolChoice(value, None)
    if value in HANDSHAKE_VERSIONS:
        return ProtocolChoice(None, value)
    known = ", ".join(("auto", "modern", "legacy", *MODERN_VERSIONS, *HANDSHAKE_VERSIONS))
    raise ValueError(f"protocol={value!r} is not one of {known}")


@dataclass(frozen=True)
class DiscoveredServer:
    """What a ``server/discover`` result says about the server.

    Attributes:
        capabilities: its capabilities (a plain dict).
        info: its ``serverInfo`` from the result's ``_meta`` (a plain dict, maybe empty).
        instructions: its instructions, if any.
    """

    capabilities: dict[str, Any]
    info: dict[str, Any]
    instructions: str | None


def discovered_server(result: Any) -> DiscoveredServer:
    """Read a ``server/discover`` result (tolerant: a member of the wrong type is left out)."""
    body = result if isinstance(result, Mapping) else {}
    caps = body.get("capabilities")
    meta = body.get("_meta")
    info = meta.get(SERVER_INFO_KEY) if isinstance(meta, Mapping) else None
    instructions = body.get("instructions")
    return DiscoveredServer(
        dict(caps) if isinstance(caps, Mapping) else {},
        dict(info) if isinstance(info, Mapping) else {},
        instructions if isinstance(instructions, str) else None,
    )
