"""``OAuthClientCredentials``: an ``httpx.Auth`` for machine-to-machine use (the OAuth
client credentials grant), discovering the token endpoint as :class:`~mcp_sync.auth.OAuth`
does and sending the ``resource`` indicator. No user, no browser, no listener."""

from __future__ import annotations

from typing import Any

import httpx

from ..errors import DiscoveryError, RegistrationError
from ._client_http import AuthlibSession
from .challenge import BearerChallenge
from .discovery import ServerMetadata, discover_resource, discover_server
from .flow import (
    HTTP_TIMEOUT,
    MAX_STEP_UPS,
    REFRESH_LEEWAY,
    BearerFlow,
    oauth_client,
    select_scope,
    token_request,
    token_set,
)
from .registration import ClientRegistration, choose_auth_method
from .token_store import TokenSet, TokenStore

__all__ = ["OAuthClientCredentials"]


class OAuthClientCredentials(BearerFlow):
    """Get tokens with the client credentials grant.

    Args:
        client_id: the client registered at the authorization server.
        client_secret: its secret (or ``None`` with ``private_key``).
        private_key: a PEM private key to authenticate with ``private_key_jwt`` (RFC 7523)
            instead of a secret; the assertion's audience is the issuer.
        signing_algorithm: the JWS algorithm for ``private_key`` (``RS256``, ``ES256``,
            ``PS256``, ``EdDSA`` ...).
        issuer: the authorization server it is registered at (``None``: whichever the
            server's resource metadata names first); a server protected by another fails
            with :class:`~mcp_sync.errors.RegistrationError`.
        scope: scopes asked for in addition to the spec's selection.
        token_endpoint_auth_method: ``client_secret_basic`` (default, or ``_post`` when only
            that is offered).
        step_up: on 403 ``insufficient_scope``, ask for a token with the union of the scopes
            (the spec lets such a client do so or give up; default True).
        store, timeout, wait_timeout, refresh_leeway, max_step_ups, http_client: as for
            :class:`~mcp_sync.auth.OAuth`.
    """

    def __init__(
        self,
        client_id: str,
        client_secret: str | None = None,
        *,
        private_key: str | None = None,
        signing_algorithm: str = "RS256",
        issuer: str | None = None,
        scope: str | None = None,
        token_endpoint_auth_method: str | None = None,
        step_up: bool = True,
        store: TokenStore | None = None,
        timeout: float = HTTP_TIMEOUT,
        wait_timeout: float | None = None,
        refresh_leeway: float = REFRESH_LEEWAY,
        max_step_ups: int = MAX_STEP_UPS,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(
            store=store,
            timeout=timeout,
            wait_timeout=wait_timeout if wait_timeout is not None else 6 * timeout,
            refresh_leeway=refresh_leeway,
            max_step_ups=max_step_ups,
            http_client=http_client,
            step_up=step_up,
        )
        if (client_secret is None) == (private_key is None):
            raise ValueError("pass one of client_secret= and private_key=")
        self.client_id = client_id
        self._client_secret = client_secret
        self._private_key = private_key
        self.signing_algorithm = signing_algorithm
        self.issuer = issuer
        self.scope = scope
        self.token_endpoint_auth_method = token_endpoint_auth_method

    def __repr__(self) -> str:
        return f"OAuthClientCredentials(client_id={self.client_id!r}, issuer={self.issuer!r})"

    def _registration_for_refresh(self, metadata: ServerMetadata) -> ClientRegistration:
        if self.issuer is not None and self.issuer != metadata.issuer:
            raise RegistrationError(
                f"client_id {self.client_id!r} is registered at {self.issuer}, but the server"
                f" is protected by {metadata.issuer}"
            )
        method = "private_key_jwt" if self._private_key is not None else None
        return ClientRegistration(
            client_id=self.client_id,
            issuer=metadata.issuer,
            kind="pre-registered",
            client_secret=self._client_secret,
            token_endpoint_auth_method=method
            or self.token_endpoint_auth_method
            or choose_auth_method(metadata, True),
        )

    def _client(self, metadata: ServerMetadata) -> Any:
        """authlib's client; with ``private_key``, its ``private_key_jwt`` authentication."""
        registration = self._registration_for_refresh(metadata)
        client = oauth_client(AuthlibSession(self.http), registration)
        if self._private_key is not None:
            from authlib.oauth2.rfc7523 import PrivateKeyJWT
            from joserfc.jwk import ECKey, OKPKey, RSAKey

            alg = self.signing_algorithm
            kind = ECKey if alg.startswith("ES") else OKPKey if alg == "EdDSA" else RSAKey
            client.client_secret = kind.import_key(self._private_key)
            client.register_client_auth_method(PrivateKeyJWT(metadata.issuer, alg=alg))
        return client

    def _obtain(
        self, key: str, url: str, challenge: BearerChallenge, previous: TokenSet | None
    ) -> TokenSet:
        resource = discover_resource(self.http, url, challenge.resource_metadata)
        servers = resource.authorization_servers
        issuer = self.issuer if self.issuer in servers else servers[0]
        metadata = discover_server(self.http, issuer)
        if metadata.token_endpoint is None:  # pragma: no cover - validated in discovery
            raise DiscoveryError(f"{metadata.issuer} has no token endpoint")
        scope = select_scope(challenge, resource, previous, self.scope)
        client = self._client(metadata)
        extra = {"scope": scope} if scope else {}
        answer = token_request(
            client,
            metadata.issuer,
            "client credentials",
            client.fetch_token,
            url=metadata.token_endpoint,
            grant_type="client_credentials",
            resource=resource.resource,
            **extra,
        )
        return token_set(answer, resource.resource, metadata.issuer, scope)
