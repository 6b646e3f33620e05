"""The OAuth 2.1 resource-server guard of the WSGI app: bearer tokens in, principals out.

:class:`BearerAuth` is what ``server.wsgi_app(auth=BearerAuth(...))`` takes: a
:class:`~mcp_sync.principal.TokenVerifier` and the settings of this resource server (its
resource identifier, the authorization servers it trusts, its scopes). With it the app:

* serves its protected resource metadata (RFC 9728) at
  ``/.well-known/oauth-protected-resource`` followed by the resource's path, and at the bare
  well-known path (:meth:`BearerAuth.metadata_app` serves it from a Flask site's root);
* answers a request without a bearer token ``401`` with
  ``WWW-Authenticate: Bearer resource_metadata="...", scope="..."``, one whose token the
  verifier refuses (expired, badly signed, issued for another resource) ``401`` with
  ``error="invalid_token"``, and a malformed ``Authorization`` header or a token in the query
  string ``400`` with ``error="invalid_request"`` (RFC 6750, section 3.1);
* checks the token's audience against ``resource`` (RFC 8707), whatever the verifier did;
* refuses a request whose token lacks a scope it needs (``required_scopes``, and a tool's own
  ``scopes=``) with ``403`` and ``error="insufficient_scope", scope="..."``, before its
  handler runs;
* puts the principal in the WSGI ``environ`` (:func:`principal_of`), from where it reaches the
  handler as :attr:`ctx.principal <mcp_sync.context.Context.principal>`.

Nothing of the token is ever logged or put in an error message.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ..errors import InvalidToken, VerifierUnavailable
from ..jsonrpc import Request
from ..principal import Principal, TokenVerifier
from .cors import requested_headers
from .resource_uri import canonical_resource

if TYPE_CHECKING:  # pragma: no cover
    from ..server import Server

__all__ = [
    "BearerAuth",
    "AuthRefusal",
    "principal_of",
    "owner_of",
    "canonical_resource",
    "PRINCIPAL_KEY",
    "METADATA_PATH",
    "MAX_AUTHORIZATION_BYTES",
]

_log = logging.getLogger("mcp_sync.auth")

PRINCIPAL_KEY = "mcp_sync.principal"
"""The WSGI ``environ`` key under which the app keeps an authenticated request's principal."""

METADATA_PATH = "/.well-known/oauth-protected-resource"
"""The well-known path of RFC 9728 protected resource metadata."""

MAX_AUTHORIZATION_BYTES = 16 * 1024
"""The longest ``Authorization`` header the guard reads; a longer one gets ``400``."""

_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +([A-Za-z0-9\-._~+/]+=*)")
"""RFC 6750's ``credentials = "Bearer" 1*SP b64token`` (the scheme is case-insensitive)."""

_QUOTABLE = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")
"""What RFC 6750 does not allow inside a quoted ``WWW-Authenticate`` value."""

StartResponse = Callable[..., Any]


def principal_of(environ: Mapping[str, Any]) -> Principal | None:
    """The principal of an authenticated request (``None``: the app checks no tokens)."""
    principal = environ.get(PRINCIPAL_KEY)
    return principal if isinstance(principal, Principal) else None


def owner_of(environ: Mapping[str, Any]) -> str | None:
    """The :attr:`~mcp_sync.principal.Principal.key` of the request's principal: a
    2025-11-25 session is bound to the key of the request that created it, and another
    principal naming its ``Mcp-Session-Id`` is told ``404`` (sessions are keyed by both)."""
    principal = principal_of(environ)
    return None if principal is None else principal.key


@dataclass(frozen=True)
class AuthRefusal:
    """How the guard refuses a request: an HTTP status, its ``WWW-Authenticate`` challenge
    and an OAuth-style JSON body (``error``, ``error_description``)."""

    status: str
    challenge: str | None
    error: str | None
    description: str
    retry_after: int | None = None

    def headers(self) -> list[tuple[str, str]]:
        """The response headers besides ``Content-Type`` and ``Content-Length``."""
        headers = [("Cache-Control", "no-store")]
        if self.challenge is not None:
            headers.append(("WWW-Authenticate", self.challenge))
        if self.retry_after is not None:
            headers.append(("Retry-After", str(self.retry_after)))
        return headers

    def respond(self, start_response: StartResponse) -> list[bytes]:
        """Send the refusal."""
        body = {"error": self.error or "unauthorized", "error_description": self.description}
        data = json.dumps(body).encode()
        start_response(
            self.status,
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(data))),
                *self.headers(),
            ],
        )
        return [data]


def _quoted(value: str) -> str:
    return '"' + _QUOTABLE.sub("?", value) + '"'


@dataclass(frozen=True)
class BearerAuth:
    """The resource-server settings of a protected MCP app, and its guard.

    Args:
        verifier: turns a token into a :class:`~mcp_sync.principal.Principal` (see
            :mod:`mcp_sync.auth` for JWT, introspection and static verifiers).
        resource: this server's resource identifier: the canonical URL clients connect to
            (``https://mcp.example.com/mcp``). Tokens must name it in their audience.
        authorization_servers: the issuer URLs of the authorization servers clients may get
            tokens from (advertised in the metadata).
        scopes_supported: the scopes advertised in the metadata (default: ``required_scopes``
            and every tool's ``scopes=`` of the server, as of each metadata request).
        required_scopes: scopes every request needs.
        resource_name: a human-readable name for the metadata (``resource_name``).
        resource_documentation: a URL of documentation for developers.
        metadata_url: where the metadata is published (default: RFC 9728's well-known URL of
            ``resource``); named in every challenge as ``resource_metadata``.
        max_authorization_bytes: the longest ``Authorization`` header read.
    """

    verifier: TokenVerifier | Callable[[str], Principal | None]
    resource: str
    authorization_servers: Sequence[str]
    scopes_supported: Sequence[str] | None = None
    required_scopes: Sequence[str] = ()
    resource_name: str | None = None
    resource_documentation: str | None = None
    metadata_url: str | None = None
    max_authorization_bytes: int = MAX_AUTHORIZATION_BYTES
    _canonical: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.resource)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
            raise ValueError("resource must be an absolute http(s) URL without a fragment")
        if not self.authorization_servers:
            raise ValueError("name at least one authorization server")
        object.__setattr__(self, "_canonical", canonical_resource(self.resource))

    # -- metadata (RFC 9728) ------------------------------------------------------------------
    @property
    def resource_path(self) -> str:
        """The path of ``resource`` (``""`` for a bare origin)."""
        return urlsplit(self._canonical).path

    @property
    def resource_metadata_url(self) -> str:
        """The URL of the metadata document, as named in every challenge."""
        if self.metadata_url is not None:
            return self.metadata_url
        parts = urlsplit(self._canonical)
        return urlunsplit((parts.scheme, parts.netloc, METADATA_PATH + parts.path, "", ""))

    def metadata(self, server: Server | None = None) -> dict[str, Any]:
        """The protected resource metadata document (RFC 9728, section 2)."""
        document: dict[str, Any] = {
            "resource": self._canonical,
            "authorization_servers": list(self.authorization_servers),
            "scopes_supported": self._scopes_supported(server),
            "bearer_methods_supported": ["header"],
        }
        if self.resource_name is not None:
            document["resource_name"] = self.resource_name
        if self.resource_documentation is not None:
            document["resource_documentation"] = self.resource_documentation
        return document

    def _scopes_supported(self, server: Server | None) -> list[str]:
        if self.scopes_supported is not None:
            return list(self.scopes_supported)
        scopes = dict.fromkeys(self.required_scopes)
        if server is not None:
            for tool in server.tools():
                scopes.update(dict.fromkeys(sorted(tool.scopes)))
        return list(scopes)

    def is_metadata_path(self, environ: Mapping[str, Any]) -> bool:
        """True for a request of the metadata document (the full path: ``SCRIPT_NAME`` and
        ``PATH_INFO``), at the path-suffixed well-known URL or the bare one."""
        path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
        path = path.rstrip("/") or "/"
        return path in (METADATA_PATH, METADATA_PATH + self.resource_path)

    def serve_metadata(
        self,
        start_response: StartResponse,
        server: Server | None = None,
        method: str = "GET",
        environ: Mapping[str, Any] | None = None,
    ) -> list[bytes]:
        """Answer a request of the metadata document (``GET``; ``OPTIONS`` for CORS). The
        document is public: any origin may read it, with the request headers its preflight
        (``environ``) asks for."""
        cors = [("Access-Control-Allow-Origin", "*"), ("Access-Control-Allow-Methods", "GET")]
        if method == "OPTIONS":
            asked = requested_headers(environ or {})
            if asked:
                cors.append(("Access-Control-Allow-Headers", ", ".join(asked)))
            start_response("204 No Content", [*cors, ("Content-Length", "0")])
            return [b""]
        if method not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET"), ("Content-Length", "0")])
            return [b""]
        data = json.dumps(self.metadata(server)).encode()
        start_response(
            "200 OK",
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(data))),
                ("Cache-Control", "max-age=300"),
                *cors,
            ],
        )
        return [b""] if method == "HEAD" else [data]

    def metadata_app(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        """A WSGI app serving only the metadata document: mount it at
        :data:`METADATA_PATH` of the site whose sub-path the MCP app is mounted at (a Flask
        ``DispatcherMiddleware`` hides the site's root from the MCP app)."""
        if not self.is_metadata_path(environ):
            body = b"not found"
            start_response("404 Not Found", [("Content-Length", str(len(body)))])
            return [body]
        method = environ.get("REQUEST_METHOD", "GET")
        return self.serve_metadata(start_response, method=method, environ=environ)

    # -- the guard ------------------------------------------------------------------------------
    def _challenge(
        self,
        error: str | None = None,
        description: str | None = None,
        scopes: Iterable[str] | None = None,
    ) -> str:
        params = [f"resource_metadata={_quoted(self.resource_metadata_url)}"]
        wanted = list(scopes) if scopes is not None else self._default_scope()
        if wanted:
            params.append(f"scope={_quoted(' '.join(wanted))}")
        if error is not None:
            params.append(f"error={_quoted(error)}")
        if description is not None:
            params.append(f"error_description={_quoted(description)}")
        return "Bearer " + ", ".join(params)

    def _default_scope(self) -> list[str]:
        if self.required_scopes:
            return list(self.required_scopes)
        return list(self.scopes_supported or ())

    def _unauthorized(self, description: str, error: str | None = "invalid_token") -> AuthRefusal:
        challenge = self._challenge(error, description if error else None)
        return AuthRefusal("401 Unauthorized", challenge, error, description)

    def _bad_request(self, description: str) -> AuthRefusal:
        challenge = self._challenge("invalid_request", description)
        return AuthRefusal("400 Bad Request", challenge, "invalid_request", description)

    def authenticate(self, environ: dict[str, Any]) -> Principal | AuthRefusal:
        """The request's principal (also stored in ``environ``, see :func:`principal_of`), or
        the refusal to send."""
        query = environ.get("QUERY_STRING", "")
        if query and any(name == "access_token" for name, _ in parse_qsl(query, True)):
            return self._bad_request("access tokens are not accepted in the query string")
        header = environ.get("HTTP_AUTHORIZATION")
        if header is None:
            return self._unauthorized("authentication required", error=None)
        if len(header) > self.max_authorization_bytes:
            return self._bad_request("the Authorization header is too long")
        if not header[:7].lower().startswith("bearer"):
            # another scheme (Basic, ...): this resource takes bearer tokens only
            return self._unauthorized("a bearer token is required", error=None)
        matched = _BEARER.fullmatch(header.strip())
        if matched is None:
            return self._bad_request("malformed Authorization header (expected: Bearer <token>)")
        principal = self._verify(matched.group(1))
        if isinstance(principal, AuthRefusal):
            return principal
        if self._canonical not in {canonical_resource(a) for a in principal.audience}:
            return self._unauthorized("the access token was not issued for this resource")
        missing = self.missing_scopes(principal, ())
        if missing is not None:
            return missing
        environ[PRINCIPAL_KEY] = principal
        return principal

    def _verify(self, token: str) -> Principal | AuthRefusal:
        try:
            principal = self.verifier(token)
        except InvalidToken as exc:
            return self._unauthorized(exc.description)
        except VerifierUnavailable:
            _log.warning("token verification unavailable; answering 503")
            description = "the access token cannot be verified now; try again later"
            return AuthRefusal("503 Service Unavailable", None, None, description, retry_after=5)
        except Exception as exc:  # a verifier's own failure: log its type, never its text
            _log.error("token verifier raised %s", type(exc).__name__)
            return self._unauthorized("the access token is not valid")
        if not isinstance(principal, Principal):
            return self._unauthorized("the access token is not valid")
        return principal

    def missing_scopes(self, principal: Principal, needed: Iterable[str]) -> AuthRefusal | None:
        """The ``403 insufficient_scope`` refusal when ``principal`` lacks a scope of
        ``required_scopes`` or of ``needed``; ``None`` when it has them all. The challenge's
        ``scope`` names the scopes granted and those missing (re-authorizing with it loses
        nothing the client had)."""
        wanted = set(self.required_scopes) | set(needed)
        if principal.has_scopes(wanted):
            return None
        missing = sorted(wanted - principal.scopes)
        description = "this request needs the scope(s): " + " ".join(missing)
        scopes = sorted(principal.scopes | wanted)
        challenge = self._challenge("insufficient_scope", description, scopes)
        return AuthRefusal("403 Forbidden", challenge, "insufficient_scope", description)

    def check_request(
        self, environ: Mapping[str, Any], message: Any, server: Server
    ) -> AuthRefusal | None:
        """The ``403`` owed to a POSTed request whose principal lacks the scopes its target
        needs (a ``tools/call`` of a tool declared with ``scopes=``); ``None`` to serve it.
        Runs before the request reaches its session, in both eras."""
        principal = principal_of(environ)
        if principal is None or not isinstance(message, Request):
            return None
        return self.missing_scopes(principal, needed_scopes(server, message))


def needed_scopes(server: Server, request: Request) -> frozenset[str]:
    """The scopes ``request`` needs beyond the app's ``required_scopes``: a ``tools/call``
    needs the scopes its tool was declared with (nothing for an unknown tool: its call is
    answered with the usual error)."""
    if request.method != "tools/call" or not isinstance(request.params, Mapping):
        return frozenset()
    name = request.params.get("name")
    tool = server.registry.tool(name) if isinstance(name, str) else None
    return frozenset() if tool is None else tool.scopes
