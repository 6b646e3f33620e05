"""IntrospectionVerifier against a real RFC 7662 endpoint on loopback: client
authentication, the active/audience/expiry checks, and the answer cache bounded by the
token's exp and the max TTL."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from authserver import CLIENT, AuthServer, Clock, running_auth_server

from mcp_sync.auth import IntrospectionVerifier
from mcp_sync.errors import InvalidToken, VerifierUnavailable

RESOURCE = "https://mcp.example.test/mcp"


@pytest.fixture
def auth() -> Iterator[AuthServer]:
    with running_auth_server() as server:
        yield server


def make(auth: AuthServer, clock: Clock, **options) -> IntrospectionVerifier:  # type: ignore[no-untyped-def]
    options.setdefault("client_id", CLIENT[0])
    options.setdefault("client_secret", CLIENT[1])
    return IntrospectionVerifier(
        auth.url + "/introspect", audience=RESOURCE, clock=clock, **options
    )


def answer(auth: AuthServer, token: str, clock: Clock, **fields) -> None:  # type: ignore[no-untyped-def]
    auth.active[token] = {
        "active": True,
        "sub": "alice",
        "client_id": "cli",
        "scope": "mcp:read",
        "aud": RESOURCE,
        "iss": auth.url,
        "exp": clock.now + 600,
        **fields,
    }


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
def test_active_token_gives_principal(auth, method):
    clock = Clock(time.time())
    answer(auth, "opaque-1", clock)
    verifier = make(auth, clock, auth_method=method)
    try:
        principal = verifier("opaque-1")
        assert (principal.subject, principal.scopes, principal.client_id) == (
            "alice",
            {"mcp:read"},
            "cli",
        )
        assert auth.last_form["token_type_hint"] == ["access_token"]
    finally:
        verifier.close()


@pytest.mark.parametrize(
    ("case", "fields", "reason"),
    [
        ("inactive", {"active": False}, "not active"),
        ("expired", {"exp": 10}, "expired"),
        ("wrong audience", {"aud": ["https://other.test/mcp"]}, "not issued for this resource"),
        ("no audience", {"aud": None}, "not issued for this resource"),
    ],
)
def test_refused_answers(auth, case, fields, reason):
    clock = Clock(time.time())
    answer(auth, "opaque-2", clock, **fields)
    verifier = make(auth, clock)
    try:
        with pytest.raises(InvalidToken, match=reason):
            verifier("opaque-2")
        with pytest.raises(InvalidToken, match="not active"):
            verifier("never-issued")
    finally:
        verifier.close()


def test_cache_bounded_by_max_ttl_and_exp(auth):
    clock = Clock(time.time())
    answer(auth, "long", clock)  # exp in 600 s: the 60 s TTL bounds the cache
    answer(auth, "short", clock, exp=clock.now + 5)
    verifier = make(auth, clock, cache_ttl=60)
    try:
        verifier("long")
        verifier("short")
        verifier("long")
        verifier("short")
        assert auth.hits["introspect"] == 2  # both cached
        clock.now += 6  # past the short token's exp: asked again, and now refused
        with pytest.raises(InvalidToken, match="expired"):
            verifier("short")
        verifier("long")
        assert auth.hits["introspect"] == 3
        clock.now += 55  # past the 60 s TTL of the long one's answer
        verifier("long")
        assert auth.hits["introspect"] == 4
    finally:
        verifier.close()


def test_bad_client_credentials_unavailable_and_not_logged(auth, caplog):
    clock = Clock(time.time())
    answer(auth, "opaque-secret-token", clock)
    verifier = make(auth, clock, client_secret="wrong")
    caplog.set_level(logging.DEBUG)
    try:
        with pytest.raises(VerifierUnavailable) as raised:
            verifier("opaque-secret-token")
        assert "opaque-secret-token" not in str(raised.value)
        assert "opaque-secret-token" not in caplog.text
    finally:
        verifier.close()
