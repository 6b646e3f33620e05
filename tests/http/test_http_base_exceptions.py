"""Over Streamable HTTP, a handler that raises SystemExit is answered and its session idles.

Before the fix the request was never answered (the POST's stream never ended, so this test's
bounded read failed) and the session counted it in flight for ever, so it never expired.
"""

from __future__ import annotations

from support.http import single_answer

from mcp_sync import Server
from mcp_sync.jsonrpc import INTERNAL_ERROR


def test_system_exit_in_a_handler_is_answered_and_the_session_is_idle_again(serve, raw):
    server = Server("exit-http")

    @server.tool()
    def leave() -> str:
        raise SystemExit(2)

    server.add_method(
        "test/exit", lambda session, request, token: (_ for _ in ()).throw(SystemExit(5))
    )
    handle = serve(server)
    session = raw(handle.url)
    session.initialize()
    method = single_answer(session.post({"jsonrpc": "2.0", "id": 1, "method": "test/exit"}))
    assert method["error"]["code"] == INTERNAL_ERROR and "SystemExit" in method["error"]["message"]
    tool = single_answer(
        session.post(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "leave", "arguments": {}},
            }
        )
    )
    assert tool["result"]["isError"] is True
    (live,) = server.sessions()
    assert live.endpoint.in_flight() == (0, 0), "the failed requests stayed in flight"
    assert (
        single_answer(session.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}))["result"] == {}
    )
