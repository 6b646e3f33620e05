"""The client program the official conformance suite's client scenarios run
(``conformance client --command "python tests/conformance/client.py"``): it connects to the
server URL given as its last argument with mcp_sync's public API, lists the tools and calls
the first one, then exits 0; a failure exits 1 with a one-line message on stderr.
``Client.http`` negotiates as a user's client does (``server/discover`` first, 2026-07-28,
then ``initialize`` on a server without it); the version agreed on is written to stderr as
``protocol: VERSION`` (the suite keeps the client's stderr next to its ``checks.json``).

The scenario comes in ``MCP_CONFORMANCE_SCENARIO``; ``MCP_CONFORMANCE_CONTEXT`` (JSON) may
carry pre-registered credentials (``client_id``, ``client_secret``, ``issuer``). ``auth/*``
scenarios use :class:`mcp_sync.auth.OAuth` (authorization code + PKCE), whose ``open_url``
plays the browser: it GETs the authorization URL and follows its redirect to the loopback
listener; ``auth/client-credentials-*`` use :class:`mcp_sync.auth.OAuthClientCredentials`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

import httpx

from mcp_sync import Client
from mcp_sync.auth import OAuth, OAuthClientCredentials
from mcp_sync.errors import AuthorizationError, ConnectionClosed, McpError

CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
PROTOCOL_LINE = "protocol: "
"""Starts the stderr line naming the protocol version agreed on with the server."""


def play_browser(url: str) -> None:
    """GET the authorization URL and follow its one redirect (to our loopback listener)."""
    with httpx.Client(timeout=20.0) as browser:
        answer = browser.get(url, follow_redirects=False)
        location = answer.headers.get("location")
        if answer.status_code not in (301, 302, 303, 307, 308) or not location:
            raise RuntimeError(f"the authorization endpoint answered HTTP {answer.status_code}")
        browser.get(location, follow_redirects=False)


def context() -> dict[str, Any]:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    value = json.loads(raw) if raw else {}
    return value if isinstance(value, dict) else {}


def make_auth(scenario: str) -> httpx.Auth:
    given = context()
    if scenario == "auth/client-credentials-jwt":
        return OAuthClientCredentials(
            given["client_id"],
            private_key=given["private_key_pem"],
            signing_algorithm=given.get("signing_algorithm", "ES256"),
            timeout=20.0,
        )
    if scenario.startswith("auth/client-credentials"):
        return OAuthClientCredentials(given["client_id"], given["client_secret"], timeout=20.0)
    return OAuth(
        client_id=given.get("client_id"),
        client_secret=given.get("client_secret"),
        issuer=given.get("issuer"),
        client_metadata_url=CLIENT_METADATA_URL,
        client_name="mcp_sync conformance client",
        open_url=play_browser,
        authorize_timeout=20.0,
        timeout=20.0,
    )


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    auth = make_auth(scenario) if scenario.startswith("auth/") else None
    try:
        with Client.http(url, auth=auth, default_timeout=30.0) as client:
            print(f"{PROTOCOL_LINE}{client.protocol_version}", file=sys.stderr, flush=True)
            tools = client.list_tools()
            if tools:
                try:
                    client.call_tool(tools[0].name, {})
                except McpError as exc:
                    print(f"{tools[0].name}: {exc}", file=sys.stderr)
    except (AuthorizationError, ConnectionClosed, McpError, TimeoutError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
