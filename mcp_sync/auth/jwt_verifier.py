"""Verifying JWT access tokens (RFC 9068) with the authorization server's published keys.

:class:`JwtVerifier` checks each token's signature against the JWKS of its authorization
server (``jwks_uri``, given or read from the server's RFC 8414 / OpenID Connect metadata),
its ``typ`` header, an algorithm allow-list, ``iss``, ``aud`` (this resource, RFC 8707),
``exp`` and ``nbf`` with a leeway. Keys are cached for ``jwks_ttl`` seconds; a token signed
with a key the cache does not know (the server rotated its keys) refetches the set, at most
once per ``refetch_interval`` seconds, so that tokens with made-up key ids cannot make the
verifier hammer the server. Needs the ``jwt`` extra (PyJWT with its cryptography backend).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import InvalidToken, VerifierUnavailable
from ..http.resource_uri import canonical_resource
from ..principal import Principal
from ._http import new_client, read_json

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = [
    "JwtVerifier",
    "DEFAULT_ALGORITHMS",
    "JWKS_TTL",
    "REFETCH_INTERVAL",
    "MAX_KEYS",
]

_log = logging.getLogger("mcp_sync.auth")

DEFAULT_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "EdDSA",
)
"""Asymmetric signature algorithms accepted by default (never ``none``, never an HMAC one)."""

JWKS_TTL = 300.0
"""Seconds a fetched key set is used before it is fetched again."""

REFETCH_INTERVAL = 30.0
"""Fewest seconds between two fetches of the key set (an unknown ``kid`` asks for one)."""

MAX_KEYS = 64
"""Keys of a key set kept at most (the first ones with a usable algorithm)."""


def _jwt() -> Any:
    try:
        import jwt
    except ImportError as exc:  # pragma: no cover - the jwt extra is missing
        raise ImportError("JwtVerifier needs PyJWT: pip install 'mcp-sync-threaded[jwt]'") from exc
    return jwt


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: RFC 8414's path-inserted well-known URL, then
    OpenID Connect discovery's inserted and appended forms."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")

    def at(p: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, p, "", ""))

    urls = [at("/.well-known/oauth-authorization-server" + path)]
    urls.append(at("/.well-known/openid-configuration" + path))
    if path:
        urls.append(at(path + "/.well-known/openid-configuration"))
    return urls


class _KeySet:
    """The cached keys of one ``jwks_uri``: fetched once per ``ttl``, and again (rate
    limited) for an unknown key id. One thread fetches; the others wait for its result."""

    def __init__(
        self,
        locate: Callable[[], str],
        client: httpx.Client,
        ttl: float,
        refetch_interval: float,
        algorithms: Sequence[str],
        clock: Callable[[], float],
    ) -> None:
        self._locate = locate
        self._client = client
        self._ttl = ttl
        self._refetch_interval = refetch_interval
        self._algorithms = set(algorithms)
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str | None, Any] | None = None  # kid -> (jwt.PyJWK, its "alg")
        self._fetched_at = 0.0
        self._tried_at: float | None = None
        self.fetches = 0
        """Fetches of the key set so far (monitoring; tests)."""

    def key(self, kid: str | None) -> Any:
        """``(key, the alg its JWK declares or None)`` for ``kid`` (``None``: a token
        without ``kid``, accepted when the set has one key only); ``None`` when the set does
        not have it, even after a refetch."""
        keys = self._keys
        if keys is not None and self._clock() - self._fetched_at < self._ttl:
            found = self._lookup(keys, kid)
            if found is not None:
                return found
        with self._lock:
            now = self._clock()
            stale = self._keys is None or now - self._fetched_at >= self._ttl
            if stale or self._lookup(self._keys or {}, kid) is None:
                if self._tried_at is None or now - self._tried_at >= self._refetch_interval:
                    self._refresh(now, required=self._keys is None)
                elif self._keys is None:
                    raise VerifierUnavailable(
                        "the authorization server's keys could not be fetched"
                    )
            return self._lookup(self._keys or {}, kid)

    @staticmethod
    def _lookup(keys: dict[str | None, Any], kid: str | None) -> Any:
        if kid is None:
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid)

    def _refresh(self, now: float, *, required: bool) -> None:
        self._tried_at = now
        self.fetches += 1
        try:
            url = self._locate()
            status, document = read_json(self._client, "GET", url, what="JWKS")
            if status != 200 or not isinstance(document, dict):
                raise VerifierUnavailable(f"JWKS at {url} answered HTTP {status}")
            self._keys = self._parse(document)
            self._fetched_at = now
        except VerifierUnavailable as exc:
            if required:
                raise
            _log.warning("keeping the cached signing keys: %s", exc)  # a stale set beats none

    def _parse(self, document: dict[str, Any]) -> dict[str | None, Any]:
        jwt = _jwt()
        keys: dict[str | None, Any] = {}
        entries = document.get("keys")
        for entry in entries if isinstance(entries, list) else ():
            if len(keys) >= MAX_KEYS:
                break
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK.from_dict(entry)
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
                continue  # a key type or curve this backend does not know
            kid = entry.get("kid")
            declared = entry.get("alg")
            keys[kid if isinstance(kid, str) else None] = (
                key,
                declared if isinstance(declared, str) else None,
            )
        return keys


class JwtVerifier:
    """A :class:`~mcp_sync.principal.TokenVerifier` for JWT access tokens.

    Args:
        issuer: the authorization server's issuer identifier; tokens must carry it as
            ``iss``.
        audience: this resource's identifier (the guard's ``resource``); tokens must name it
            in ``aud`` (compared as canonical URIs).
        jwks_uri: the key set's URL (default: read from the issuer's metadata, whose
            ``issuer`` must match).
        algorithms: the accepted ``alg`` values (default :data:`DEFAULT_ALGORITHMS`).
        token_types: accepted ``typ`` headers (RFC 9068: ``at+jwt``); ``None`` accepts any
            (for servers that issue access tokens as plain ``JWT``).
        leeway: seconds of clock skew allowed on ``exp``, ``nbf`` and ``iat``.
        jwks_ttl: seconds a key set is used (:data:`JWKS_TTL`).
        refetch_interval: fewest seconds between two fetches (:data:`REFETCH_INTERVAL`).
        timeout: seconds for each call to the authorization server.
        http_client: an ``httpx.Client`` to use (default: one of its own).
    """

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_uri: str | None = None,
        algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
        token_types: Sequence[str] | None = ("at+jwt", "application/at+jwt"),
        leeway: float = 30.0,
        jwks_ttl: float = JWKS_TTL,
        refetch_interval: float = REFETCH_INTERVAL,
        timeout: float = 10.0,
        http_client: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        bad = [alg for alg in algorithms if alg == "none" or alg.startswith("HS")]
        if bad:
            raise ValueError(f"not a public-key algorithm: {', '.join(bad)}")
        _jwt()  # fail at construction, not at the first request, without the extra
        self.issuer = issuer
        self.audience = canonical_resource(audience)
        self.algorithms = tuple(algorithms)
        self.token_types = None if token_types is None else {t.lower() for t in token_types}
        self.leeway = leeway
        self._jwks_uri = jwks_uri
        self._own_client = http_client is None
        self._client = http_client if http_client is not None else new_client(timeout)
        self.keys = _KeySet(
            self._locate_jwks, self._client, jwks_ttl, refetch_interval, self.algorithms, clock
        )
        """The key cache (its ``fetches`` counts the fetches so far)."""

    def close(self) -> None:
        """Close the HTTP client the verifier made for itself."""
        if self._own_client:
            self._client.close()

    def _locate_jwks(self) -> str:
        if self._jwks_uri is not None:
            return self._jwks_uri
        for url in metadata_urls(self.issuer):
            status, document = read_json(
                self._client, "GET", url, what="authorization server metadata"
            )
            if status != 200 or not isinstance(document, dict):
                continue
            if document.get("issuer") != self.issuer:
                raise VerifierUnavailable(f"the metadata at {url} names another issuer")
            jwks_uri = document.get("jwks_uri")
            if isinstance(jwks_uri, str):
                self._jwks_uri = jwks_uri
                return jwks_uri
        raise VerifierUnavailable(f"no metadata with a jwks_uri for issuer {self.issuer}")

    def __call__(self, token: str) -> Principal:
        """The principal of a valid token; :class:`~mcp_sync.principal.InvalidToken` with a
        reason (that quotes nothing from the token) otherwise."""
        jwt = _jwt()
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the access token is not a JWT") from None
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise InvalidToken("the access token's signature algorithm is not accepted")
        typ = header.get("typ")
        if self.token_types is not None and (
            not isinstance(typ, str) or typ.lower() not in self.token_types
        ):
            raise InvalidToken("the JWT is not an access token (typ is not at+jwt)")
        kid = header.get("kid")
        key = self.keys.key(kid if isinstance(kid, str) else None)
        if key is None:
            raise InvalidToken("the access token is signed with an unknown key")
        key, declared_alg = key
        if declared_alg is not None and declared_alg != alg:
            raise InvalidToken("the access token's algorithm does not match its key")
        try:
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                issuer=self.issuer,
                leeway=self.leeway,
                options={"verify_aud": False, "require": ["exp", "iss", "sub", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the access token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the access token is not valid yet") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("the access token was issued by another server") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"the access token has no {exc.claim} claim") from None
        except jwt.PyJWTError:
            raise InvalidToken("the access token's signature or claims are not valid") from None
        return self._principal(claims)

    def _principal(self, claims: dict[str, Any]) -> Principal:
        audience = claims.get("aud")
        audiences = (audience,) if isinstance(audience, str) else tuple(audience or ())
        if not all(isinstance(a, str) for a in audiences) or self.audience not in {
            canonical_resource(a) for a in audiences
        }:
            raise InvalidToken("the access token was not issued for this resource")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise InvalidToken("the access token has no subject")
        client_id = claims.get("client_id", claims.get("azp"))
        exp = claims.get("exp")
        return Principal(
            subject=subject,
            scopes=_scopes(claims),
            client_id=client_id if isinstance(client_id, str) else None,
            audience=audiences,
            expires_at=float(exp) if isinstance(exp, (int, float)) else None,
            issuer=self.issuer,
            claims=claims,
        )


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    """RFC 9068's space-separated ``scope``, or the ``scp`` list some servers send."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return frozenset(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, list):
        return frozenset(s for s in scp if isinstance(s, str))
    if isinstance(scp, str):
        return frozenset(scp.split())
    return frozenset()
