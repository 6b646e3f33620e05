"""JwtVerifier against real RS256 tokens and a real JWKS endpoint on loopback: discovery
through the issuer's metadata, each claim check, key rotation (an unknown kid refetches the
key set) and the refetch rate limit."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import jwt
import pytest
from authserver import AuthServer, Clock, running_auth_server

from mcp_sync.auth import JwtVerifier
from mcp_sync.errors import InvalidToken

RESOURCE = "https://mcp.example.test/mcp"


@pytest.fixture
def auth() -> Iterator[AuthServer]:
    with running_auth_server() as server:
        yield server


@pytest.fixture
def clock() -> Clock:
    return Clock(1000.0)


@pytest.fixture
def verifier(auth: AuthServer, clock: Clock) -> Iterator[JwtVerifier]:
    v = JwtVerifier(
        issuer=auth.url, audience=RESOURCE, refetch_interval=30, jwks_ttl=300, clock=clock
    )
    yield v
    v.close()


def test_valid_token_gives_principal(auth, verifier):
    kid = auth.new_key()
    principal = verifier(auth.mint(kid, RESOURCE, scope="mcp:read reports:write"))
    assert principal.subject == "alice"
    assert principal.scopes == {"mcp:read", "reports:write"}
    assert principal.client_id == "cli"
    assert principal.audience == (RESOURCE,)
    assert principal.issuer == auth.url
    assert auth.hits["metadata"] == 1 and auth.hits["jwks"] == 1
    verifier(auth.mint(kid, RESOURCE))  # cached: no more fetches
    assert auth.hits["jwks"] == 1


def test_audience_is_compared_canonically(auth, verifier):
    kid = auth.new_key()
    assert (
        verifier(auth.mint(kid, ["https://other.test", "HTTPS://MCP.example.test/mcp/"])).subject
        == "alice"
    )


@pytest.mark.parametrize(
    ("case", "mint", "reason"),
    [
        ("expired", {"lifetime": -120}, "expired"),
        ("wrong audience", {"audience": "https://other.test/mcp"}, "not issued for this resource"),
        ("wrong issuer", {"iss": "https://evil.test"}, "another server"),
        ("not yet valid", {"nbf": int(time.time()) + 3600}, "not valid yet"),
        ("no exp", {"exp": None}, "no exp claim"),
        ("id token typ", {"typ": "JWT"}, "typ"),
    ],
)
def test_refused_claims(auth, verifier, case, mint, reason):
    kid = auth.new_key()
    audience = mint.pop("audience", RESOURCE)
    token = auth.mint(kid, audience, **mint)
    with pytest.raises(InvalidToken, match=reason):
        verifier(token)


def test_expiry_leeway(auth, verifier):
    kid = auth.new_key()
    assert verifier(auth.mint(kid, RESOURCE, lifetime=-10)).subject == "alice"  # within 30 s


def test_malformed_and_unsigned_tokens(auth, verifier):
    kid = auth.new_key()
    with pytest.raises(InvalidToken, match="not a JWT"):
        verifier("abc")
    unsigned = jwt.encode(
        {"iss": auth.url, "aud": RESOURCE, "sub": "x", "exp": 2**40},
        None,
        algorithm="none",
        headers={"typ": "at+jwt"},
    )
    with pytest.raises(InvalidToken, match="algorithm"):
        verifier(unsigned)
    forged = auth.mint(kid, RESOURCE)
    head, payload, sig = forged.split(".")
    with pytest.raises(InvalidToken, match="signature"):
        verifier(f"{head}.{payload}.{sig[:-4]}AAAA")


def test_rotation_refetches_once_then_rate_limits(auth, verifier, clock):
    old = auth.new_key()
    verifier(auth.mint(old, RESOURCE))
    assert auth.hits["jwks"] == 1
    clock.now += 31
    new = auth.new_key()
    auth.publish_only(new)
    assert verifier(auth.mint(new, RESOURCE)).subject == "alice"  # unknown kid: refetched
    assert auth.hits["jwks"] == 2
    # a kid nobody publishes, right after: refused without asking the server again
    ghost = auth.new_key(publish=False)
    for _ in range(5):
        with pytest.raises(InvalidToken, match="unknown key"):
            verifier(auth.mint(ghost, RESOURCE))
    assert auth.hits["jwks"] == 2
    clock.now += 31  # the interval has passed: one more fetch is allowed
    with pytest.raises(InvalidToken, match="unknown key"):
        verifier(auth.mint(ghost, RESOURCE))
    assert auth.hits["jwks"] == 3


def test_key_set_expires_after_ttl(auth, verifier, clock):
    kid = auth.new_key()
    verifier(auth.mint(kid, RESOURCE))
    clock.now += 301
    verifier(auth.mint(kid, RESOURCE))
    assert auth.hits["jwks"] == 2


def test_hmac_algorithms_refused_at_construction(auth):
    with pytest.raises(ValueError):
        JwtVerifier(issuer=auth.url, audience=RESOURCE, algorithms=["HS256"])


def test_threads_racing_on_a_new_key_fetch_once(auth, verifier, clock):
    old = auth.new_key()
    verifier(auth.mint(old, RESOURCE))
    clock.now += 31
    new = auth.new_key()
    auth.publish_only(new)
    token = auth.mint(new, RESOURCE)
    start = threading.Barrier(8)
    subjects: list[str] = []
    lock = threading.Lock()

    def verify() -> None:
        start.wait(5)
        subject = verifier(token).subject
        with lock:
            subjects.append(subject)

    threads = [threading.Thread(target=verify) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert subjects == ["alice"] * 8
    assert auth.hits["jwks"] == 2  # one fetch for the first set, one for the rotation
