"""The whole chain with nothing of ours replaced: our OAuth client, the authlib test
authorization server, and our WSGI app guarded by :class:`BearerAuth` (the verifier asks the
authorization server whether the token it issued is live and for this resource). Sign-in
with PKCE through the loopback redirect, refresh after expiry and step-up on the guard's
own 403 ``insufficient_scope``, at 2026-07-28 (the client's default) and 2025-11-25."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.oauth_server import AuthServer
from support.waiting import WAIT

from mcp_sync import Client, Context, Server
from mcp_sync.auth import OAuth
from mcp_sync.errors import InvalidToken
from mcp_sync.http import McpWsgiApp, serve_http
from mcp_sync.http.bearer import BearerAuth
from mcp_sync.principal import Principal

pytestmark = pytest.mark.timeout(60)

ERAS = [pytest.param("auto", id="2026-07-28"), pytest.param("legacy", id="2025-11-25")]


def browser(url: str) -> None:
    """Approve: follow the authorization server's redirect to the loopback listener."""
    with httpx.Client(timeout=WAIT) as http:
        assert http.get(url, follow_redirects=True).status_code == 200


def notes() -> Server:
    server = Server("notes", version="1.0.0")
    saved: list[str] = []

    @server.tool()
    def whoami(ctx: Context) -> str:
        """The subject the handler sees."""
        assert ctx.principal is not None
        return ctx.principal.subject

    @server.tool(scopes=["notes:write"])
    def write_note(text: str) -> str:
        """Needs notes:write."""
        saved.append(text)
        return "saved"

    return server


@pytest.fixture
def site() -> Iterator[tuple[str, AuthServer]]:
    with AuthServer() as authorization:
        holder: list[McpWsgiApp] = []

        def lazy(environ, start_response):  # type: ignore[no-untyped-def]
            return holder[0](environ, start_response)

        handle = serve_http(lazy, "127.0.0.1", 0)
        resource = f"http://127.0.0.1:{handle.port}/mcp"

        def verify(token: str) -> Principal:
            found = authorization.valid(token, resource)
            if found is None:
                raise InvalidToken("the access token is not live for this resource")
            return Principal(
                found.client_id,
                frozenset(found.scope.split()),
                client_id=found.client_id,
                audience=(resource,),
                expires_at=found.expires_at,
            )

        guard = BearerAuth(
            verify,
            resource=resource,
            authorization_servers=[authorization.issuer],
            required_scopes=["notes:read"],
        )
        holder.append(McpWsgiApp(notes(), path="/mcp", auth=guard))
        try:
            yield resource, authorization
        finally:
            holder[0].close()
            handle.stop()


@pytest.mark.parametrize("protocol", ERAS)
def test_sign_in_refresh_and_step_up_against_our_guard(
    site: tuple[str, AuthServer], protocol: str
) -> None:
    url, authorization = site
    auth = OAuth(open_url=browser, authorize_timeout=WAIT, timeout=WAIT)
    options: dict[str, Any] = {} if protocol == "auto" else {"protocol": protocol}
    with auth, Client.http(url, auth=auth, **options) as client:
        assert (client.protocol_version == "2026-07-28") == (protocol == "auto")
        subject = client.call_tool("whoami").content[0].text
        assert subject  # the principal the guard made of the token reached the handler
        assert authorization.grants == {"authorization_code": 1}
        assert authorization.authorize_requests[0]["scope"] == "notes:read"
        assert authorization.token_resources == [url]

        authorization.expire_all()
        assert client.call_tool("whoami").content[0].text == subject
        assert authorization.grants == {"authorization_code": 1, "refresh_token": 1}

        # the guard's own 403 insufficient_scope makes the client sign in again, wider
        assert client.call_tool("write_note", {"text": "x"}).content[0].text == "saved"
        assert authorization.authorize_requests[-1]["scope"].split() == [
            "notes:read",
            "notes:write",
        ]
