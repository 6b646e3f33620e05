"""The official ``mcp`` 2.3.0 client at 2026-07-28 reads ``x-mcp-header`` from ``tools/list``
and mirrors the marked arguments in ``Mcp-Param-*`` headers itself (base64 form for a
non-ASCII value): an mcp_sync WSGI app checks them and serves the call."""

from __future__ import annotations

import json
from typing import Annotated

import pytest
from support.paths import PEERS, PYTHON
from support.processes import run, user_env

from mcp_sync import Server, mcp_header

pytestmark = pytest.mark.interop

CLIENT = [PYTHON, str(PEERS / "official_client_2026.py")]
LIMIT = 90.0


def test_the_official_client_mirrors_param_headers_our_app_checks() -> None:
    server = Server("params-wsgi", version="1.0.0")

    @server.tool()
    def execute_sql(
        region: Annotated[str, mcp_header("Region")],
        query: str,
        shard: Annotated[int, mcp_header("Shard")] = 0,
    ) -> str:
        """Pretends to run SQL."""
        return f"{region}/{shard}: {query}"

    handle = server.serve_http("127.0.0.1", 0)
    try:
        arguments = {"region": "Hello, 世界", "query": "SELECT 1", "shard": 5}
        steps = [{"op": "list"}, {"op": "call", "name": "execute_sql", "arguments": arguments}]
        finished = run([*CLIENT, "--url", handle.url, json.dumps(steps)], LIMIT, env=user_env())
    finally:
        handle.stop()
    assert finished.code == 0, finished.describe()
    lines = [json.loads(line) for line in finished.stdout.splitlines() if line.strip()]
    (result,) = [line["result"] for line in lines if line["event"] == "result"]
    assert result.get("isError") is not True, result
    assert result["content"][0]["text"] == "Hello, 世界/5: SELECT 1"
