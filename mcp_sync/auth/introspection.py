"""Verifying opaque access tokens by asking the authorization server (RFC 7662).

:class:`IntrospectionVerifier` POSTs each token to the introspection endpoint, authenticated
as this resource server's client, and accepts an ``active`` answer whose ``aud`` names this
resource (RFC 8707) and whose ``exp`` has not passed. Answers are cached under a digest of
the token (never the token itself) until the token expires or ``cache_ttl`` passes, whichever
is first, in a cache of at most ``max_cache_entries``.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidToken, VerifierUnavailable
from ..http.resource_uri import canonical_resource
from ..principal import Principal
from ._http import new_client, read_json

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = ["IntrospectionVerifier", "CACHE_TTL", "MAX_CACHE_ENTRIES"]

_log = logging.getLogger("mcp_sync.auth")

CACHE_TTL = 60.0
"""Seconds an introspection answer is reused at most (less when the token expires sooner)."""

MAX_CACHE_ENTRIES = 10_000
"""Answers kept at most (the least recently used go first)."""


class IntrospectionVerifier:
    """A :class:`~mcp_sync.principal.TokenVerifier` asking an RFC 7662 endpoint.

    Args:
        endpoint: the introspection endpoint URL.
        client_id, client_secret: this resource server's credentials there.
        audience: this resource's identifier; an answer's ``aud`` must name it.
        issuer: if given, an answer's ``iss`` (when present) must be it.
        auth_method: ``"client_secret_basic"`` (HTTP Basic, the default) or
            ``"client_secret_post"`` (credentials in the form).
        require_audience: refuse answers without ``aud`` (the default: the MCP spec requires
            the audience to be checked).
        cache_ttl, max_cache_entries: the answer cache's bounds.
        timeout: seconds for each call.
        http_client: an ``httpx.Client`` to use (default: one of its own).
    """

    def __init__(
        self,
        endpoint: str,
        *,
        client_id: str,
        client_secret: str,
        audience: str,
        issuer: str | None = None,
        auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic",
        require_audience: bool = True,
        cache_ttl: float = CACHE_TTL,
        max_cache_entries: int = MAX_CACHE_ENTRIES,
        timeout: float = 10.0,
        http_client: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.endpoint = endpoint
        self.audience = canonical_resource(audience)
        self.issuer = issuer
        self._client_id = client_id
        self._client_secret = client_secret
        self._auth_method = auth_method
        self._require_audience = require_audience
        self._cache_ttl = cache_ttl
        self._max_entries = max_cache_entries
        self._clock = clock
        self._own_client = http_client is None
        self._client = http_client if http_client is not None else new_client(timeout)
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, tuple[float, Principal]] = OrderedDict()
        self.calls = 0
        """Calls made to the endpoint so far (monitoring; tests)."""

    def close(self) -> None:
        """Close the HTTP client the verifier made for itself."""
        if self._own_client:
            self._client.close()

    def __call__(self, token: str) -> Principal:
        """The principal of an active token for this resource."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        now = self._clock()
        with self._lock:
            cached = self._cache.get(digest)
            if cached is not None:
                if cached[0] > now:
                    self._cache.move_to_end(digest)
                    return cached[1]
                del self._cache[digest]
        principal = self._introspect(token, now)
        until = now + self._cache_ttl
        if principal.expires_at is not None:
            until = min(until, principal.expires_at)
        with self._lock:
            self._cache[digest] = (until, principal)
            while len(self._cache) > self._max_entries:
                self._cache.popitem(last=False)
        return principal

    def _introspect(self, token: str, now: float) -> Principal:
        form = {"token": token, "token_type_hint": "access_token"}
        auth: tuple[str, str] | None = None
        if self._auth_method == "client_secret_post":
            form.update(client_id=self._client_id, client_secret=self._client_secret)
        else:
            auth = (self._client_id, self._client_secret)
        with self._lock:
            self.calls += 1
        status, answer = read_json(
            self._client, "POST", self.endpoint, data=form, auth=auth, what="introspection"
        )
        if status != 200 or not isinstance(answer, dict):
            if status in (400, 401, 403):
                _log.error(
                    "the introspection endpoint refused this server's request (HTTP %d)", status
                )
            raise VerifierUnavailable(f"introspection at {self.endpoint} answered HTTP {status}")
        return self._principal(answer, now)

    def _principal(self, answer: dict[str, Any], now: float) -> Principal:
        if answer.get("active") is not True:
            raise InvalidToken("the access token is not active")
        exp = answer.get("exp")
        if isinstance(exp, (int, float)) and exp <= now:
            raise InvalidToken("the access token has expired")
        if self.issuer is not None and answer.get("iss", self.issuer) != self.issuer:
            raise InvalidToken("the access token was issued by another server")
        aud = answer.get("aud")
        audiences = (
            (aud,) if isinstance(aud, str) else tuple(a for a in aud or () if isinstance(a, str))
        )
        if audiences or self._require_audience:
            if self.audience not in {canonical_resource(a) for a in audiences}:
                raise InvalidToken("the access token was not issued for this resource")
        else:
            audiences = (self.audience,)  # the server vouches for the token without naming it
        client_id = answer.get("client_id")
        subject = answer.get("sub", client_id)
        if not isinstance(subject, str) or not subject:
            raise InvalidToken("the introspection answer names no subject")
        scope = answer.get("scope")
        iss = answer.get("iss", self.issuer)
        return Principal(
            subject=subject,
            scopes=frozenset(scope.split()) if isinstance(scope, str) else frozenset(),
            client_id=client_id if isinstance(client_id, str) else None,
            audience=audiences,
            expires_at=float(exp) if isinstance(exp, (int, float)) else None,
            issuer=iss if isinstance(iss, str) else None,
            claims={k: v for k, v in answer.items() if k != "active"},
        )
