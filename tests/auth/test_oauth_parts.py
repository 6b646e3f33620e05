"""The pure parts of mcp_sync.auth: the WWW-Authenticate parser, the discovery URL order
(path-aware, in the spec's priority), resource matching, scope selection, the token set."""

from __future__ import annotations

import time

import pytest

from mcp_sync.auth import ResourceMetadata, TokenSet, parse_challenge
from mcp_sync.auth.challenge import BearerChallenge
from mcp_sync.auth.discovery import (
    _covers,
    canonical_resource,
    resource_metadata_urls,
    server_metadata_urls,
)
from mcp_sync.auth.flow import select_scope


def test_the_bearer_challenge_is_parsed_with_quoted_and_bare_values():
    challenge = parse_challenge(
        [
            'Basic realm="x"',
            'Bearer error="insufficient_scope", scope="files:read files:write",'
            ' resource_metadata="https://mcp.example/.well-known/oauth-protected-resource",'
            ' error_description="needs \\"write\\""',
        ]
    )
    assert challenge.error == "insufficient_scope"
    assert challenge.scopes == ("files:read", "files:write")
    assert challenge.resource_metadata == "https://mcp.example/.well-known/oauth-protected-resource"
    assert challenge.error_description == 'needs "write"'
    assert parse_challenge(["Bearer realm=x, scope=a"]).scope == "a"
    assert parse_challenge(["Basic realm=x"]) == BearerChallenge()
    assert parse_challenge([]) == BearerChallenge()


def test_resource_metadata_urls_are_path_aware_then_root():
    assert resource_metadata_urls("https://Ex.com/public/mcp", None) == [
        "https://ex.com/.well-known/oauth-protected-resource/public/mcp",
        "https://ex.com/.well-known/oauth-protected-resource",
    ]
    assert resource_metadata_urls("https://ex.com/", None) == [
        "https://ex.com/.well-known/oauth-protected-resource"
    ]
    assert resource_metadata_urls("https://ex.com/mcp", "https://ex.com/x.json") == [
        "https://ex.com/x.json"
    ]


def test_server_metadata_urls_follow_the_spec_order():
    assert server_metadata_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert server_metadata_urls("https://auth.example.com") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize(
    ("resource", "server", "covers"),
    [
        ("https://mcp.example/mcp", "https://mcp.example/mcp", True),
        ("https://mcp.example", "https://mcp.example/mcp", True),
        ("https://MCP.example/mcp", "https://mcp.example/mcp/", True),
        ("https://mcp.example/mc", "https://mcp.example/mcp", False),
        ("https://evil.example/mcp", "https://mcp.example/mcp", False),
        ("http://mcp.example/mcp", "https://mcp.example/mcp", False),
    ],
)
def test_the_resource_must_name_the_server(resource, server, covers):
    assert _covers(resource, server) is covers


def test_canonical_resource_keeps_the_query_drops_fragment_and_trailing_slash():
    assert (
        canonical_resource("HTTPS://Mcp.Example:8443/a/mcp/?x=1#f")
        == "https://mcp.example:8443/a/mcp?x=1"
    )


def test_scope_selection_follows_the_spec():
    metadata = ResourceMetadata("r", ("i",), ("a", "b"))
    assert select_scope(BearerChallenge(scope="x"), metadata, None, None) == "x"
    assert select_scope(BearerChallenge(), metadata, None, None) == "a b"
    assert select_scope(BearerChallenge(), ResourceMetadata("r", ("i",)), None, None) is None
    before = TokenSet("t", "r", "i", requested_scope="x y")
    assert select_scope(BearerChallenge(scope="z"), metadata, before, "extra") == "x y z extra"


def test_a_token_is_refreshed_within_the_leeway_or_half_its_life():
    now = time.time()
    assert TokenSet("t", "r", "i", expires_at=now + 30).expires_within(60)
    assert not TokenSet("t", "r", "i", expires_at=now + 30, issued_at=now).expires_within(60)
    assert TokenSet("t", "r", "i", expires_at=now + 10, issued_at=now - 30).expires_within(60)
    assert not TokenSet("t", "r", "i").expires_within(60)
