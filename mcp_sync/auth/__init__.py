"""OAuth 2.1 for MCP over HTTP.

Resource server (protecting an MCP app; the guard itself is
:class:`~mcp_sync.http.bearer.BearerAuth`): verifiers that turn an access token into a
:class:`~mcp_sync.principal.Principal` -- :class:`JwtVerifier` (JWT access tokens, RFC 9068,
checked against the authorization server's JWKS; the ``jwt`` extra),
:class:`IntrospectionVerifier` (RFC 7662 token introspection; the ``http`` extra) and
:class:`StaticTokenVerifier` (a fixed table of tokens).
"""

# resource server
from .introspection import IntrospectionVerifier
from .jwt_verifier import JwtVerifier
from .static import StaticTokenVerifier

__all__ = [
    # resource server
    "IntrospectionVerifier",
    "JwtVerifier",
    "StaticTokenVerifier",
]
