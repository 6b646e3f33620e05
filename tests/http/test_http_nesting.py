"""Deeply nested POST bodies get one JSON-RPC answer that names the problem, with their id.

Before the fix a body nested beyond what :mod:`json` can parse (the 5,000 and 100,000 cases)
raised RecursionError inside the WSGI app: a 500 with a traceback, no JSON-RPC answer.
"""

from __future__ import annotations

import json

import pytest
from support.http import single_answer

from mcp_sync import Server
from mcp_sync.jsonrpc import INVALID_REQUEST, MAX_NESTING_DEPTH


def _nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


@pytest.mark.parametrize(
    "depth", [MAX_NESTING_DEPTH - 2, MAX_NESTING_DEPTH - 1, 500, 5_000, 100_000]
)
def test_deep_posts_are_answered_once_and_the_session_goes_on(serve, raw, depth):
    server = Server("deep-http")
    server.add_method("test/echo", lambda session, request, token: request.params)
    handle = serve(server)
    session = raw(handle.url)
    session.initialize()
    body = f'{{"jsonrpc":"2.0","id":"d{depth}","method":"test/echo","params":{{"v":{_nested(depth)}}}}}'
    answer = single_answer(session.post(None, content=body.encode()))
    assert answer["id"] == f"d{depth}"
    if depth <= MAX_NESTING_DEPTH - 2:
        assert answer["result"] == {"v": json.loads(_nested(depth))}
    else:
        assert answer["error"]["code"] == INVALID_REQUEST
        assert "nesting too deep" in answer["error"]["message"]
    ping = single_answer(session.post({"jsonrpc": "2.0", "id": "after", "method": "ping"}))
    assert ping == {"jsonrpc": "2.0", "id": "after", "result": {}}
