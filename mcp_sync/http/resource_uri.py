"""The canonical URI of an MCP server: the one form its resource identifier takes wherever
it is compared or sent.

The client sends it as the ``resource`` indicator (RFC 8707), keys its tokens by it and
matches the protected resource metadata's ``resource`` against it; the server publishes it
as that ``resource`` and checks token audiences against it. Both use
:func:`canonical_resource`, so that they always agree.

The rule (MCP 2025-11-25, "Canonical Server URI"; RFC 8707, section 2; RFC 3986, section
6.2.2-6.2.3):

* scheme and host lowercased; a port that is the scheme's default (``:443`` for https,
  ``:80`` for http) dropped;
* no fragment (a resource indicator must not have one);
* no trailing ``/`` on the path (a bare origin has an empty path);
* the query kept as it is: RFC 8707 says a resource indicator SHOULD NOT have one, but a
  server whose URL needs one is identified by it, and dropping it would make two resources
  that differ only by their query one audience.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["canonical_resource", "DEFAULT_PORTS"]

DEFAULT_PORTS = {"http": 80, "https": 443}
"""The ports a canonical URI leaves out, by scheme."""


def canonical_resource(uri: str) -> str:
    """``uri`` as a canonical MCP server URI (see the module docstring):
    ``canonical_resource("HTTPS://Mcp.Example:443/mcp/?x=1#f")`` is
    ``"https://mcp.example/mcp?x=1"``. It never raises: an authority it cannot read (a
    port that is not a number) is only lowercased, and compares equal to nothing else.
    """
    parts = urlsplit(uri.strip())
    scheme = parts.scheme.lower()
    userinfo = parts.netloc.rpartition("@")[0]
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        return urlunsplit((scheme, parts.netloc.lower(), parts.path.rstrip("/"), parts.query, ""))
    netloc = host if port is None or DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    if userinfo:
        netloc = f"{userinfo}@{netloc}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))
