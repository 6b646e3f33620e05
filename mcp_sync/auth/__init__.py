"""OAuth 2.1 for MCP over HTTP.

Resource server (protecting an MCP app; the guard itself is
:class:`~mcp_sync.http.bearer.BearerAuth`): verifiers that turn an access token into a
:class:`~mcp_sync.principal.Principal` -- :class:`JwtVerifier` (JWT access tokens, RFC 9068,
checked against the authorization server's JWKS; the ``jwt`` extra),
:class:`IntrospectionVerifier` (RFC 7662 token introspection; the ``http`` extra) and
:class:`StaticTokenVerifier` (a fixed table of tokens).

Client (calling a protected MCP server): :class:`OAuth` (a user signs in: authorization code
+ PKCE through a loopback redirect) and :class:`OAuthClientCredentials` (machine to machine)
are ``httpx.Auth`` objects for ``Client.http(url, auth=...)``. Both discover the protected
resource and authorization server metadata, send the ``resource`` indicator, keep tokens in
a :class:`TokenStore`, refresh before expiry and on 401, and ask for a wider scope on 403
``insufficient_scope``. Built on authlib (the ``oauth`` extra). Failures raise
:class:`~mcp_sync.errors.AuthorizationError` subclasses naming the step that failed.
"""

# client
from .challenge import BearerChallenge, parse_challenge
from .client_credentials import OAuthClientCredentials
from .discovery import ResourceMetadata, ServerMetadata
from .loopback import LoopbackListener
from .oauth import OAuth, open_in_browser
from .registration import ClientRegistration
from .token_store import FileTokenStore, MemoryTokenStore, TokenSet, TokenStore

# isort: split
# resource server
from .introspection import IntrospectionVerifier
from .jwt_verifier import JwtVerifier
from .static import StaticTokenVerifier

__all__ = [
    # client
    "OAuth",
    "OAuthClientCredentials",
    "TokenStore",
    "MemoryTokenStore",
    "FileTokenStore",
    "TokenSet",
    "ClientRegistration",
    "ResourceMetadata",
    "ServerMetadata",
    "BearerChallenge",
    "parse_challenge",
    "LoopbackListener",
    "open_in_browser",
    # resource server
    "IntrospectionVerifier",
    "JwtVerifier",
    "StaticTokenVerifier",
]
