"""A small loopback authorization server for the verifier tests: its RFC 8414 metadata, a
JWKS whose keys the test rotates, and an RFC 7662 introspection endpoint -- served by the
real embedded WSGI server, every call counted."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from mcp_sync.http import serve_http

CLIENT = ("rs-client", "rs-secret")


class Clock:
    """A clock the test moves by hand (the verifiers' cache clocks)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class AuthServer:
    def __init__(self) -> None:
        self.url = ""
        self.lock = threading.Lock()
        self.keys: dict[str, Any] = {}  # kid -> private key
        self.published: list[str] = []  # kids in the JWKS
        self.hits: dict[str, int] = {"metadata": 0, "jwks": 0, "introspect": 0}
        self.active: dict[str, dict[str, Any]] = {}  # opaque token -> introspection answer
        self.last_form: dict[str, list[str]] = {}

    def new_key(self, publish: bool = True) -> str:
        kid = uuid.uuid4().hex[:8]
        with self.lock:
            self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if publish:
                self.published.append(kid)
        return kid

    def publish_only(self, *kids: str) -> None:
        with self.lock:
            self.published = list(kids)

    def mint(
        self, kid: str, audience: str, *, lifetime: float = 300, typ: str = "at+jwt", **claims: Any
    ) -> str:
        now = int(time.time())
        payload = {
            "iss": self.url,
            "sub": "alice",
            "aud": audience,
            "client_id": "cli",
            "scope": "mcp:read",
            "iat": now,
            "exp": now + int(lifetime),
            "jti": uuid.uuid4().hex,
            **claims,
        }
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(
            payload, self.keys[kid], algorithm="RS256", headers={"kid": kid, "typ": typ}
        )

    def jwks(self) -> dict[str, Any]:
        with self.lock:
            entries = []
            for kid in self.published:
                jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.keys[kid].public_key()))
                entries.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
            return {"keys": entries}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        status, body = "404 Not Found", {"error": "not_found"}
        if path == "/.well-known/oauth-authorization-server":
            self.hits["metadata"] += 1
            status, body = (
                "200 OK",
                {
                    "issuer": self.url,
                    "jwks_uri": self.url + "/jwks",
                    "introspection_endpoint": self.url + "/introspect",
                },
            )
        elif path == "/jwks":
            self.hits["jwks"] += 1
            status, body = "200 OK", self.jwks()
        elif path == "/introspect":
            self.hits["introspect"] += 1
            status, body = self.introspect(environ)
        data = json.dumps(body).encode()
        start_response(
            status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        )
        return [data]

    def introspect(self, environ: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        expected = "Basic " + base64.b64encode(":".join(CLIENT).encode()).decode()
        length = int(environ.get("CONTENT_LENGTH") or 0)
        form = parse_qs(environ["wsgi.input"].read(length).decode())
        self.last_form = form
        posted = (form.get("client_id", [""])[0], form.get("client_secret", [""])[0])
        if environ.get("HTTP_AUTHORIZATION") != expected and posted != CLIENT:
            return "401 Unauthorized", {"error": "invalid_client"}
        token = form.get("token", [""])[0]
        return "200 OK", self.active.get(token, {"active": False})


@contextmanager
def running_auth_server() -> Iterator[AuthServer]:
    server = AuthServer()
    handle = serve_http(server, "127.0.0.1", 0)
    server.url = f"http://127.0.0.1:{handle.port}"
    try:
        yield server
    finally:
        handle.stop()
