"""Our client against real servers over Streamable HTTP at 2026-07-28: the official ``mcp``
2.3.0 server (under uvicorn, dual-era) and the TypeScript SDK v2 server (2026-07-28 only).

``Client.http(url)`` in its default mode must end on 2026-07-28 with both; a plain call, a
multi round-trip elicitation, and a cancellation -- by closing the call's stream, nothing
POSTed -- that the peer's handler saw (its ``CANCELLED`` marker), after which the client
still works. A timeout cancels the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.peers_2026 import LIMIT, MODERN, OFFICIAL_SERVER_2026, ts_server_2026
from support.waiting import wait_until
from test_peers_2026 import http_server

from mcp_sync import Client, Context
from mcp_sync.errors import Cancelled, RequestTimeout
from mcp_sync.lifecycle import Era

pytestmark = pytest.mark.interop


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def elicit_ada(params: dict[str, Any], ctx: Context) -> Any:
    return {"action": "accept", "content": {"name": "Ada"}}


def wait_marker(events: Path, marker: str) -> None:
    wait_until(
        lambda: events.exists() and marker in events.read_text(encoding="utf-8"),
        f"the server to write {marker!r}",
        timeout=LIMIT,
    )


@pytest.fixture(params=["official", "typescript"])
def peer(request: pytest.FixtureRequest) -> list[str]:
    return list(OFFICIAL_SERVER_2026) if request.param == "official" else ts_server_2026()


def test_our_http_client_speaks_2026_with_real_servers_and_cancels_by_closing(
    peer: list[str], tmp_path: Path
) -> None:
    events = tmp_path / "events"
    with http_server(peer, events) as url:
        with Client.http(
            url, elicitation_handler=elicit_ada, discover_timeout=LIMIT, default_timeout=LIMIT
        ) as client:
            assert (client.era, client.protocol_version) == (Era.MODERN, MODERN)
            assert client.server_info.name in ("official-peer-2026", "ts-v2-peer-2026")
            assert {"echo", "slow", "ask_name"} <= {tool.name for tool in client.list_tools()}
            assert text_of(client.call_tool("echo", {"text": "hello 2026"})) == "hello 2026"
            assert text_of(client.call_tool("ask_name", {})) == "accept:Ada state:asked"
            slow = client.call_tool_future("slow", {"seconds": 60, "tag": "c1"})
            wait_marker(events, "STARTED slow c1")
            assert slow.cancel("enough") is True
            with pytest.raises(Cancelled):
                slow.result(0)  # ended locally at once
            wait_marker(events, "CANCELLED slow c1")
            assert text_of(client.call_tool("echo", {"text": "after cancel"})) == "after cancel"
        assert "FINISHED slow c1" not in events.read_text(encoding="utf-8")


def test_a_timeout_closes_the_stream_of_a_call_on_real_servers(
    peer: list[str], tmp_path: Path
) -> None:
    events = tmp_path / "events"
    with http_server(peer, events) as url, Client.http(url, discover_timeout=LIMIT) as client:
        assert client.era is Era.MODERN
        with pytest.raises(RequestTimeout):
            client.call_tool("slow", {"seconds": 60, "tag": "t1"}, timeout=1.0)
        wait_marker(events, "CANCELLED slow t1")
        assert text_of(client.call_tool("echo", {"text": "still"}, timeout=LIMIT)) == "still"


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_our_http_client_falls_back_to_2025_with_a_2025_only_server() -> None:
    """``@modelcontextprotocol/server-everything`` (TypeScript SDK v1: 2025-11-25 sessions
    only) refuses the server/discover probe; the default mode then sends ``initialize`` and
    speaks 2025-11-25, a session id and all."""
    import signal

    from support.node import node, node_package
    from support.processes import Proc, user_env

    script = node_package("@modelcontextprotocol/server-everything") / "dist" / "index.js"
    port = _free_port()
    with Proc([node(), str(script), "streamableHttp"], env=user_env(PORT=str(port))) as server:
        server.wait_for("stderr", "listening on port", LIMIT)
        url = f"http://127.0.0.1:{port}/mcp"
        with Client.http(url, discover_timeout=LIMIT, default_timeout=LIMIT) as client:
            assert client.era is Era.HANDSHAKE
            assert client.protocol_version.startswith("2025")
            assert client.transport.session_id  # type: ignore[attr-defined]
            assert text_of(client.call_tool("echo", {"message": "old"})).endswith("old")
        server.send_signal(signal.SIGINT)
        server.finish(LIMIT)
