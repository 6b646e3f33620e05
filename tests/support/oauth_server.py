"""A real OAuth 2.1 authorization server on loopback for the client's end-to-end tests,
built on authlib's Flask integration, and a protected MCP resource server in front of
mcp_sync's WSGI app.

:class:`AuthServer` serves RFC 8414 metadata, dynamic client registration (RFC 7591), an
authorization endpoint that approves at once (the test plays the browser: it GETs the URL
and follows the redirect to the client's loopback listener; ``deny=True`` redirects with
``access_denied``), and a token endpoint (authorization code with PKCE S256, refresh tokens
rotated, client credentials). It counts every grant by type and records each token request's
``resource``; ``token_lifetime`` sets ``expires_in``.

:class:`ProtectedApp` wraps mcp_sync's WSGI app: it serves
``/.well-known/oauth-protected-resource/mcp``, answers a request without a valid token with
401 and ``WWW-Authenticate: Bearer resource_metadata=..., scope=...``, and a ``tools/call``
of a tool in ``tool_scopes`` whose token lacks the scope with 403 ``insufficient_scope``.
(Until mcp_sync's own resource-server guard lands, this wrapper plays that role.)
"""

from __future__ import annotations

import io
import json
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc7636 import CodeChallenge
from flask import Flask, jsonify, request

from mcp_sync import Server
from mcp_sync.http.embedded_server import serve_http

__all__ = ["AuthServer", "ProtectedApp", "protected_mcp", "Client"]


@dataclass
class Client:
    """A registered client, as authlib's grants ask it."""

    client_id: str
    client_secret: str | None
    redirect_uris: list[str]
    token_endpoint_auth_method: str = "none"
    grant_types: list[str] = field(default_factory=lambda: ["authorization_code", "refresh_token"])
    scope: str = ""

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope: str) -> str:
        return scope or ""

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return self.client_secret is not None and secrets.compare_digest(
            client_secret, self.client_secret
        )

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == self.token_endpoint_auth_method

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.grant_types


@dataclass
class _Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    code_challenge: str | None
    code_challenge_method: str | None
    auth_time: float = field(default_factory=time.time)

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_auth_time(self) -> float:
        return self.auth_time

    def get_nonce(self) -> None:
        return None

    def is_expired(self) -> bool:
        return time.time() - self.auth_time > 300


@dataclass
class Token:
    """An issued token (the server keeps them to check bearer tokens)."""

    access_token: str
    client_id: str
    scope: str
    expires_at: float
    refresh_token: str | None
    resource: str | None
    revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return int(self.expires_at - time.time())

    def is_revoked(self) -> bool:
        return self.revoked

    def is_expired(self) -> bool:
        return False  # refresh tokens do not expire here


class AuthServer:
    """The authorization server (see the module docstring); use as a context manager."""

    def __init__(
        self,
        *,
        token_lifetime: int = 3600,
        scopes_supported: Iterable[str] = ("notes:read", "notes:write"),
        dynamic_registration: bool = True,
        client_id_metadata_documents: bool = False,
        deny: bool = False,
    ) -> None:
        self.token_lifetime = token_lifetime
        self.scopes_supported = list(scopes_supported)
        self.dynamic_registration = dynamic_registration
        self.client_id_metadata_documents = client_id_metadata_documents
        self.deny = deny
        self.clients: dict[str, Client] = {}
        self.tokens: dict[str, Token] = {}
        self.codes: dict[str, _Code] = {}
        self.grants: Counter[str] = Counter()
        self.registrations = 0
        self.authorize_requests: list[dict[str, str]] = []
        self.token_resources: list[str | None] = []
        self.before_token: Callable[[str], None] | None = None
        """Called with the grant type before each token request is answered (a test's gate)."""
        self._lock = threading.Lock()
        self.app = self._flask()
        self._handle: Any = None
        self.issuer = ""

    # -- the Flask app ------------------------------------------------------------------------
    def _flask(self) -> Flask:
        app = Flask("test-authorization-server")
        server = AuthorizationServer(app, query_client=self.clients.get, save_token=self._save)
        owner = self

        class Code(grants.AuthorizationCodeGrant):
            TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = [
                "none",
                "client_secret_basic",
                "client_secret_post",
            ]

            def save_authorization_code(self, code: str, req: Any) -> None:
                owner.codes[code] = _Code(
                    code,
                    req.client.client_id,
                    req.payload.redirect_uri,
                    req.payload.scope or "",
                    req.payload.data.get("code_challenge"),
                    req.payload.data.get("code_challenge_method"),
                )

            def query_authorization_code(self, code: str, client: Client) -> _Code | None:
                found = owner.codes.get(code)
                return found if found and found.client_id == client.client_id else None

            def delete_authorization_code(self, authorization_code: _Code) -> None:
                owner.codes.pop(authorization_code.code, None)

            def authenticate_user(self, authorization_code: _Code) -> str:
                return "user"

        class Refresh(grants.RefreshTokenGrant):
            TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = [
                "none",
                "client_secret_basic",
                "client_secret_post",
            ]
            INCLUDE_NEW_REFRESH_TOKEN = True

            def authenticate_refresh_token(self, refresh_token: str) -> Token | None:
                return next(
                    (
                        t
                        for t in owner.tokens.values()
                        if t.refresh_token == refresh_token and not t.revoked
                    ),
                    None,
                )

            def authenticate_user(self, refresh_token: Token) -> str:
                return "user"

            def revoke_old_credential(self, refresh_token: Token) -> None:
                refresh_token.revoked = True

        class Credentials(grants.ClientCredentialsGrant):
            TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = [
                "client_secret_basic",
                "client_secret_post",
            ]

        server.register_grant(Code, [CodeChallenge(required=True)])
        server.register_grant(Refresh)
        server.register_grant(Credentials)
        server.register_token_generator(
            "default",
            lambda client, grant_type, user=None, scope=None, expires_in=None, include_refresh_token=True: {
                "token_type": "Bearer",
                "access_token": secrets.token_urlsafe(24),
                "expires_in": owner.token_lifetime,
                **({"scope": scope} if scope else {}),
                **(
                    {"refresh_token": secrets.token_urlsafe(24)}
                    if include_refresh_token and grant_type != "client_credentials"
                    else {}
                ),
            },
        )

        @app.get("/.well-known/oauth-authorization-server")
        def metadata() -> Any:
            document: dict[str, Any] = {
                "issuer": owner.issuer,
                "authorization_endpoint": f"{owner.issuer}/authorize",
                "token_endpoint": f"{owner.issuer}/token",
                "response_types_supported": ["code"],
                "grant_types_supported": [
                    "authorization_code",
                    "refresh_token",
                    "client_credentials",
                ],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": [
                    "none",
                    "client_secret_basic",
                    "client_secret_post",
                ],
                "scopes_supported": owner.scopes_supported,
                "authorization_response_iss_parameter_supported": True,
            }
            if owner.dynamic_registration:
                document["registration_endpoint"] = f"{owner.issuer}/register"
            if owner.client_id_metadata_documents:
                document["client_id_metadata_document_supported"] = True
            return jsonify(document)

        @app.post("/register")
        def register() -> Any:
            body = request.get_json(force=True)
            with owner._lock:
                owner.registrations += 1
            method = body.get("token_endpoint_auth_method", "none")
            client = Client(
                client_id=f"dyn-{secrets.token_hex(4)}",
                client_secret=None if method == "none" else secrets.token_urlsafe(16),
                redirect_uris=list(body.get("redirect_uris") or []),
                token_endpoint_auth_method=method,
            )
            owner.clients[client.client_id] = client
            answer = {
                "client_id": client.client_id,
                "redirect_uris": client.redirect_uris,
                "token_endpoint_auth_method": method,
            }
            if client.client_secret:
                answer["client_secret"] = client.client_secret
            return jsonify(answer), 201

        @app.get("/authorize")
        def authorize() -> Any:
            owner.authorize_requests.append(dict(request.args))
            client_id = request.args.get("client_id", "")
            if client_id.startswith("https://") and client_id not in owner.clients:
                owner.clients[client_id] = Client(
                    client_id, None, [request.args.get("redirect_uri", "")]
                )
            if owner.deny:
                target = request.args.get("redirect_uri", "")
                from urllib.parse import urlencode

                query = urlencode(
                    {
                        "error": "access_denied",
                        "error_description": "the user said no",
                        "state": request.args.get("state", ""),
                        "iss": owner.issuer,
                    }
                )
                return "", 302, {"Location": f"{target}?{query}"}
            try:
                grant = server.get_consent_grant(end_user="user")  # validates the request
            except OAuth2Error as error:
                return server.handle_error_response(None, error)
            response = server.create_authorization_response(grant_user="user", grant=grant)
            location = response.headers.get("Location", "")
            if location:
                response.headers["Location"] = f"{location}&iss={owner.issuer}"
            return response

        @app.post("/token")
        def token() -> Any:
            grant = request.form.get("grant_type", "")
            if owner.before_token is not None:
                owner.before_token(grant)
            with owner._lock:
                owner.grants[grant] += 1
                owner.token_resources.append(request.form.get("resource"))
            return server.create_token_response()

        return app

    def _save(self, token: dict[str, Any], req: Any) -> None:
        resource = req.payload.data.get("resource") if req.payload else None
        self.tokens[token["access_token"]] = Token(
            token["access_token"],
            req.client.client_id,
            token.get("scope", ""),
            time.time() + token["expires_in"],
            token.get("refresh_token"),
            resource,
        )

    # -- helpers for tests --------------------------------------------------------------------
    def add_client(self, client: Client) -> Client:
        """Pre-register ``client``."""
        self.clients[client.client_id] = client
        return client

    def valid(self, access_token: str, resource: str) -> Token | None:
        """The token if it is live and issued for ``resource``."""
        found = self.tokens.get(access_token)
        if found is None or found.revoked or found.expires_at < time.time():
            return None
        if found.resource is not None and found.resource != resource:
            return None
        return found

    def expire_all(self) -> None:
        """Make every access token expire now (refresh tokens stay valid)."""
        for found in self.tokens.values():
            found.expires_at = time.time() - 1

    def __enter__(self) -> AuthServer:
        self._handle = serve_http(self.app)
        self.issuer = self._handle.url.rstrip("/")
        if self.issuer.endswith("/mcp"):
            self.issuer = self.issuer[: -len("/mcp")]
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.stop()


class ProtectedApp:
    """A WSGI wrapper that protects an MCP app at ``/mcp`` with ``auth`` (see module doc)."""

    def __init__(
        self,
        app: Callable[..., Iterable[bytes]],
        auth: AuthServer,
        *,
        scope: str = "notes:read",
        tool_scopes: dict[str, str] | None = None,
    ) -> None:
        self.app = app
        self.auth = auth
        self.scope = scope
        self.tool_scopes = tool_scopes or {}
        self.base = ""
        self.refused = Counter[int]()

    def _challenge(self, status: str, start_response: Any, extra: str = "") -> list[bytes]:
        metadata = f"{self.base}/.well-known/oauth-protected-resource/mcp"
        header = f'Bearer resource_metadata="{metadata}", scope="{self.scope}"{extra}'
        self.refused[int(status[:3])] += 1
        start_response(status, [("WWW-Authenticate", header), ("Content-Length", "0")])
        return [b""]

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/.well-known/oauth-protected-resource/mcp":
            body = json.dumps(
                {
                    "resource": f"{self.base}/mcp",
                    "authorization_servers": [self.auth.issuer],
                    "scopes_supported": [self.scope],
                }
            ).encode()
            start_response(
                "200 OK",
                [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
            )
            return [body]
        header = environ.get("HTTP_AUTHORIZATION", "")
        token = (
            self.auth.valid(header[7:], f"{self.base}/mcp")
            if header.startswith("Bearer ")
            else None
        )
        if token is None:
            return self._challenge("401 Unauthorized", start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        try:
            message = json.loads(body) if body else {}
        except ValueError:
            message = {}
        if isinstance(message, dict) and message.get("method") == "tools/call":
            needed = self.tool_scopes.get((message.get("params") or {}).get("name", ""))
            if needed and needed not in token.scope.split():
                return self._insufficient(needed, start_response)
        return self.app(environ, start_response)

    def _insufficient(self, needed: str, start_response: Any) -> list[bytes]:
        metadata = f"{self.base}/.well-known/oauth-protected-resource/mcp"
        header = (
            f'Bearer error="insufficient_scope", scope="{needed}", resource_metadata="{metadata}"'
        )
        self.refused[403] += 1
        start_response("403 Forbidden", [("WWW-Authenticate", header), ("Content-Length", "0")])
        return [b""]


def notes_server() -> Server:
    """An MCP server with a read tool and a write tool."""
    server = Server("notes", version="1.0.0")
    notes: list[str] = []

    @server.tool()
    def read_notes() -> str:
        """All notes."""
        return "\n".join(notes)

    @server.tool()
    def write_note(text: str) -> str:
        """Add a note (needs notes:write)."""
        notes.append(text)
        return "saved"

    return server


@contextmanager
def protected_mcp(auth: AuthServer, **options: Any) -> Iterator[tuple[str, ProtectedApp]]:
    """Serve the notes server behind :class:`ProtectedApp`; yields its ``/mcp`` URL."""
    app = ProtectedApp(notes_server().wsgi_app(), auth, **options)
    handle = serve_http(app)
    app.base = (
        handle.url.rsplit("/mcp", 1)[0] if handle.url.endswith("/mcp") else handle.url.rstrip("/")
    )
    try:
        yield f"{app.base}/mcp", app
    finally:
        handle.stop()
