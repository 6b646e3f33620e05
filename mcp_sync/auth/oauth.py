"""``OAuth``: an ``httpx.Auth`` that authorizes a user for an MCP server, by the
authorization code grant with PKCE (S256) and a loopback redirect.

Example::

    from mcp_sync import Client
    from mcp_sync.auth import OAuth, FileTokenStore

    auth = OAuth(store=FileTokenStore("~/.cache/my-tool/tokens.json"))
    with Client.http("https://mcp.example.com/mcp", auth=auth) as client:
        print(client.list_tools())

On the first 401 it reads the challenge, discovers the resource's and the authorization
server's metadata (:mod:`mcp_sync.auth.discovery`), picks a client registration
(:mod:`mcp_sync.auth.registration`), listens on ``127.0.0.1`` for the redirect, opens the
authorization URL (``open_url``: by default the browser, and the URL is printed), trades the
code for tokens (with ``resource`` and the PKCE verifier) and retries. See
:mod:`mcp_sync.auth.flow` for refresh, step-up and threads.
"""

from __future__ import annotations

import logging
import secrets
import sys
import threading
import webbrowser
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx

from ..errors import (
    AuthorizationDenied,
    AuthorizationError,
    AuthorizationRejected,
    DiscoveryError,
    RegistrationError,
)
from ._client_http import AuthlibSession, is_loopback
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
from .loopback import AUTHORIZE_TIMEOUT, LoopbackListener
from .registration import (
    ClientRegistration,
    choose_auth_method,
    register_dynamically,
    valid_metadata_url,
)
from .token_store import TokenSet, TokenStore

__all__ = ["OAuth", "open_in_browser"]

_log = logging.getLogger("mcp_sync.auth")


def open_in_browser(url: str) -> None:
    """The default ``open_url``: print the URL to stderr and try to open a browser on it."""
    print(f"To authorize, open this URL in a browser:\n  {url}", file=sys.stderr, flush=True)
    try:
        webbrowser.open(url)
    except Exception:
        pass


class OAuth(BearerFlow):
    """Authorize a user for a protected MCP server (see the module docstring).

    Args:
        client_id: a client registered beforehand at the authorization server (then used
            before anything else); ``client_secret`` with it for a confidential client.
        client_secret: the secret of ``client_id``.
        issuer: the authorization server ``client_id`` belongs to; a server protected by
            another one then fails with :class:`~mcp_sync.errors.RegistrationError` instead
            of showing it the credentials. ``None``: whichever the server names.
        token_endpoint_auth_method: for ``client_id``; default ``client_secret_basic`` (or
            ``_post`` when only that is offered) with a secret, ``none`` without.
        client_metadata_url: the HTTPS URL of your client ID metadata document, used as
            ``client_id`` where the authorization server supports them.
        client_name: the name dynamic registration sends.
        scope: scopes to ask for in addition to the ones the spec's selection picks.
        redirect_uri: ``http://127.0.0.1:PORT/PATH`` (or ``localhost``) to listen on, for a
            client registered with a fixed redirect; default a free port, ``/callback``.
        open_url: ``open_url(url)`` shows the authorization URL to the user (default
            :func:`open_in_browser`). It may block (a test that plays the browser does) or
            return at once; either way the listener then waits for the redirect.
        store: where tokens and registrations are kept (default in memory).
        authorize_timeout: seconds to wait for the redirect.
        timeout: seconds for each HTTP request to the authorization server and metadata.
        wait_timeout: seconds a thread waits for another thread's authorization or refresh
            (default ``authorize_timeout`` plus four ``timeout``).
        refresh_leeway: refresh this many seconds before the access token expires.
        max_step_ups: re-authorizations for a wider scope (403 ``insufficient_scope``) one
            request may cause.
        offline_access: ask for ``offline_access`` (a refresh token) when the authorization
            server lists it in ``scopes_supported``.
        http_client: an ``httpx.Client`` for the authorization server (TLS, proxies).
    """

    def __init__(
        self,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        issuer: str | None = None,
        token_endpoint_auth_method: str | None = None,
        client_metadata_url: str | None = None,
        client_name: str = "mcp_sync",
        scope: str | None = None,
        redirect_uri: str | None = None,
        open_url: Callable[[str], object] | None = None,
        store: TokenStore | None = None,
        authorize_timeout: float = AUTHORIZE_TIMEOUT,
        timeout: float = HTTP_TIMEOUT,
        wait_timeout: float | None = None,
        refresh_leeway: float = REFRESH_LEEWAY,
        max_step_ups: int = MAX_STEP_UPS,
        offline_access: bool = True,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(
            store=store,
            timeout=timeout,
            wait_timeout=wait_timeout
            if wait_timeout is not None
            else authorize_timeout + 4 * timeout,
            refresh_leeway=refresh_leeway,
            max_step_ups=max_step_ups,
            http_client=http_client,
            step_up=True,
        )
        if client_secret is not None and client_id is None:
            raise ValueError("client_secret= needs client_id=")
        if client_metadata_url is not None and not valid_metadata_url(client_metadata_url):
            raise ValueError("client_metadata_url must be an https URL with a path")
        if redirect_uri is not None:
            parts = urlsplit(redirect_uri)
            if parts.scheme != "http" or not is_loopback(redirect_uri) or parts.port is None:
                raise ValueError(
                    "redirect_uri must be http://127.0.0.1:PORT/PATH or http://localhost:PORT/PATH"
                )
        self.client_id = client_id
        self._client_secret = client_secret
        self.issuer = issuer
        self.token_endpoint_auth_method = token_endpoint_auth_method
        self.client_metadata_url = client_metadata_url
        self.client_name = client_name
        self.scope = scope
        self.redirect_uri = redirect_uri
        self.open_url: Callable[[str], object] = open_url or open_in_browser
        self.authorize_timeout = authorize_timeout
        self.offline_access = offline_access
        self._cancel = threading.Event()

    def __repr__(self) -> str:
        return f"OAuth(client_id={self.client_id!r}, issuer={self.issuer!r})"

    def cancel(self) -> None:
        """Cancel the authorization waiting for its redirect now (it raises
        :class:`~mcp_sync.errors.AuthorizationCancelled`; the listener closes)."""
        self._cancel.set()

    # -- registration -------------------------------------------------------------------------
    def _pre_registered(self, metadata: ServerMetadata) -> ClientRegistration | None:
        if self.client_id is None:
            return None
        if self.issuer is not None and self.issuer != metadata.issuer:
            raise RegistrationError(
                f"client_id {self.client_id!r} is registered at {self.issuer}, but the server"
                f" is protected by {metadata.issuer}: pass credentials registered there"
            )
        method = self.token_endpoint_auth_method or choose_auth_method(
            metadata, self._client_secret is not None
        )
        return ClientRegistration(
            client_id=self.client_id,
            issuer=metadata.issuer,
            kind="pre-registered",
            client_secret=self._client_secret,
            token_endpoint_auth_method=method,
        )

    def _registration_for_refresh(self, metadata: ServerMetadata) -> ClientRegistration:
        found = self._pre_registered(metadata) or self.store.get_client(metadata.issuer)
        if found is not None:
            return found
        if self.client_metadata_url and metadata.client_id_metadata_document_supported:
            return self._metadata_document(metadata)
        raise RegistrationError(f"no client registration at {metadata.issuer} to refresh with")

    def _metadata_document(self, metadata: ServerMetadata) -> ClientRegistration:
        assert self.client_metadata_url is not None
        return ClientRegistration(
            client_id=self.client_metadata_url, issuer=metadata.issuer, kind="metadata-document"
        )

    def _listener(self, stored: ClientRegistration | None) -> LoopbackListener:
        uri = self.redirect_uri
        if uri is None and stored is not None:
            uri = next((u for u in stored.redirect_uris if is_loopback(u)), None)
        if uri is None:
            return LoopbackListener()
        parts = urlsplit(uri)
        host_name = parts.hostname or "127.0.0.1"
        host = "127.0.0.1" if host_name == "localhost" else host_name
        return LoopbackListener(host, parts.port or 0, parts.path or "/", host_name)

    # -- the grant ----------------------------------------------------------------------------
    def _obtain(
        self, key: str, url: str, challenge: BearerChallenge, previous: TokenSet | None
    ) -> TokenSet:
        resource = discover_resource(self.http, url, challenge.resource_metadata)
        servers = resource.authorization_servers
        issuer = self.issuer if self.issuer in servers else servers[0]
        metadata = discover_server(self.http, issuer)
        if "S256" not in metadata.code_challenge_methods_supported:
            raise DiscoveryError(
                f"the authorization server {metadata.issuer} does not advertise PKCE S256"
                " (code_challenge_methods_supported); refusing to authorize"
            )
        if metadata.authorization_endpoint is None:
            raise DiscoveryError(
                f"the authorization server {metadata.issuer} has no authorization_endpoint"
            )
        scope = select_scope(challenge, resource, previous, self.scope)
        if (
            scope
            and self.offline_access
            and "offline_access" in (metadata.scopes_supported or ())
            and "offline_access" not in scope.split()
        ):
            scope = f"{scope} offline_access"
        registration = self._pre_registered(metadata)
        stored = None
        if registration is None:
            stored = self.store.get_client(metadata.issuer)
            if stored is not None and stored.kind == "pre-registered":
                stored = None
        try:
            listener = self._listener(registration or stored)
        except AuthorizationError:
            if stored is None or stored.kind != "dynamic":
                raise
            self.store.set_client(metadata.issuer, None)  # its port is taken: register anew
            stored = None
            listener = LoopbackListener()
        with listener:
            if registration is None:
                registration = stored
            if registration is None:
                if self.client_metadata_url and metadata.client_id_metadata_document_supported:
                    registration = self._metadata_document(metadata)
                else:
                    registration = register_dynamically(
                        self.http,
                        metadata,
                        client_name=self.client_name,
                        redirect_uris=[listener.redirect_uri],
                        grant_types=["authorization_code", "refresh_token"],
                        scope=scope,
                    )
                    self.store.set_client(metadata.issuer, registration)
            return self._authorize(key, resource.resource, metadata, registration, listener, scope)

    def _authorize(
        self,
        key: str,
        resource: str,
        metadata: ServerMetadata,
        registration: ClientRegistration,
        listener: LoopbackListener,
        scope: str | None,
    ) -> TokenSet:
        from authlib.common.security import generate_token

        client = oauth_client(
            AuthlibSession(self.http),
            registration,
            redirect_uri=listener.redirect_uri,
            code_challenge_method="S256",
        )
        verifier = generate_token(64)
        state = secrets.token_urlsafe(32)
        assert metadata.authorization_endpoint is not None
        url, _ = client.create_authorization_url(
            metadata.authorization_endpoint,
            state=state,
            code_verifier=verifier,
            scope=scope,
            resource=resource,
        )
        self._cancel.clear()
        _log.info("authorizing %s at %s (scope %r)", key, metadata.issuer, scope)
        self.open_url(url)
        answer = listener.wait(self.authorize_timeout, self._cancel.is_set)
        self._check_redirect(answer, state, metadata)
        token = token_request(
            client,
            metadata.issuer,
            "authorization code",
            client.fetch_token,
            url=metadata.token_endpoint,
            grant_type="authorization_code",
            code=answer["code"],
            code_verifier=verifier,
            redirect_uri=listener.redirect_uri,
            resource=resource,
        )
        return token_set(token, resource, metadata.issuer, scope)

    @staticmethod
    def _check_redirect(answer: dict[str, str], state: str, metadata: ServerMetadata) -> None:
        """``state`` first, then ``iss`` (RFC 9207, compared as a plain string), then
        ``error``: an answer failing a check is discarded unread."""
        if not secrets.compare_digest(answer.get("state", ""), state):
            raise AuthorizationRejected(
                "the redirect's state does not match the authorization request; it was discarded"
            )
        iss = answer.get("iss")
        if iss is not None and iss != metadata.issuer:
            raise AuthorizationRejected(
                f"the redirect names issuer {iss!r}, not {metadata.issuer!r} (RFC 9207);"
                " it was discarded"
            )
        if iss is None and metadata.authorization_response_iss_parameter_supported:
            raise AuthorizationRejected(
                f"the redirect has no iss although {metadata.issuer} promises one (RFC 9207);"
                " it was discarded"
            )
        error = answer.get("error")
        if error:
            description = answer.get("error_description")
            raise AuthorizationDenied(
                f"the authorization server {metadata.issuer} answered {error}"
                + (f": {description}" if description else ""),
                error=error,
                description=description,
            )
        if not answer.get("code"):
            raise AuthorizationRejected("the redirect carries no authorization code")
