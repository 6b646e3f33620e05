"""The bearer-token guard of the WSGI app (BearerAuth) under real WSGI servers, in both eras.

Each case is judged by what goes on the wire: status, ``WWW-Authenticate`` (RFC 6750 and
RFC 9728 parameters), the metadata document, and what the handler saw as ``ctx.principal``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import httpx
import pytest
from guarded import (
    AS_URL,
    TOKENS,
    bearer,
    call,
    challenge,
    guarded_server,
    initialize,
    modern,
    post_modern,
    post_session,
)
from support.http import run_waitress
from support.waiting import WAIT

from mcp_sync.http import McpWsgiApp, serve_http
from mcp_sync.http.bearer import BearerAuth


@pytest.fixture(params=["waitress", "embedded"])
def site(request: pytest.FixtureRequest) -> Iterator[tuple[str, McpWsgiApp]]:
    """A guarded app at /mcp: ``(url of the MCP endpoint, app)``."""
    holder: list[McpWsgiApp] = []

    def make(base: str) -> McpWsgiApp:
        app = McpWsgiApp(guarded_server(), path="/mcp", auth=bearer(base + "/mcp"))
        holder.append(app)
        return app

    # the resource URL names the port, known once the server listens: route lazily
    def lazy(environ, start_response):  # type: ignore[no-untyped-def]
        return holder[0](environ, start_response)

    if request.param == "waitress":
        base, stop = run_waitress(lazy)
    else:
        handle = serve_http(lazy, "127.0.0.1", 0)
        base, stop = f"http://127.0.0.1:{handle.port}", handle.stop
    app = make(base)
    try:
        yield base + "/mcp", app
    finally:
        app.close()
        stop()


def metadata_url(url: str) -> str:
    base, _, path = url.rpartition("/")
    return f"{base}/.well-known/oauth-protected-resource/{path}"


def test_metadata_document_at_both_well_known_paths(site):
    url, _ = site
    for where in (
        metadata_url(url),
        url.rsplit("/", 1)[0] + "/.well-known/oauth-protected-resource",
    ):
        response = httpx.get(where, timeout=WAIT)
        assert response.status_code == 200, where
        assert response.json() == {
            "resource": url,
            "authorization_servers": [AS_URL],
            "scopes_supported": ["mcp:read", "reports:write"],
            "bearer_methods_supported": ["header"],
        }


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_missing_token_401_names_metadata_and_scope(site, era):
    url, _ = site
    response = (
        initialize(url, None) if era == "2025" else post_modern(url, modern("tools/list"), None)
    )
    assert response.status_code == 401
    params = challenge(response)
    assert params == {"resource_metadata": metadata_url(url), "scope": "mcp:read"}


@pytest.mark.parametrize("era", ["2025", "2026"])
@pytest.mark.parametrize(
    ("case", "header", "status", "error"),
    [
        ("expired", "Bearer " + TOKENS["expired"], 401, "invalid_token"),
        ("wrong audience", "Bearer " + TOKENS["other_aud"], 401, "invalid_token"),
        ("unknown token", "Bearer not-a-known-token", 401, "invalid_token"),
        ("malformed header", "Bearer two words", 400, "invalid_request"),
        ("bad characters", "Bearer t{k}", 400, "invalid_request"),
        ("another scheme", "Basic YWxpY2U6c2VjcmV0", 401, None),
    ],
)
def test_refused_tokens(site, era, case, header, status, error):
    url, _ = site
    headers = {"Accept": "application/json, text/event-stream", "Authorization": header}
    if era == "2026":
        headers.update({"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
        body = modern("tools/list")
    else:
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    response = httpx.post(url, json=body, headers=headers, timeout=WAIT)
    assert response.status_code == status, case
    params = challenge(response)
    assert params["resource_metadata"] == metadata_url(url)
    assert params.get("error") == error
    assert response.json()["error"] == (error or "unauthorized")


def test_token_in_query_string_refused(site):
    url, _ = site
    response = httpx.post(
        url + "?access_token=" + TOKENS["valid"],
        json=modern("tools/list"),
        headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
        timeout=WAIT,
    )
    assert response.status_code == 400
    assert challenge(response)["error"] == "invalid_request"


def test_modern_request_with_token_sees_principal(site):
    url, _ = site
    response = post_modern(url, modern("tools/call", {"name": "whoami", "arguments": {}}), "valid")
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["structuredContent"] == {
        "subject": "alice",
        "scopes": ["mcp:read"],
        "client": "cli",
    }


def test_modern_insufficient_scope_403_before_the_tool_runs(site):
    url, _ = site
    body = modern("tools/call", {"name": "write_report", "arguments": {"title": "q3"}})
    response = post_modern(url, body, "valid")
    assert response.status_code == 403
    params = challenge(response)
    assert params["error"] == "insufficient_scope"
    assert params["scope"] == "mcp:read reports:write"  # granted and missing: nothing lost
    assert params["resource_metadata"] == metadata_url(url)
    stepped_up = post_modern(url, body, "writer")
    assert stepped_up.status_code == 200
    assert stepped_up.json()["result"]["content"][0]["text"] == "written: q3"


def test_session_is_bound_to_its_principal(site):
    url, app = site
    created = initialize(url, "valid")
    assert created.status_code == 200
    session_id = created.headers["Mcp-Session-Id"]
    post_session(
        url, session_id, {"jsonrpc": "2.0", "method": "notifications/initialized"}, "valid"
    )
    # the same user with another token (wider scopes) keeps the session, and the handler
    # sees this request's own principal
    same_user = post_session(url, session_id, call("whoami", {}), "writer")
    assert same_user.status_code == 200
    assert same_user.json()["result"]["structuredContent"]["scopes"] == [
        "mcp:read",
        "reports:write",
    ]
    # another user naming the session id: no such session for them
    other = post_session(url, session_id, call("whoami", {}, 3), "bob")
    assert other.status_code == 404
    # every request is authenticated, in a session too
    anonymous = post_session(url, session_id, call("whoami", {}, 4), None)
    assert anonymous.status_code == 401
    limited = post_session(url, session_id, call("write_report", {"title": "x"}, 5), "valid")
    assert limited.status_code == 403
    assert challenge(limited)["error"] == "insufficient_scope"
    assert len(app.sessions()) == 1


def test_token_never_logged(site, caplog):
    url, _ = site
    caplog.set_level(logging.DEBUG)
    secret = TOKENS["valid"]
    post_modern(url, modern("tools/call", {"name": "whoami", "arguments": {}}), "valid")
    post_modern(
        url, modern("tools/call", {"name": "write_report", "arguments": {"title": "t"}}), "valid"
    )
    initialize(url, "expired")
    refused = httpx.post(
        url,
        json=modern("tools/list"),
        headers={"Authorization": "Bearer " + secret[:-1] + "!"},
        timeout=WAIT,
    )
    assert refused.status_code == 400
    assert secret not in caplog.text and secret[:-1] not in caplog.text
    assert TOKENS["expired"] not in caplog.text
    assert secret not in refused.text


def test_verifier_failure_is_401_without_its_message(caplog):
    def broken(token: str):
        raise RuntimeError(f"boom {token}")

    auth = BearerAuth(broken, resource="http://127.0.0.1/mcp", authorization_servers=[AS_URL])
    environ = {"HTTP_AUTHORIZATION": "Bearer sekrit-token", "QUERY_STRING": ""}
    caplog.set_level(logging.DEBUG)
    refusal = auth.authenticate(environ)
    assert not isinstance(refusal, type(None))
    assert refusal.status.startswith("401")  # type: ignore[union-attr]
    assert "sekrit-token" not in caplog.text
    assert "sekrit-token" not in json.dumps(refusal.__dict__)  # type: ignore[union-attr]


def test_resource_must_be_absolute():
    with pytest.raises(ValueError):
        BearerAuth(lambda t: None, resource="/mcp", authorization_servers=[AS_URL])
    with pytest.raises(ValueError):
        BearerAuth(lambda t: None, resource="https://x.test/mcp", authorization_servers=[])


def test_tool_scopes_are_validated():
    server = guarded_server()
    with pytest.raises(TypeError):
        server.add_tool(lambda: 1, name="t1", scopes="one")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        server.add_tool(lambda: 1, name="t2", scopes=["has space"])
