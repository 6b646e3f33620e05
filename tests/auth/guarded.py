"""A guarded MCP server for the authorization tests: tools that need scopes, one that reports
``ctx.principal``, static tokens for each case, and raw 2025/2026 requests."""

from __future__ import annotations

import time
from typing import Any

import httpx
from support.http import ACCEPT_BOTH
from support.messages import PROTOCOL_VERSION, initialize_request
from support.waiting import WAIT

from mcp_sync import Context, Server
from mcp_sync.auth import StaticTokenVerifier
from mcp_sync.http.bearer import BearerAuth
from mcp_sync.principal import Principal

MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
AS_URL = "https://as.example.test"

TOKENS = {
    "valid": "tok-valid-Alice-1234567890",
    "writer": "tok-writer-Alice-1234567890",
    "bob": "tok-valid-Bob-1234567890",
    "expired": "tok-expired-1234567890",
    "other_aud": "tok-otheraud-1234567890",
}


def guarded_server() -> Server:
    server = Server("guarded", version="1.0.0")

    @server.tool()
    def whoami(ctx: Context) -> dict[str, Any]:
        """The principal the handler sees."""
        p = ctx.principal
        if p is None:
            return {"subject": None}
        return {"subject": p.subject, "scopes": sorted(p.scopes), "client": p.client_id}

    @server.tool(scopes=["reports:write"])
    def write_report(title: str) -> str:
        """Needs reports:write."""
        return f"written: {title}"

    return server


def verifier(resource: str) -> StaticTokenVerifier:
    now = time.time()

    def principal(subject: str, scopes: str, **kw: Any) -> Principal:
        kw.setdefault("audience", (resource,))
        return Principal(subject, frozenset(scopes.split()), client_id="cli", issuer=AS_URL, **kw)

    return StaticTokenVerifier(
        {
            TOKENS["valid"]: principal("alice", "mcp:read"),
            TOKENS["writer"]: principal("alice", "mcp:read reports:write"),
            TOKENS["bob"]: principal("bob", "mcp:read"),
            TOKENS["expired"]: principal("alice", "mcp:read", expires_at=now - 60),
            TOKENS["other_aud"]: principal(
                "alice", "mcp:read", audience=("https://other.test/mcp",)
            ),
        }
    )


def bearer(resource: str) -> BearerAuth:
    return BearerAuth(
        verifier(resource),
        resource=resource,
        authorization_servers=[AS_URL],
        required_scopes=["mcp:read"],
    )


def auth_header(name: str | None) -> dict[str, str]:
    return {} if name is None else {"Authorization": f"Bearer {TOKENS[name]}"}


def challenge(response: httpx.Response) -> dict[str, str]:
    """The parameters of a ``WWW-Authenticate: Bearer ...`` header."""
    header = response.headers["WWW-Authenticate"]
    assert header.startswith("Bearer ")
    params: dict[str, str] = {}
    for part in header[len("Bearer ") :].split('", '):
        name, _, value = part.partition("=")
        params[name.strip()] = value.strip('"')
    return params


def modern(
    method: str, params: dict[str, Any] | None = None, request_id: Any = 1
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**(params or {}), "_meta": dict(ENVELOPE)},
    }


def post_modern(url: str, body: dict[str, Any], token: str | None) -> httpx.Response:
    headers = {"Accept": ACCEPT_BOTH, "MCP-Protocol-Version": MODERN, "Mcp-Method": body["method"]}
    if body["method"] == "tools/call":
        headers["Mcp-Name"] = body["params"]["name"]
    headers.update(auth_header(token))
    return httpx.post(url, json=body, headers=headers, timeout=WAIT)


def initialize(url: str, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/json", **auth_header(token)}
    return httpx.post(url, json=initialize_request(0), headers=headers, timeout=WAIT)


def post_session(
    url: str, session_id: str, body: dict[str, Any], token: str | None
) -> httpx.Response:
    headers = {
        "Accept": "application/json",
        "Mcp-Session-Id": session_id,
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        **auth_header(token),
    }
    return httpx.post(url, json=body, headers=headers, timeout=WAIT)


def call(name: str, arguments: dict[str, Any], request_id: int = 2) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
