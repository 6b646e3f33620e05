"""The canonical server URI (mcp_sync.http.resource_uri): the one rule by which the client
(resource indicator, token store key, resource metadata match) and the server (the metadata's
``resource``, the audience checks of the guard and the verifiers) name an MCP server."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from authserver import AuthServer, running_auth_server

from mcp_sync.auth import JwtVerifier, StaticTokenVerifier
from mcp_sync.auth.discovery import discover_resource
from mcp_sync.errors import DiscoveryError, InvalidToken
from mcp_sync.http.bearer import METADATA_PATH, AuthRefusal, BearerAuth
from mcp_sync.http.resource_uri import canonical_resource
from mcp_sync.principal import Principal


@pytest.mark.parametrize(
    ("uri", "canonical"),
    [
        ("HTTPS://MCP.Example.COM/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/MCP", "https://mcp.example.com/MCP"),  # the path keeps case
        ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"),
        ("http://mcp.example.com:80/mcp", "http://mcp.example.com/mcp"),
        ("https://mcp.example.com:80/mcp", "https://mcp.example.com:80/mcp"),
        ("https://mcp.example.com:8443", "https://mcp.example.com:8443"),
        ("https://mcp.example.com/mcp#section", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/mcp/", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/", "https://mcp.example.com"),
        ("https://mcp.example.com/mcp?tenant=a", "https://mcp.example.com/mcp?tenant=a"),
        ("https://mcp.example.com/mcp/?tenant=a#f", "https://mcp.example.com/mcp?tenant=a"),
        ("http://[::1]:80/mcp", "http://[::1]/mcp"),
        ("http://[::1]:8080/mcp/", "http://[::1]:8080/mcp"),
        ("https://mcp.example.com:port/mcp", "https://mcp.example.com:port/mcp"),
    ],
)
def test_the_canonical_server_uri_rule(uri: str, canonical: str) -> None:
    assert canonical_resource(uri) == canonical
    assert canonical_resource(canonical) == canonical  # idempotent


def test_the_query_tells_two_resources_apart() -> None:
    assert canonical_resource("https://mcp.example.com/mcp?tenant=a") != canonical_resource(
        "https://mcp.example.com/mcp?tenant=b"
    )


SERVER_URL = "https://mcp.example.com/mcp?tenant=a"
"""The URL the client connects to."""

PUBLISHED = "HTTPS://MCP.Example.com:443/mcp/?tenant=a"
"""The same resource as its operator configured it on the server."""


def guard(resource: str, audience: str) -> BearerAuth:
    principal = Principal("alice", frozenset({"mcp:read"}), audience=(audience,))
    return BearerAuth(
        StaticTokenVerifier({"tok-alice-1234567890": principal}),
        resource=resource,
        authorization_servers=["https://as.example.com"],
    )


def discovered(server: BearerAuth, server_url: str) -> str:
    """The resource indicator a client connecting to ``server_url`` sends for ``server``."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith(METADATA_PATH):
            return httpx.Response(200, json=server.metadata())
        return httpx.Response(404)

    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        return discover_resource(client, server_url, None).resource


def test_client_and_server_name_the_resource_alike() -> None:
    server = guard(PUBLISHED, "unused")
    assert server.metadata()["resource"] == SERVER_URL
    indicator = discovered(server, SERVER_URL)
    assert indicator == SERVER_URL
    # a token the authorization server issued for that indicator is accepted by the guard
    accepted = guard(PUBLISHED, indicator).authenticate(
        {"HTTP_AUTHORIZATION": "Bearer tok-alice-1234567890"}
    )
    assert isinstance(accepted, Principal)


def test_a_token_for_the_resource_without_its_query_is_refused() -> None:
    refused = guard(PUBLISHED, "https://mcp.example.com/mcp").authenticate(
        {"HTTP_AUTHORIZATION": "Bearer tok-alice-1234567890"}
    )
    assert isinstance(refused, AuthRefusal) and refused.status.startswith("401")


def test_metadata_for_another_query_is_not_used() -> None:
    with pytest.raises(DiscoveryError, match="is for"):
        discovered(guard("https://mcp.example.com/mcp?tenant=b", "unused"), SERVER_URL)


@pytest.fixture
def auth() -> Iterator[AuthServer]:
    with running_auth_server() as server:
        yield server


def test_the_jwt_audience_keeps_the_query(auth: AuthServer) -> None:
    verifier = JwtVerifier(issuer=auth.url, audience=PUBLISHED, clock=time.time)
    try:
        kid = auth.new_key()
        assert verifier(auth.mint(kid, SERVER_URL)).subject == "alice"
        with pytest.raises(InvalidToken, match="not issued for this resource"):
            verifier(auth.mint(kid, "https://mcp.example.com/mcp"))
    finally:
        verifier.close()
