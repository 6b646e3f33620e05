"""The ``httpx.Auth`` flow both OAuth clients share: bearer header, refresh before expiry
and on 401, step-up on 403 ``insufficient_scope``, and one renewal at a time per server.

Threads that need a new token while another thread is getting one wait for it, at most
``wait_timeout`` seconds (then :class:`~mcp_sync.errors.AuthorizationTimeout`); the wait is
sliced, so Ctrl-C is seen. The thread doing the work re-reads the store first: a token
another thread obtained in the meantime is used as it is, so N threads that hit one expired
token cause one refresh request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Generator
from typing import Any

import httpx

from .._waiting import wait_sliced
from ..errors import AuthorizationTimeout, InsufficientScope, TokenEndpointError
from ..http.resource_uri import canonical_resource
from ._client_http import AuthlibSession
from .challenge import BearerChallenge, parse_challenge
from .discovery import ResourceMetadata, ServerMetadata, discover_server
from .registration import ClientRegistration
from .token_store import MemoryTokenStore, TokenSet, TokenStore

__all__ = ["BearerFlow", "HTTP_TIMEOUT", "REFRESH_LEEWAY", "MAX_STEP_UPS"]

_log = logging.getLogger("mcp_sync.auth")

HTTP_TIMEOUT = 30.0
"""Default seconds for each HTTP request to a metadata, registration or token endpoint."""
REFRESH_LEEWAY = 60.0
"""Default: refresh an access token this many seconds before it expires."""
MAX_STEP_UPS = 2
"""Default: re-authorizations for wider scope one request may cause."""


def _scopes(scope: str | None) -> set[str]:
    return set(scope.split()) if scope else set()


def token_set(answer: Any, resource: str, issuer: str, requested: str | None) -> TokenSet:
    """A :class:`TokenSet` from a token endpoint answer (authlib's dict)."""
    access = answer.get("access_token")
    token_type = str(answer.get("token_type") or "Bearer")
    if not isinstance(access, str) or not access:
        raise TokenEndpointError(f"the token endpoint of {issuer} returned no access_token")
    if token_type.lower() != "bearer":
        raise TokenEndpointError(
            f"the token endpoint of {issuer} returned a {token_type!r} token; only Bearer is used"
        )
    expires_in = answer.get("expires_in")
    expires_at = None
    now = time.time()
    if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool):
        expires_at = now + float(expires_in)
    refresh = answer.get("refresh_token")
    scope = answer.get("scope")
    return TokenSet(
        access_token=access,
        resource=resource,
        issuer=issuer,
        token_type="Bearer",
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        expires_at=expires_at,
        scope=scope if isinstance(scope, str) else requested,
        requested_scope=requested,
        issued_at=now,
    )


def oauth_client(session: AuthlibSession, registration: ClientRegistration, **options: Any) -> Any:
    """authlib's protocol client for ``registration``."""
    from authlib.oauth2.client import OAuth2Client

    return OAuth2Client(
        session,
        client_id=registration.client_id,
        client_secret=registration.client_secret,
        token_endpoint_auth_method=registration.token_endpoint_auth_method,
        **options,
    )


def token_request(client: Any, issuer: str, what: str, call: Any, **kwargs: Any) -> Any:
    """Run one authlib token request; its failures become :class:`TokenEndpointError`."""
    from authlib.oauth2.base import OAuth2Error

    try:
        return call(**kwargs)
    except OAuth2Error as exc:
        error = getattr(exc, "error", None)
        description = getattr(exc, "description", None)
        raise TokenEndpointError(
            f"the token endpoint of {issuer} refused the {what}: {error}"
            f"{' (' + description + ')' if description else ''}",
            error=error,
            description=description,
        ) from None
    except (httpx.HTTPError, ValueError, Exception) as exc:
        if isinstance(exc, TokenEndpointError):
            raise
        raise TokenEndpointError(
            f"the {what} at the token endpoint of {issuer} failed: {type(exc).__name__}: {exc}"
        ) from None


class BearerFlow(httpx.Auth):
    """The shared flow (see the module docstring); subclasses get tokens in
    :meth:`_obtain`."""

    requires_request_body = False
    requires_response_body = False

    def __init__(
        self,
        *,
        store: TokenStore | None,
        timeout: float,
        wait_timeout: float | None,
        refresh_leeway: float,
        max_step_ups: int,
        http_client: httpx.Client | None,
        step_up: bool,
    ) -> None:
        self.store: TokenStore = store if store is not None else MemoryTokenStore()
        self.timeout = timeout
        self.wait_timeout = wait_timeout
        self.refresh_leeway = refresh_leeway
        self.max_step_ups = max_step_ups
        self._step_up = step_up
        self._own_http = http_client is None
        self._http = http_client
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self.refreshes = 0
        """How many refresh requests this object sent (for tests and logs)."""

    # -- plumbing -----------------------------------------------------------------------------
    @property
    def http(self) -> httpx.Client:
        """The ``httpx.Client`` for the authorization server (never the MCP server's)."""
        with self._locks_lock:
            if self._http is None:
                self._http = httpx.Client(timeout=self.timeout)
            return self._http

    def close(self) -> None:
        """Close the HTTP client this object made (not one you passed)."""
        with self._locks_lock:
            client, self._http = self._http, None
        if client is not None and self._own_http:
            client.close()

    def __enter__(self) -> BearerFlow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lock(self, key: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(key, threading.Lock())

    def _acquire(self, key: str) -> threading.Lock:
        lock = self._lock(key)
        if not wait_sliced(lambda: False, lambda s: lock.acquire(timeout=s), self.wait_timeout):
            raise AuthorizationTimeout(
                f"waited {self.wait_timeout:g} s for another thread's authorization of {key}"
            )
        return lock

    # -- the flow -----------------------------------------------------------------------------
    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        url = str(request.url)
        key = canonical_resource(url)
        tokens = self._usable(key)
        self._sign(request, tokens)
        response = yield request
        step_ups = 0
        renewed = False
        while True:
            challenge = parse_challenge(response.headers.get_list("www-authenticate"))
            if response.status_code == 401 and not renewed:
                renewed = True
                tokens = self._renew(key, url, tokens, challenge, step_up=False)
            elif response.status_code == 403 and challenge.error == "insufficient_scope":
                granted = (
                    _scopes(tokens.requested_scope) | _scopes(tokens.scope) if tokens else set()
                )
                wider = _scopes(challenge.scope) - granted
                if not self._step_up or not wider or step_ups >= self.max_step_ups:
                    raise InsufficientScope(
                        f"{key} needs scope {challenge.scope!r} for this request"
                        + (
                            f" ({challenge.error_description})"
                            if challenge.error_description
                            else ""
                        )
                        + (
                            "; a grant with it was already tried"
                            if self._step_up and not wider
                            else ""
                        ),
                        tuple(sorted(_scopes(challenge.scope))),
                    )
                step_ups += 1
                tokens = self._renew(key, url, tokens, challenge, step_up=True)
            else:
                return
            self._sign(request, tokens)
            response = yield request

    @staticmethod
    def _sign(request: httpx.Request, tokens: TokenSet | None) -> None:
        if tokens is not None:
            request.headers["Authorization"] = f"Bearer {tokens.access_token}"

    def _usable(self, key: str) -> TokenSet | None:
        """The stored tokens, refreshed first when they expire within the leeway."""
        tokens = self.store.get_tokens(key)
        if tokens is None or not tokens.expires_within(self.refresh_leeway):
            return tokens
        if tokens.refresh_token is None:
            return tokens  # sent as they are: a 401 starts a new grant
        lock = self._acquire(key)
        try:
            current = self.store.get_tokens(key)
            if current is None or current.access_token != tokens.access_token:
                return current  # another thread renewed them
            try:
                return self._refresh(key, current)
            except TokenEndpointError as exc:
                _log.info("refresh for %s failed (%s); a new grant follows", key, exc.error)
                self.store.set_tokens(key, None)
                return None
        finally:
            lock.release()

    def _renew(
        self,
        key: str,
        url: str,
        failed: TokenSet | None,
        challenge: BearerChallenge,
        *,
        step_up: bool,
    ) -> TokenSet:
        lock = self._acquire(key)
        try:
            current = self.store.get_tokens(key)
            if current is not None and (
                failed is None or current.access_token != failed.access_token
            ):
                have = _scopes(current.scope) | _scopes(current.requested_scope)
                if not step_up or _scopes(challenge.scope) <= have:
                    return current  # another thread renewed them meanwhile
            if not step_up and current is not None and current.refresh_token is not None:
                try:
                    return self._refresh(key, current)
                except TokenEndpointError as exc:
                    _log.info("refresh for %s failed (%s); a new grant follows", key, exc.error)
            previous = current if step_up else None
            tokens = self._obtain(key, url, challenge, previous)
            self.store.set_tokens(key, tokens)
            return tokens
        finally:
            lock.release()

    def _refresh(self, key: str, tokens: TokenSet) -> TokenSet:
        """Trade the refresh token for new tokens (the caller holds the lock)."""
        metadata = discover_server(self.http, tokens.issuer)
        registration = self._registration_for_refresh(metadata)
        client = oauth_client(AuthlibSession(self.http), registration)
        self.refreshes += 1
        answer = token_request(
            client,
            metadata.issuer,
            "refresh token",
            client.refresh_token,
            url=metadata.token_endpoint,
            refresh_token=tokens.refresh_token,
            resource=tokens.resource,
        )
        fresh = token_set(answer, tokens.resource, metadata.issuer, tokens.requested_scope)
        if fresh.refresh_token is None:
            fresh = TokenSet(**{**fresh.to_json(), "refresh_token": tokens.refresh_token})
        if answer.get("scope") is None:
            fresh = TokenSet(**{**fresh.to_json(), "scope": tokens.scope})
        self.store.set_tokens(key, fresh)
        _log.info("refreshed the access token for %s", key)
        return fresh

    # -- for subclasses -----------------------------------------------------------------------
    def _registration_for_refresh(self, metadata: ServerMetadata) -> ClientRegistration:
        raise NotImplementedError

    def _obtain(
        self, key: str, url: str, challenge: BearerChallenge, previous: TokenSet | None
    ) -> TokenSet:
        raise NotImplementedError


def select_scope(
    challenge: BearerChallenge,
    resource: ResourceMetadata,
    previous: TokenSet | None,
    extra: str | None,
) -> str | None:
    """The spec's scope selection: the challenge's ``scope``, else the resource's
    ``scopes_supported``, else none; on step-up the union with what was asked before;
    plus the scopes the caller asked for."""
    chosen: list[str] = []
    if challenge.scope:
        chosen += challenge.scope.split()
    elif resource.scopes_supported:
        chosen += list(resource.scopes_supported)
    if previous is not None:
        chosen = (previous.requested_scope or previous.scope or "").split() + chosen
    if extra:
        chosen += extra.split()
    unique = list(dict.fromkeys(chosen))
    return " ".join(unique) or None
