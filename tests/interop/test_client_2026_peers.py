"""Our client against real servers over stdio: with the official ``mcp`` 2.3.0 server (dual-era)
and the TypeScript SDK v2 server (2026-07-28 only) it speaks 2026-07-28 -- judged on the wire
it wrote and read -- including a multi round-trip elicitation and a cancellation the server's
handler saw; against 2025-only servers (one that answers the probe with an error, one that
never answers it, one that exits on it) it falls back to ``initialize``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from support.messages import with_method
from support.paths import PYTHON
from support.processes import user_env
from support.recording import RecordingTransport
from support.waiting import wait_until
from test_peers_2026 import OFFICIAL_SERVER_2026, ts_server_2026

from mcp_sync import Client, Context
from mcp_sync.errors import Cancelled, RequestTimeout, ServerExited
from mcp_sync.lifecycle import Era
from mcp_sync.transports.subprocess import SubprocessTransport

pytestmark = pytest.mark.interop

LIMIT = 60.0
MODERN = "2026-07-28"
ENVELOPE = (
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
)


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


class Markers:
    """The markers a peer server appends to its ``PEER_EVENTS_FILE``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("")

    def wait(self, marker: str) -> None:
        wait_until(
            lambda: marker in self.path.read_text(),
            f"the server to write {marker!r}",
            timeout=LIMIT,
        )

    def __contains__(self, marker: str) -> bool:
        return marker in self.path.read_text()


def spawn(command: list[str], markers: Markers | None = None) -> RecordingTransport:
    env = user_env(PEER_EVENTS_FILE=str(markers.path)) if markers else user_env()
    return RecordingTransport(SubprocessTransport(command, env=env, stderr="discard"))


def elicit_ada(params: dict[str, Any], ctx: Context) -> Any:
    return {"action": "accept", "content": {"name": "Ada"}}


@pytest.fixture(params=["official", "typescript"])
def modern_server(request: pytest.FixtureRequest) -> list[str]:
    return list(OFFICIAL_SERVER_2026) if request.param == "official" else ts_server_2026()


def requests(messages: list[Any]) -> list[dict[str, Any]]:
    return [m for m in messages if isinstance(m, dict) and "method" in m and "id" in m]


def assert_spoke_2026(wire: RecordingTransport) -> None:
    sent = requests(wire.sent)
    assert sent[0]["method"] == "server/discover", sent[0]
    for message in sent:
        meta = message["params"]["_meta"]
        assert [meta.get(key) is not None for key in ENVELOPE] == [True] * 3, message
        assert meta[ENVELOPE[0]] == MODERN
        assert meta[ENVELOPE[1]] == {"elicitation": {"form": {}, "url": {}}}
    assert not with_method(wire.sent, "initialize") and not with_method(
        wire.sent, "notifications/initialized"
    )
    answers = [m for m in wire.received if isinstance(m, dict) and "result" in m]
    assert answers and all("resultType" in m["result"] for m in answers)


def test_our_client_speaks_2026_with_real_servers_including_an_input_round_and_a_cancel(
    modern_server, tmp_path
):
    markers = Markers(tmp_path / "events")
    wire = spawn(modern_server, markers)
    with Client.connect(
        wire,
        elicitation_handler=elicit_ada,
        init_timeout=LIMIT,
        discover_timeout=LIMIT,
        default_timeout=LIMIT,
    ) as client:
        assert (client.era, client.protocol_version) == (Era.MODERN, MODERN)
        assert client.server_info.name in ("official-peer-2026", "ts-v2-peer-2026")
        assert {"echo", "slow", "ask_name"} <= {tool.name for tool in client.list_tools()}
        assert text_of(client.call_tool("echo", {"text": "hello 2026"})) == "hello 2026"
        assert text_of(client.call_tool("ask_name", {})) == "accept:Ada state:asked"
        slow = client.call_tool_future("slow", {"seconds": 60, "tag": "c1"})
        markers.wait("STARTED slow c1")
        assert slow.cancel("enough") is True
        markers.wait("CANCELLED slow c1")
        with pytest.raises(Cancelled):
            slow.result(LIMIT)
        assert text_of(client.call_tool("echo", {"text": "after cancel"})) == "after cancel"
    assert_spoke_2026(wire)
    asks = [m for m in with_method(wire.sent, "tools/call") if m["params"]["name"] == "ask_name"]
    assert len(asks) == 2 and asks[0]["id"] != asks[1]["id"]
    (interim,) = [m for m in wire.received if m.get("id") == asks[0]["id"]]
    assert interim["result"]["resultType"] == "input_required"
    assert asks[1]["params"]["requestState"] == interim["result"]["requestState"]  # byte-exact
    assert asks[1]["params"]["inputResponses"] == {
        "name": {"action": "accept", "content": {"name": "Ada"}}
    }
    (slow_call,) = [
        m for m in with_method(wire.sent, "tools/call") if m["params"]["name"] == "slow"
    ]
    cancels = with_method(wire.sent, "notifications/cancelled")
    assert [c["params"] for c in cancels] == [{"requestId": slow_call["id"], "reason": "enough"}]
    assert [m for m in wire.received if m.get("id") == slow_call["id"]] == []  # never answered


def test_a_timeout_cancels_the_call_on_a_2026_server(tmp_path):
    markers = Markers(tmp_path / "events")
    wire = spawn(list(OFFICIAL_SERVER_2026), markers)
    with Client.connect(wire, init_timeout=LIMIT, discover_timeout=LIMIT) as client:
        with pytest.raises(RequestTimeout):
            client.call_tool("slow", {"seconds": 60, "tag": "t1"}, timeout=3.0)
        markers.wait("CANCELLED slow t1")
    (cancel,) = with_method(wire.sent, "notifications/cancelled")
    assert cancel["params"]["reason"] == "timed out after 3 s"


def test_cancelling_between_rounds_sends_nothing_to_a_2026_server(tmp_path):
    asked, stopped = threading.Event(), threading.Event()

    def user_never_answers(params: dict[str, Any], ctx: Context) -> Any:
        asked.set()
        if ctx.wait(LIMIT):
            stopped.set()
            ctx.raise_if_cancelled()
        return {"action": "decline"}

    wire = spawn(list(OFFICIAL_SERVER_2026))
    with Client.connect(
        wire, elicitation_handler=user_never_answers, init_timeout=LIMIT, discover_timeout=LIMIT
    ) as client:
        call = client.call_tool_future("ask_name", {})
        assert asked.wait(LIMIT)
        assert call.cancel("the user closed the dialog")
        assert stopped.wait(LIMIT)
        assert text_of(client.call_tool("echo", {"text": "still here"})) == "still here"
    calls = [m["params"]["name"] for m in with_method(wire.sent, "tools/call")]
    assert calls[0] == "ask_name" and "ask_name" not in calls[1:]
    assert with_method(wire.sent, "notifications/cancelled") == []


def scripted_2025_server(before_initialize: str, starts: Path | None = None) -> list[str]:
    """A 2025 server serving ``initialize`` and ``tools/list``. A request before ``initialize``
    gets ``"error"``: -32602 (as older official Python servers answer); ``"silent"``: nothing
    (some never answer); ``"exit"``: the server ends with status 0 (as some do). ``starts``:
    a file that gets a line per start."""
    code = (
        "import json, sys\n"
        f"starts, mode, ready = {str(starts) if starts else None!r}, {before_initialize!r}, False\n"
        "if starts: open(starts, 'a').write('start\\n')\n"
        "def answer(msg, **body): print(json.dumps({'jsonrpc': '2.0', 'id': msg['id'], **body}), flush=True)\n"
        "for line in sys.stdin:\n"
        "    msg = json.loads(line)\n"
        "    method = msg.get('method')\n"
        "    if method == 'initialize':\n"
        "        ready = True\n"
        "        answer(msg, result={'protocolVersion': '2025-11-25', 'capabilities': {'tools': {}},"
        " 'serverInfo': {'name': 'old', 'version': '0'}})\n"
        "    elif not ready and 'id' in msg:\n"
        "        if mode == 'exit': sys.exit(0)\n"
        "        if mode == 'error': answer(msg, error={'code': -32602, 'message': 'Invalid request parameters'})\n"
        "    elif method == 'tools/list':\n"
        "        answer(msg, result={'tools': []})\n"
    )
    return [PYTHON, "-c", code]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX process handling")
@pytest.mark.parametrize(
    "command, wait",
    [(scripted_2025_server("error"), LIMIT), (scripted_2025_server("silent"), 0.5)],
    ids=["errors", "silent"],
)
def test_a_2025_server_gets_initialize_after_the_probe(command, wait):
    wire = spawn(command)
    with Client.connect(wire, init_timeout=LIMIT, discover_timeout=wait) as client:
        assert (client.era, client.protocol_version) == (Era.HANDSHAKE, "2025-11-25")
        client.list_tools()
    sent = [m["method"] for m in wire.sent if isinstance(m, dict) and "method" in m]
    assert sent[:3] == ["server/discover", "initialize", "notifications/initialized"]
    assert "notifications/cancelled" not in sent
    assert "_meta" not in requests(wire.sent)[-1].get("params", {})


def test_stdio_starts_a_server_that_exits_on_the_probe_again_with_initialize(tmp_path):
    starts = tmp_path / "starts"
    with Client.stdio(
        scripted_2025_server("exit", starts), stderr="discard", init_timeout=LIMIT
    ) as client:
        assert client.era is Era.HANDSHAKE
        assert client.list_tools() == []
    assert starts.read_text().splitlines() == ["start", "start"]


def test_a_server_that_exits_on_the_probe_fails_a_2026_only_client(tmp_path):
    starts = tmp_path / "starts"
    with pytest.raises(ServerExited, match="status 0"):
        Client.stdio(
            scripted_2025_server("exit", starts),
            stderr="discard",
            init_timeout=LIMIT,
            protocol="modern",
        )
    assert starts.read_text().splitlines() == ["start"]
