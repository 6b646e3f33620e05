"""How the client identifies itself to an authorization server, in the spec's order:

1. pre-registered credentials (``client_id``/``client_secret`` given to
   :class:`~mcp_sync.auth.OAuth`), bound to one issuer when ``issuer=`` says which;
2. a client ID metadata document: the HTTPS URL of a JSON document you host is the
   ``client_id``, when the server's metadata has ``client_id_metadata_document_supported``;
3. dynamic client registration (RFC 7591) at the server's ``registration_endpoint``
   (deprecated by 2026-07-28, kept for servers without the former).

A registration is kept per issuer (in the token store): credentials from one authorization
server are never shown to another.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..errors import RegistrationError
from ._client_http import post
from .discovery import ServerMetadata

__all__ = ["ClientRegistration", "register_dynamically", "choose_auth_method"]

_log = logging.getLogger("mcp_sync.auth")

_METHODS = ("none", "client_secret_basic", "client_secret_post")


@dataclass(frozen=True)
class ClientRegistration:
    """A client identity at one authorization server (``issuer``).

    ``kind`` is ``"pre-registered"``, ``"metadata-document"`` or ``"dynamic"``. The secret
    never appears in ``repr``.
    """

    client_id: str
    issuer: str
    kind: str
    client_secret: str | None = None
    token_endpoint_auth_method: str = "none"
    redirect_uris: tuple[str, ...] = ()

    def __repr__(self) -> str:
        secret = "set" if self.client_secret else "none"
        return (
            f"ClientRegistration(client_id={self.client_id!r}, issuer={self.issuer!r}, "
            f"kind={self.kind!r}, client_secret=<{secret}>, "
            f"token_endpoint_auth_method={self.token_endpoint_auth_method!r})"
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (for a persistent store)."""
        data = asdict(self)
        data["redirect_uris"] = list(self.redirect_uris)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClientRegistration:
        """The inverse of :meth:`to_json`."""
        return cls(**{**data, "redirect_uris": tuple(data.get("redirect_uris") or ())})


def choose_auth_method(metadata: ServerMetadata, has_secret: bool) -> str:
    """The token endpoint authentication to use with a secret (or without one)."""
    supported = metadata.token_endpoint_auth_methods_supported
    if not has_secret:
        return "none"
    for method in ("client_secret_basic", "client_secret_post"):
        if method in supported:
            return method
    return "client_secret_basic"


def register_dynamically(
    client: httpx.Client,
    metadata: ServerMetadata,
    *,
    client_name: str,
    redirect_uris: list[str],
    grant_types: list[str],
    scope: str | None,
) -> ClientRegistration:
    """Register with RFC 7591 (``application_type: native``: a loopback redirect)."""
    endpoint = metadata.registration_endpoint
    if endpoint is None:
        raise RegistrationError(
            f"the authorization server {metadata.issuer} offers no dynamic registration and"
            " no client ID metadata documents: pass client_id= (and client_secret=) of a"
            " client registered there"
        )
    supported = metadata.token_endpoint_auth_methods_supported
    method = next((m for m in _METHODS if m in supported), "client_secret_basic")
    body: dict[str, Any] = {
        "client_name": client_name,
        "redirect_uris": redirect_uris,
        "grant_types": grant_types,
        "response_types": ["code"] if "authorization_code" in grant_types else [],
        "token_endpoint_auth_method": method,
        "application_type": "native",
    }
    if scope:
        body["scope"] = scope
    try:
        answer = post(client, endpoint, json_body=body)
    except (httpx.HTTPError, ValueError) as exc:
        raise RegistrationError(f"dynamic registration at {endpoint} failed: {exc}") from None
    try:
        document = answer.json()
    except ValueError:
        document = None
    if answer.status_code not in (200, 201) or not isinstance(document, dict):
        error = document.get("error") if isinstance(document, dict) else None
        description = document.get("error_description") if isinstance(document, dict) else None
        raise RegistrationError(
            f"dynamic registration at {endpoint} was refused (HTTP {answer.status_code}"
            f"{', ' + str(error) if error else ''}"
            f"{': ' + str(description) if description else ''})",
            error=error if isinstance(error, str) else None,
            description=description if isinstance(description, str) else None,
        )
    client_id = document.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise RegistrationError(f"dynamic registration at {endpoint} returned no client_id")
    secret = document.get("client_secret")
    secret = secret if isinstance(secret, str) and secret else None
    answered = document.get("token_endpoint_auth_method")
    if not isinstance(answered, str):
        answered = method if secret or method == "none" else "none"
    if answered != "none" and secret is None:
        answered = "none"
    _log.info("registered client %s at %s", client_id, metadata.issuer)
    uris = document.get("redirect_uris")
    return ClientRegistration(
        client_id=client_id,
        issuer=metadata.issuer,
        kind="dynamic",
        client_secret=secret,
        token_endpoint_auth_method=answered,
        redirect_uris=tuple(u for u in uris if isinstance(u, str))
        if isinstance(uris, list)
        else tuple(redirect_uris),
    )


def valid_metadata_url(url: str) -> bool:
    """A client ID metadata document URL must be HTTPS with a path."""
    parts = urlsplit(url)
    return parts.scheme == "https" and parts.path not in ("", "/")
