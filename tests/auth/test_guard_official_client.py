"""The official ``mcp`` 2.3.0 client against our guarded app, in both eras: refused (401)
without a token, served with one, and the tool sees the token's principal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from guarded import TOKENS, bearer, guarded_server
from support.paths import PYTHON
from support.processes import run, user_env

from mcp_sync.http import McpWsgiApp, serve_http

pytestmark = pytest.mark.interop

CLIENT = [PYTHON, str(Path(__file__).with_name("official_bearer_client.py"))]


def lines_of(stdout: str) -> dict[str, dict[str, Any]]:
    return {line["event"]: line for line in map(json.loads, stdout.splitlines()) if line}


@pytest.mark.parametrize(("mode", "version"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
def test_official_client_with_bearer_token(mode, version):
    holder: list[McpWsgiApp] = []
    statuses: list[tuple[bool, str]] = []  # (had a token, status) of every answer

    def recorded(environ: dict[str, Any], start_response: Any) -> Any:
        def start(status: str, headers: Any, *exc: Any) -> Any:
            statuses.append(("HTTP_AUTHORIZATION" in environ, status))
            return start_response(status, headers, *exc)

        return holder[0](environ, start)

    handle = serve_http(recorded, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{handle.port}/mcp"
    holder.append(McpWsgiApp(guarded_server(), path="/mcp", auth=bearer(url)))
    try:
        refused = run([*CLIENT, url, mode], 90, env=user_env())
        served = run([*CLIENT, url, mode, TOKENS["valid"]], 90, env=user_env())
    finally:
        holder[0].close()
        handle.stop()
    assert refused.code == 1, refused.describe()
    assert "error" in lines_of(refused.stdout)
    without = [status for had_token, status in statuses if not had_token]
    assert without and all(status.startswith("401") for status in without), without
    assert all(not status.startswith("401") for had_token, status in statuses if had_token)
    assert TOKENS["valid"] not in refused.stdout
    assert served.code == 0, served.describe()
    events = lines_of(served.stdout)
    assert events["connected"]["protocolVersion"] == version
    assert events["tools"]["names"] == ["whoami", "write_report"]
    assert events["whoami"]["result"] == {
        "subject": "alice",
        "scopes": ["mcp:read"],
        "client": "cli",
    }
