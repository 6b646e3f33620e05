"""Checks of incoming HTTP requests that need no server: media type, ``Host``, the body.

Each check takes plain values (or, for the body, a WSGI environ) and returns ``None`` (or
the body) when the request passes, or a :class:`Refusal`: the HTTP status and the text to
answer with. :class:`~mcp_sync.http.wsgi_app.McpWsgiApp` and the built-in server
(:mod:`mcp_sync.http.embedded_server`) answer with them; nothing here touches a socket.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO, Any

__all__ = [
    "LOOPBACK_HOSTS",
    "BODY_READ_CHUNK",
    "HostAllowList",
    "Refusal",
    "check_content_type",
    "media_type",
    "parse_host",
    "read_body",
]

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
"""Host names that always name this machine, allowed by every :class:`HostAllowList`."""

BODY_READ_CHUNK = 64 * 1024
"""Bytes asked of ``wsgi.input`` at a time when reading a body whose length is unknown."""

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"  # RFC 9110 token
_MEDIA_TYPE = re.compile(rf"\s*({_TOKEN})/({_TOKEN})\s*(?:;.*)?", re.DOTALL)
_HOST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9\-_.]*[A-Za-z0-9_])?\.?")
_PORT = re.compile(r"[0-9]{1,5}")


@dataclass(frozen=True)
class Refusal:
    """A request refused: answer ``status`` (e.g. ``"415 Unsupported Media Type"``) with
    ``detail`` as its plain-text body."""

    status: str
    detail: str


# -- media types -----------------------------------------------------------------------------------
def media_type(value: str | None) -> str:
    """The ``type/subtype`` of a ``Content-Type`` value, lower-cased, without parameters;
    ``""`` when it is missing or malformed (``text/plain; charset=application/json`` is
    ``text/plain``)."""
    match = _MEDIA_TYPE.fullmatch(value or "")
    if match is None:
        return ""
    return f"{match.group(1)}/{match.group(2)}".lower()


def check_content_type(value: str | None) -> Refusal | None:
    """A POST body must be declared ``application/json`` (parameters such as ``charset``
    may follow): 415 otherwise."""
    if value == "application/json" or media_type(value) == "application/json":
        return None  # the first test spares the usual value a regular expression
    return Refusal("415 Unsupported Media Type", "Content-Type must be application/json")


# -- Host ------------------------------------------------------------------------------------------
def parse_host(value: str) -> tuple[str, int | None] | None:
    """Split a ``Host`` header (or an allowed-host entry) into a lower-cased host and a port
    (``None`` when absent); ``None`` when it is not a valid host. An IPv6 literal needs its
    brackets (``[::1]:8000`` is ``("::1", 8000)``); a trailing dot is dropped."""
    port: int | None = None
    if value.startswith("["):
        address, bracket, rest = value[1:].partition("]")
        if not bracket:
            return None
        if rest:
            if not rest.startswith(":") or not _PORT.fullmatch(rest[1:]):
                return None
            port = int(rest[1:])
        try:
            host = str(ipaddress.IPv6Address(address))
        except ValueError:
            return None
    else:
        host, colon, port_text = value.partition(":")
        if colon:
            if not _PORT.fullmatch(port_text):
                return None
            port = int(port_text)
        if not _HOST_NAME.fullmatch(host):
            return None
        host = host.rstrip(".").lower()
    if port is not None and port > 65535:
        return None
    return host, port


class HostAllowList:
    """The ``Host`` values a server answers (a defence against DNS rebinding: a web page
    whose name was re-pointed at 127.0.0.1 still sends its own name as ``Host``).

    Loopback names (:data:`LOOPBACK_HOSTS`, any port) are always allowed; ``extra`` adds
    entries: ``"name"`` (any port), ``"name:port"`` (that port only), ``"[v6]"``, or ``"*"``
    (any host at all). A request without ``Host`` (HTTP/1.0; never a browser) is allowed.

    Raises:
        ValueError: an entry is not a host.
    """

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self.any_host = False
        self._any_port: set[str] = set(LOOPBACK_HOSTS)
        self._exact: set[tuple[str, int]] = set()
        for entry in extra:
            if entry == "*":
                self.any_host = True
                continue
            parsed = parse_host(entry)
            if parsed is None:
                raise ValueError(f"not a host: {entry!r}")
            host, port = parsed
            if port is None:
                self._any_port.add(host)
            else:
                self._exact.add((host, port))

    def allows(self, host_header: str | None) -> bool:
        """True if a request with this ``Host`` header may be answered."""
        if host_header is None or self.any_host:
            return True
        parsed = parse_host(host_header)
        if parsed is None:
            return False
        host, port = parsed
        return host in self._any_port or (port is not None and (host, port) in self._exact)

    def check(self, host_header: str | None) -> Refusal | None:
        """421 for a ``Host`` this list does not allow."""
        if self.allows(host_header):
            return None
        return Refusal("421 Misdirected Request", f"host {host_header!r} is not served here")


# -- bodies ----------------------------------------------------------------------------------------
def read_body(environ: dict[str, Any], max_bytes: int) -> bytes | Refusal:
    """Read a request body from a WSGI environ, at most ``max_bytes`` of it.

    * With ``Content-Length``: exactly that many bytes; 413 at once, before reading, when
      it exceeds ``max_bytes``; 411 when it is not a number.
    * Without it, when the server sets ``wsgi.input_terminated`` (gunicorn, waitress,
      werkzeug: they decode ``Transfer-Encoding: chunked`` and end the input at the end of
      the body): read to the end, 413 as soon as more than ``max_bytes`` arrived — never
      more than ``max_bytes`` plus one :data:`BODY_READ_CHUNK` is held in memory.
    * A chunked body the server passes on raw (no ``wsgi.input_terminated``: the standard
      library's ``wsgiref``) cannot be framed: 411. Otherwise no length means no body.
    * A body that stops arriving (the server's read timeout) is 408; a broken one 400.
    """
    stream: IO[bytes] = environ["wsgi.input"]
    declared = environ.get("CONTENT_LENGTH") or ""
    if declared:
        if not (declared.isascii() and declared.isdigit()):
            return Refusal("411 Length Required", "a valid Content-Length is required")
        digits = declared.lstrip("0")
        if (
            len(digits) > len(str(max_bytes)) or int(digits or "0") > max_bytes
        ):  # no int() of 5,000 digits
            return _too_large(max_bytes)
        return _read(stream, int(digits or "0"))
    if environ.get("wsgi.input_terminated"):
        body = _read(stream, max_bytes + 1)
        if isinstance(body, bytes) and len(body) > max_bytes:
            return _too_large(max_bytes)
        return body
    if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        return Refusal(
            "411 Length Required", "send Content-Length: this server cannot read a chunked body"
        )
    return b""


def _too_large(max_bytes: int) -> Refusal:
    return Refusal("413 Payload Too Large", f"the body exceeds {max_bytes} bytes")


def _read(stream: IO[bytes], limit: int) -> bytes | Refusal:
    """``limit`` bytes, or fewer if the input ends first."""
    parts: list[bytes] = []
    received = 0
    try:
        while received < limit:
            part = stream.read(min(BODY_READ_CHUNK, limit - received))
            if not part:
                break
            parts.append(part)
            received += len(part)
    except TimeoutError:
        return Refusal("408 Request Timeout", "the request body did not arrive in time")
    except (OSError, ValueError) as exc:
        return Refusal("400 Bad Request", f"the request body could not be read: {exc}")
    return b"".join(parts)
