"""Find who protects an MCP server and how to talk to it.

1. Protected resource metadata (RFC 9728): the ``resource_metadata`` URL of the 401's
   ``WWW-Authenticate`` when there is one, otherwise the well-known URIs in the spec's order
   -- path-aware first (``/.well-known/oauth-protected-resource/<path>``), then the root.
   Its ``resource`` must be the server's URL or a prefix of it (same origin; the same query
   if it has one), and its canonical form (:func:`~mcp_sync.http.resource_uri.canonical_resource`,
   the server's own rule) is then the ``resource`` indicator (RFC 8707).
2. Authorization server metadata: for the issuer the resource names, RFC 8414 then OpenID
   Connect discovery, path-aware (``/.well-known/oauth-authorization-server/<path>``,
   ``/.well-known/openid-configuration/<path>``, ``<issuer>/.well-known/openid-configuration``).
   Its ``issuer`` must be identical to the issuer the URL was built from (2026-07-28), and
   ``code_challenge_methods_supported`` must name ``S256`` (PKCE is required).

A server with no resource metadata at all is taken, as the 2025-03-26 revision did, to be
its own authorization server (issuer: its origin).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from ..errors import DiscoveryError
from ..http.resource_uri import canonical_resource
from ._client_http import get_json, require_secure

__all__ = [
    "ResourceMetadata",
    "ServerMetadata",
    "canonical_resource",
    "resource_metadata_urls",
    "server_metadata_urls",
    "discover_resource",
    "discover_server",
]

_log = logging.getLogger("mcp_sync.auth")


@dataclass(frozen=True)
class ResourceMetadata:
    """The protected resource metadata of an MCP server (RFC 9728), or what stands for it."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None = None
    url: str | None = None
    """Where it was read (``None``: no metadata; the 2025-03-26 fallback)."""


@dataclass(frozen=True)
class ServerMetadata:
    """Authorization server metadata (RFC 8414 or OpenID Connect discovery), validated."""

    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str
    registration_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    token_endpoint_auth_methods_supported: tuple[str, ...] = ("client_secret_basic",)
    code_challenge_methods_supported: tuple[str, ...] = ()
    client_id_metadata_document_supported: bool = False
    authorization_response_iss_parameter_supported: bool = False
    grant_types_supported: tuple[str, ...] = ("authorization_code", "implicit")
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), "", "", ""))


def resource_metadata_urls(server_url: str, header_url: str | None) -> list[str]:
    """The URLs to try for protected resource metadata, in the spec's order."""
    if header_url:
        return [header_url]
    path = urlsplit(server_url).path.rstrip("/")
    origin = _origin(server_url)
    root = f"{origin}/.well-known/oauth-protected-resource"
    return [f"{root}{path}", root] if path else [root]


def server_metadata_urls(issuer: str) -> list[str]:
    """The URLs to try for authorization server metadata, in the spec's order."""
    parts = urlsplit(issuer)
    origin = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    path = parts.path.rstrip("/")
    if not path:
        return [
            f"{origin}/.well-known/oauth-authorization-server",
            f"{origin}/.well-known/openid-configuration",
        ]
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


def _fetch(client: httpx.Client, url: str) -> Mapping[str, Any] | None:
    """The JSON object at ``url``; ``None`` when it is not there (4xx, 5xx, not JSON)."""
    try:
        answer = get_json(client, url)
    except (httpx.HTTPError, ValueError) as exc:
        _log.debug("metadata at %s: %s", url, exc)
        if isinstance(exc, ValueError):
            raise DiscoveryError(f"the metadata at {url} is too large ({exc})") from None
        raise DiscoveryError(f"cannot fetch metadata from {url}: {exc}") from None
    if answer.status_code != 200:
        _log.debug("metadata at %s: HTTP %s", url, answer.status_code)
        return None
    try:
        document = answer.json()
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _strings(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(item for item in value if isinstance(item, str))


def _covers(resource: str, server_url: str) -> bool:
    """True when ``resource`` names ``server_url``: same origin, a path prefix, and the
    same query when ``resource`` has one (both compared as canonical URIs)."""
    want, have = urlsplit(canonical_resource(server_url)), urlsplit(canonical_resource(resource))
    if (want.scheme, want.netloc) != (have.scheme, have.netloc):
        return False
    if have.query and have.query != want.query:
        return False
    prefix = have.path.rstrip("/")
    return want.path == prefix or want.path.startswith(prefix + "/")


def discover_resource(
    client: httpx.Client, server_url: str, header_url: str | None
) -> ResourceMetadata:
    """The protected resource metadata of ``server_url`` (see the module docstring)."""
    for url in resource_metadata_urls(server_url, header_url):
        require_secure(url, "resource metadata URL", DiscoveryError)
        document = _fetch(client, url)
        if document is None:
            continue
        resource = document.get("resource")
        servers = _strings(document.get("authorization_servers")) or ()
        if not isinstance(resource, str) or not servers:
            raise DiscoveryError(
                f"the resource metadata at {url} has no resource or no authorization_servers"
            )
        if not _covers(resource, server_url):
            raise DiscoveryError(
                f"the resource metadata at {url} is for {resource!r}, not for {server_url!r}"
            )
        scopes = _strings(document.get("scopes_supported"))
        return ResourceMetadata(canonical_resource(resource), servers, scopes, url)
    if header_url:
        raise DiscoveryError(f"no protected resource metadata at {header_url}")
    _log.info("no protected resource metadata for %s; trying its origin as issuer", server_url)
    return ResourceMetadata(canonical_resource(server_url), (_origin(server_url),))


def _validated(issuer: str, url: str, document: Mapping[str, Any]) -> ServerMetadata:
    if document.get("issuer") != issuer:
        raise DiscoveryError(
            f"the authorization server metadata at {url} names issuer "
            f"{document.get('issuer')!r}, not {issuer!r}; it is not used"
        )
    token_endpoint = document.get("token_endpoint")
    if not isinstance(token_endpoint, str):
        raise DiscoveryError(f"the authorization server metadata at {url} has no token_endpoint")
    require_secure(token_endpoint, "token endpoint", DiscoveryError)
    authorization_endpoint = document.get("authorization_endpoint")
    registration_endpoint = document.get("registration_endpoint")
    for name, endpoint in (
        ("authorization endpoint", authorization_endpoint),
        ("registration endpoint", registration_endpoint),
    ):
        if isinstance(endpoint, str):
            require_secure(endpoint, name, DiscoveryError)
    return ServerMetadata(
        issuer=issuer,
        authorization_endpoint=authorization_endpoint
        if isinstance(authorization_endpoint, str)
        else None,
        token_endpoint=token_endpoint,
        registration_endpoint=registration_endpoint
        if isinstance(registration_endpoint, str)
        else None,
        scopes_supported=_strings(document.get("scopes_supported")),
        token_endpoint_auth_methods_supported=_strings(
            document.get("token_endpoint_auth_methods_supported")
        )
        or ("client_secret_basic",),
        code_challenge_methods_supported=_strings(document.get("code_challenge_methods_supported"))
        or (),
        client_id_metadata_document_supported=document.get("client_id_metadata_document_supported")
        is True,
        authorization_response_iss_parameter_supported=document.get(
            "authorization_response_iss_parameter_supported"
        )
        is True,
        grant_types_supported=_strings(document.get("grant_types_supported"))
        or ("authorization_code", "implicit"),
        raw=dict(document),
    )


def discover_server(client: httpx.Client, issuer: str) -> ServerMetadata:
    """The validated metadata of the authorization server ``issuer``."""
    require_secure(issuer, "authorization server", DiscoveryError)
    for url in server_metadata_urls(issuer):
        document = _fetch(client, url)
        if document is not None:
            return _validated(issuer, url, document)
    raise DiscoveryError(
        f"no authorization server metadata for {issuer} (tried RFC 8414 and OpenID Connect"
        " discovery)"
    )
