"""Which 2026-07-28 requests take the HTTP client's own plain HTTP/1.1 path, and what that
path keeps: one keep-alive connection for sequential calls, futures and caller reads over
the same pool, a static bearer header, and no httpx at all for a 2026-only session.
(The behaviours both paths share run over both: ``client_path`` in conftest.)"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.http import make_server, run_waitress
from support.probes import GateProbe
from support.waiting import WAIT

from mcp_sync import Client
from mcp_sync.cancel import CancelToken
from mcp_sync.errors import Cancelled
from mcp_sync.http import McpWsgiApp
from mcp_sync.http.client_transport import HttpClientTransport

MODERN = "2026-07-28"


class Ports:
    """WSGI middleware: the client port and the Authorization header of every request."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        with self.lock:
            self.seen.append(
                (environ.get("REMOTE_PORT", "?"), environ.get("HTTP_AUTHORIZATION", ""))
            )
        return self.app(environ, start_response)

    def connections(self) -> int:
        with self.lock:
            return len({port for port, _ in self.seen})


@pytest.fixture
def served() -> Iterator[tuple[str, GateProbe, Ports]]:
    probe = GateProbe()
    # a JSON answer turns into a stream with keep-alive comments soon: a closed connection
    # is then seen by the server (a WSGI app learns of it only when it writes)
    app = McpWsgiApp(make_server(probe), path="/mcp", modern_json_window=0.05, keepalive=0.05)
    ports = Ports(app)
    base, stop = run_waitress(ports)
    try:
        yield base + "/mcp", probe, ports
    finally:
        app.close()
        stop()


def transport_of(client: Client) -> HttpClientTransport:
    transport = client.transport
    assert isinstance(transport, HttpClientTransport)
    return transport


@pytest.mark.parametrize(
    ("url", "options", "plain"),
    [
        ("http://127.0.0.1:9/mcp", {}, True),
        ("http://127.0.0.1:9/mcp", {"headers": {"Authorization": "Bearer t"}}, True),
        ("http://127.0.0.1:9/mcp", {"auth": httpx.BasicAuth("a", "b")}, False),
        ("http://127.0.0.1:9/mcp", {"http_client": "own"}, False),
        ("https://127.0.0.1:9/mcp", {}, False),
        ("http://user:pw@127.0.0.1:9/mcp", {}, False),
    ],
)
def test_the_plain_path_is_taken_only_for_an_own_client_to_an_http_url_without_auth(
    url: str, options: dict[str, Any], plain: bool
) -> None:
    own = httpx.Client() if options.get("http_client") == "own" else None
    if own is not None:
        options = {**options, "http_client": own}
    transport = HttpClientTransport(url, **options)
    try:
        assert (transport._plain is not None) is plain
        assert (transport._httpx_client is None) is plain  # httpx is made when needed only
    finally:
        transport.close()
        if own is not None:
            own.close()


def test_sequential_calls_share_one_connection_and_carry_the_static_headers(
    served: tuple[str, GateProbe, Ports],
) -> None:
    url, _, ports = served
    headers = {"Authorization": "Bearer static-token"}
    with Client.http(url, headers, protocol=MODERN) as client:
        for n in range(10):
            assert client.call_tool("echo", {"text": f"{n}"}).content[0].text == f"{n}"
        plain = transport_of(client)._plain
        assert plain is not None and plain.connections_opened == 1
        assert transport_of(client)._httpx_client is None
    assert ports.connections() == 1
    assert {auth for _, auth in ports.seen} == {"Bearer static-token"}


def test_futures_in_flight_at_once_each_get_a_connection_then_share_the_pool(
    served: tuple[str, GateProbe, Ports],
) -> None:
    url, probe, _ports = served
    with Client.http(url, protocol=MODERN) as client:
        calls = [client.call_tool_future("gated", {"tag": f"g{n}"}) for n in range(3)]
        for n in range(3):
            assert probe.started(f"g{n}").wait(WAIT)
        for n in range(3):
            probe.release(f"g{n}")
        assert sorted(c.result(WAIT).content[0].text for c in calls) == [
            "g0: released",
            "g1: released",
            "g2: released",
        ]
        plain = transport_of(client)._plain
        assert plain is not None
        opened = plain.connections_opened
        assert opened >= 3
        for _ in range(5):
            client.call_tool("echo", {"text": "again"})
        assert plain.connections_opened == opened  # the pooled ones served the rest


def test_a_cancelled_call_on_the_plain_path_is_seen_by_its_handler_and_its_socket_dropped(
    served: tuple[str, GateProbe, Ports],
) -> None:
    url, probe, _ = served
    with Client.http(url, protocol=MODERN) as client:
        plain = transport_of(client)._plain
        assert plain is not None
        client.call_tool("echo", {"text": "warm"})
        token = CancelToken()
        call = client.call_tool_future("gated", {"tag": "c"}, cancel_token=token)
        assert probe.started("c").wait(WAIT)
        token.cancel()
        with pytest.raises(Cancelled):
            call.result(WAIT)
        assert probe.cancelled("c").wait(WAIT)  # the server saw the stream close
        assert plain.idle_connections == 0  # the cancelled call's connection is not kept
        assert client.call_tool("echo", {"text": "after"}).content[0].text == "after"
        assert plain.connections_opened == 2


def test_a_2026_only_session_never_imports_httpx(served: tuple[str, GateProbe, Ports]) -> None:
    url, _, _ = served
    code = (
        "import sys\n"
        "from mcp_sync import Client\n"
        f"with Client.http({url!r}, protocol={MODERN!r}) as c:\n"
        "    assert c.call_tool('echo', {'text': 'x'}).content[0].text == 'x'\n"
        "print('httpx' in sys.modules)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=WAIT * 4
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


def test_a_2025_session_over_the_same_transport_uses_httpx(
    served: tuple[str, GateProbe, Ports],
) -> None:
    url, _, _ = served
    with Client.http(url, protocol="legacy", open_get_stream=False) as client:
        assert client.call_tool("echo", {"text": "old"}).content[0].text == "old"
        transport = transport_of(client)
        assert transport._httpx_client is not None
        assert transport._plain is not None and transport._plain.connections_opened == 0
