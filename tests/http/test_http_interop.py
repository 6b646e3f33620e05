"""Interoperability over Streamable HTTP with the official ``mcp`` SDK as the real peer.

* The official SDK's Streamable HTTP server app under uvicorn (a subprocess on a free loopback
  port) — mcp_sync's ``Client.http``: tools, progress, cancellation and timeouts (judged by the
  official handler's own CANCELLED marker), requests from the server, session end.
* The official SDK's Streamable HTTP client (a subprocess script) — mcp_sync's WSGI app served
  by ``serve_http`` in this process: tools, progress, cancellation both ways (our handler's
  token fired and nothing answered the cancelled id; the SDK's callback was cancelled and
  answered nothing), resumption attempts, session end (DELETE).
"""

from __future__ import annotations

import io
import json
import os
import selectors
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.http import legacy_http, make_server
from support.interop import wait_for_marker
from support.messages import as_wire
from support.paths import PEERS, PYTHON
from support.probes import GateProbe
from support.waiting import WAIT

from mcp_sync import Cancelled, ConnectionClosed, Context, RequestTimeout
from mcp_sync.errors import McpError, SessionEnded

pytestmark = pytest.mark.interop

START_LIMIT = 60.0
"""Bound for a peer process to start (importing the SDK is slow on a loaded machine)."""


def _peer_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEER_")}
    env.update(extra)
    return env


# -- the official server -------------------------------------------------------------------------
@dataclass
class OfficialServer:
    url: str
    events: Path

    def markers(self) -> list[str]:
        return self.events.read_text().splitlines() if self.events.exists() else []


@pytest.fixture(scope="module")
def official_server(tmp_path_factory: pytest.TempPathFactory):
    workdir = tmp_path_factory.mktemp("official-http")
    events = workdir / "events.txt"
    stderr = open(workdir / "stderr.txt", "wb")
    process = subprocess.Popen(
        [PYTHON, str(PEERS / "official_http_server.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=_peer_env(PEER_EVENTS_FILE=str(events)),
    )
    try:
        url = _read_ready_line(process, workdir / "stderr.txt")
        _wait_until_answering(url)
        yield OfficialServer(url, events)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        process.stdout.close()  # type: ignore[union-attr]
        stderr.close()


def _read_ready_line(process: subprocess.Popen[bytes], stderr_path: Path) -> str:
    """Read ``READY <url>`` from the peer's stdout, bounded by START_LIMIT."""
    assert process.stdout is not None
    end = time.monotonic() + START_LIMIT
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            remaining = end - time.monotonic()
            if remaining <= 0 or process.poll() is not None:
                raise AssertionError(
                    f"the official server did not start: {stderr_path.read_text()[-2000:]}"
                )
            if selector.select(min(remaining, 0.5)):
                chunk = os.read(process.stdout.fileno(), 4096)
                if not chunk:
                    raise AssertionError(
                        f"the official server exited: {stderr_path.read_text()[-2000:]}"
                    )
                buffer += chunk
    line = buffer.split(b"\n", 1)[0].decode()
    assert line.startswith("READY "), line
    return line.split(" ", 1)[1].strip()


def _wait_until_answering(url: str) -> None:
    """READY is printed once uvicorn listens; confirm the port answers HTTP (bounded)."""
    end = time.monotonic() + START_LIMIT
    while True:
        try:
            httpx.get(url, timeout=2.0)  # 4xx is fine: something answered
            return
        except httpx.TransportError:
            if time.monotonic() >= end:
                raise
            time.sleep(0.05)  # polling an external process's port, bounded


def test_our_client_calls_tools_on_the_official_server(official_server):
    with legacy_http(official_server.url) as client:
        assert client.server_info.name == "official-stdio-peer"
        assert client.protocol_version == "2025-11-25"
        names = {tool.name for tool in client.list_tools()}
        assert {"echo", "add", "slow"} <= names
        assert client.call_tool("echo", {"text": "hé"}).content[0].text == "hé"
        assert client.call_tool("add", {"a": 2, "b": 40}).content[0].text == "42"
        client.ping()
        with pytest.raises(McpError):
            client.read_resource("peer://no-such-thing")


def test_our_client_gets_progress_from_the_official_server(official_server):
    seen: list[tuple[float, float | None, str | None]] = []
    last = threading.Event()

    def on_progress(progress, total, message):
        seen.append((progress, total, message))
        if progress == 3:
            last.set()

    with legacy_http(official_server.url) as client:
        result = client.call_tool("slow", {"seconds": 0.3, "steps": 3}, on_progress=on_progress)
        assert result.content[0].text == "slept 0.3"
        assert last.wait(WAIT)
    assert seen == [(1, 3, "step 1/3"), (2, 3, "step 2/3"), (3, 3, "step 3/3")]


def test_our_client_cancels_a_call_on_the_official_server(official_server):
    tag = uuid.uuid4().hex[:8]
    first = threading.Event()
    with legacy_http(official_server.url) as client:
        future = client.call_tool_future(
            "slow", {"seconds": 30, "steps": 300, "tag": tag}, on_progress=lambda *_: first.set()
        )
        assert first.wait(WAIT * 2), "no progress from the official server"
        assert future.cancel("test cancels") is True
        with pytest.raises(Cancelled):
            future.result(WAIT)
        markers = wait_for_marker(official_server.events, f"CANCELLED slow {tag}")
        assert f"FINISHED slow {tag}" not in markers
        # the connection is fine afterwards (the SDK's courtesy error answer, if any, is dropped)
        assert client.call_tool("echo", {"text": "after"}).content[0].text == "after"
        assert client.endpoint.in_flight() == (0, 0)


def test_our_client_times_out_a_call_on_the_official_server(official_server):
    tag = uuid.uuid4().hex[:8]
    with legacy_http(official_server.url) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeout):
            client.call_tool("slow", {"seconds": 30, "steps": 300, "tag": tag}, timeout=1.0)
        assert time.monotonic() - started < WAIT
        markers = wait_for_marker(official_server.events, f"CANCELLED slow {tag}")
        assert f"FINISHED slow {tag}" not in markers


def test_official_server_requests_roots_and_sampling_from_our_client(official_server):
    def sampling(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        prompt = params["messages"][0]["content"]["text"]
        return {
            "role": "assistant",
            "content": {"type": "text", "text": f"echo:{prompt}"},
            "model": "fake",
        }

    with legacy_http(
        official_server.url, roots=["file:///srv/a"], sampling_handler=sampling
    ) as client:
        roots = json.loads(client.call_tool("ask_roots").content[0].text)
        assert roots == [{"uri": "file:///srv/a"}]
        assert client.call_tool("ask_sample", {"prompt": "hi"}).content[0].text == "echo:hi"


def test_close_ends_the_session_on_the_official_server(official_server):
    client = legacy_http(official_server.url)
    session_id = client.transport.session_id
    assert session_id
    client.close()  # DELETE
    headers = {
        "Mcp-Session-Id": session_id,
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    answer = httpx.post(
        official_server.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers=headers,
        timeout=WAIT,
    )
    assert answer.status_code == 404


def test_official_server_ending_the_session_fails_our_calls_with_session_ended(official_server):
    with legacy_http(official_server.url, open_get_stream=False) as client:
        assert client.call_tool("echo", {"text": "a"}).content[0].text == "a"
        headers = {
            "Mcp-Session-Id": client.transport.session_id,
            "MCP-Protocol-Version": "2025-11-25",
        }
        assert httpx.delete(official_server.url, headers=headers, timeout=WAIT).status_code == 200
        with pytest.raises(ConnectionClosed) as info:
            client.call_tool("echo", {"text": "b"}, timeout=WAIT)
        assert isinstance(info.value, SessionEnded), repr(info.value)


# -- the official client against our WSGI app ---------------------------------------------------------
class RecordingApp:
    """WSGI middleware: records each HTTP exchange (method, Last-Event-ID, status, body)."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.exchanges: list[dict[str, Any]] = []

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        body = b""
        if environ.get("REQUEST_METHOD") == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length) if length else b""
            environ["wsgi.input"] = io.BytesIO(body)
        exchange: dict[str, Any] = {
            "method": environ.get("REQUEST_METHOD"),
            "last_event_id": environ.get("HTTP_LAST_EVENT_ID"),
            "body": json.loads(body) if body.strip() else None,
        }

        def recording_start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Any:
            exchange["status"] = int(status.split()[0])
            return (
                start_response(status, headers, exc_info)
                if exc_info
                else start_response(status, headers)
            )

        with self.lock:
            self.exchanges.append(exchange)
        return self.app(environ, recording_start_response)

    def __getattr__(self, name: str) -> Any:  # close(), sessions(), path: the MCP app's
        return getattr(self.app, name)


@dataclass
class OfficialClientRun:
    output: dict[str, Any]
    probe: GateProbe
    exchanges: list[dict[str, Any]]
    pushed: list[dict[str, Any]]
    sessions_after: int
    nested: dict[str, Any] = field(default_factory=dict)

    def step(self, op: str, name: str | None = None) -> dict[str, Any]:
        for step in self.output["steps"]:
            if step["op"] == op and (name is None or step.get("name", name) == name):
                return step
        raise KeyError(op)

    def wire(self, direction: str) -> list[dict[str, Any]]:
        return [w["msg"] for w in self.output["wire"] if w["dir"] == direction]

    def call_id(self, tool: str) -> Any:
        ids = [
            m["id"]
            for m in self.wire(">>")
            if m.get("method") == "tools/call" and m["params"]["name"] == tool
        ]
        assert len(ids) == 1, ids
        return ids[0]


@pytest.fixture(scope="module")
def official_client_run(tmp_path_factory: pytest.TempPathFactory) -> OfficialClientRun:
    """Runs the official client's script once against our server; stops everything."""
    from mcp_sync.http.sse import EventStream

    probe = GateProbe()
    server = make_server(probe, name="mcp-sync-under-test")
    nested: dict[str, Any] = {}

    @server.tool()
    def ask_roots_with_timeout(timeout: float, ctx: Context) -> str:
        """roots/list with a timeout: on expiry *our server* cancels its own request."""
        try:
            return json.dumps(as_wire(ctx.session.list_roots(timeout=timeout)))
        except RequestTimeout as exc:
            nested["timed_out"] = str(exc)
            return f"TIMEOUT {exc}"

    pushed: list[dict[str, Any]] = []
    original_push = EventStream.push

    def recording_push(self: EventStream, data: bytes, *, last: bool = False) -> bool:
        pushed.append(json.loads(data))
        return original_push(self, data, last=last)

    app = RecordingApp(server.wsgi_app(path="/mcp"))
    from mcp_sync.http import serve_http

    steps = [
        {"op": "list"},
        {"op": "call", "name": "echo", "args": {"text": "hello"}},
        {"op": "call", "name": "slow", "args": {"seconds": 0.2}, "progress": True},
        # grace: long enough for the SDK to try resuming the answer-less stream (after 1 s)
        {"op": "cancel", "name": "progress_gated", "args": {"tag": "official"}, "grace": 2.5},
        {"op": "call", "name": "ask_roots_with_timeout", "args": {"timeout": 0.5}},
        {"op": "call", "name": "echo", "args": {"text": 5}},  # invalid: a tool error, not -32602
        {"op": "call", "name": "echo", "args": {"text": "still here"}},
    ]
    EventStream.push = recording_push  # type: ignore[method-assign]
    handle = serve_http(app, "127.0.0.1", 0)  # type: ignore[arg-type]
    try:
        completed = subprocess.run(
            [
                PYTHON,
                str(PEERS / "official_http_client.py"),
                handle.url,
                json.dumps(steps),
                "--mode",  # the 2025-11-25 session features (2026 traffic: test_http_modern_official_client)
                "legacy",
                "--roots",
                "file:///srv/roots",
                "--callback-delay",
                "5",
                "--overall-timeout",
                "40",
            ],
            capture_output=True,
            timeout=START_LIMIT + 40,
            env=_peer_env(),
        )
        assert completed.stdout.strip(), completed.stderr.decode()[-3000:]
        output = json.loads(completed.stdout)
        sessions_after = len(handle.app.sessions())
    finally:
        handle.stop()
        EventStream.push = original_push  # type: ignore[method-assign]
    with app.lock:
        exchanges = list(app.exchanges)
    return OfficialClientRun(output, probe, exchanges, pushed, sessions_after, nested)


def test_official_client_calls_tools_on_our_server(official_client_run):
    run = official_client_run
    assert run.output.get("error") is None, run.output.get("error")
    assert run.output["serverInfo"]["name"] == "mcp-sync-under-test"
    assert run.output["protocolVersion"] == "2025-11-25"
    assert {"echo", "gated", "slow"} <= set(run.step("list")["tools"])
    echo = [
        s for s in run.output["steps"] if s["op"] == "call" and s.get("result", {}).get("content")
    ]
    assert echo[0]["result"]["content"][0]["text"] == "hello"
    assert run.output["steps"][-1]["result"]["content"][0]["text"] == "still here"
    assert run.output["ok"], run.output["steps"]


def test_official_client_gets_invalid_arguments_as_a_tool_result(official_client_run):
    # 2025-11-25 (SEP-1303), over Streamable HTTP: a CallToolResult with isError, no exception
    step = official_client_run.output["steps"][-2]
    assert step["ok"], step
    assert step["result"]["isError"] is True
    assert (
        step["result"]["content"][0]["text"]
        == "Invalid arguments for tool 'echo': text: Input should be a valid string (got 5)"
    )


def test_official_client_gets_progress_from_our_server(official_client_run):
    slow = official_client_run.output["steps"][2]
    assert slow["result"]["content"][0]["text"] == "done"
    assert [p["progress"] for p in slow["progress"]] == list(range(1, 11))
    assert all(p["total"] == 10 for p in slow["progress"])


def test_official_client_cancels_a_call_on_our_server(official_client_run):
    run = official_client_run
    cancel_step = run.step("cancel")
    assert cancel_step["cancel_trigger"] == "progress"
    assert cancel_step["outcome"]["call_task_cancelled"] is True
    call_id = run.call_id("progress_gated")
    sent = [m for m in run.wire(">>") if m.get("method") == "notifications/cancelled"]
    assert [m["params"]["requestId"] for m in sent] == [call_id]
    # our handler's token fired
    assert run.probe.cancelled("official").wait(WAIT)
    assert not run.probe.completed("official").is_set()
    # and our server wrote no response for that id
    assert not [m for m in run.pushed if m.get("id") == call_id and "method" not in m]
    # the SDK's transport may hand its session a *local* error once it gives up resuming
    # the stream (it never came from the server: see `pushed` above); nothing else arrived
    seen = [m for m in run.wire("<<") if m.get("id") == call_id and "method" not in m]
    assert all(
        "reconnection attempts were exhausted" in m.get("error", {}).get("message", "")
        for m in seen
    ), seen
    # the SDK tried to resume the answer-less stream: told 204 (stop), it gave up
    resumes = [e for e in run.exchanges if e["method"] == "GET" and e["last_event_id"]]
    assert resumes and all(e["status"] == 204 for e in resumes), run.exchanges
    assert len(resumes) <= 2, resumes  # the SDK's bounded retries, not an endless loop


def test_our_server_cancels_its_request_to_the_official_client(official_client_run):
    run = official_client_run
    step = [
        s
        for s in run.output["steps"]
        if s["op"] == "call" and "TIMEOUT" in json.dumps(s.get("result", {}))
    ]
    assert step, run.output["steps"]
    assert "timed out" in run.nested["timed_out"]
    roots_requests = [m for m in run.wire("<<") if m.get("method") == "roots/list"]
    assert len(roots_requests) == 1
    roots_id = roots_requests[0]["id"]
    # our server sent notifications/cancelled for its own roots/list ...
    cancels = [m for m in run.pushed if m.get("method") == "notifications/cancelled"]
    assert [m["params"]["requestId"] for m in cancels] == [roots_id]
    # ... the SDK cancelled its callback ...
    callbacks = run.output["callbacks"]
    assert len(callbacks) == 1 and "cancelled" in callbacks[0] and "finished" not in callbacks[0], (
        callbacks
    )
    # ... and answered nothing (neither in its own wire view nor in what our server received)
    assert not [m for m in run.wire(">>") if m.get("id") == roots_id and "method" not in m]
    posted = [
        e["body"] for e in run.exchanges if e["method"] == "POST" and isinstance(e["body"], dict)
    ]
    assert not [b for b in posted if b.get("id") == roots_id and "method" not in b]


def test_official_client_ends_the_session_with_delete(official_client_run):
    run = official_client_run
    deletes = [e for e in run.exchanges if e["method"] == "DELETE"]
    assert [e["status"] for e in deletes] == [200]
    assert run.sessions_after == 0


def test_official_client_reconnects_after_our_stream_lifetime_and_misses_nothing():
    """Our server closes the GET stream after ``stream_lifetime`` with a ``retry:`` hint; the
    official client reconnects with Last-Event-ID, and a notification pushed while it was
    away (its reconnect held at a gate) reaches it."""
    from mcp_sync.http import serve_http

    server = make_server(GateProbe(), name="lifetime")
    held, release = threading.Event(), threading.Event()
    resumes: list[str] = []

    def log_to_every_session(text: str) -> None:  # on the standalone stream: related to no request
        for session in app.sessions():
            session.send_notification("notifications/message", {"level": "info", "data": text})

    @server.tool()
    def push() -> str:
        """Send a log message to every session."""
        log_to_every_session("one")
        return "pushed"

    @server.tool()
    def push_while_away() -> str:
        """Wait until the client's GET stream reconnects (held at the gate), notify, let it in."""
        if not held.wait(WAIT):
            return "the client never reconnected"
        log_to_every_session("two")
        release.set()
        return "pushed"

    app = server.wsgi_app(path="/mcp", stream_lifetime=0.5, stream_retry=0.05)

    def gate(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ["REQUEST_METHOD"] == "GET" and environ.get("HTTP_LAST_EVENT_ID"):
            resumes.append(environ["HTTP_LAST_EVENT_ID"])
            held.set()
            release.wait(WAIT * 2)
        return app(environ, start_response)

    gate.path = "/mcp"  # type: ignore[attr-defined]
    gate.close = app.close  # type: ignore[attr-defined]
    changed = "notifications/message"
    steps = [
        {"op": "call", "name": "push"},
        {"op": "wait_wire", "method": changed, "count": 1},
        {"op": "call", "name": "push_while_away"},
        {"op": "wait_wire", "method": changed, "count": 2},
        # a barrier: the peer's wire tap counts a message before handing it on, and exiting
        # with one still in its hands fails the script; an answer after it proves it passed
        {"op": "call", "name": "echo", "args": {"text": "barrier"}},
    ]
    handle = serve_http(gate, "127.0.0.1", 0)
    try:
        completed = subprocess.run(
            [
                PYTHON,
                str(PEERS / "official_http_client.py"),
                handle.url,
                json.dumps(steps),
                "--mode",
                "legacy",
                "--overall-timeout",
                "30",
            ],
            capture_output=True,
            timeout=START_LIMIT + 30,
            env=_peer_env(),
        )
    finally:
        release.set()
        handle.stop()
    assert completed.stdout.strip(), completed.stderr.decode()[-3000:]
    output = json.loads(completed.stdout)
    assert output["ok"], (output.get("error"), output["steps"])
    assert output["steps"][2]["result"]["content"][0]["text"] == "pushed"
    assert resumes and resumes[0].startswith("s-"), resumes
    logged = [
        w["msg"]["params"]["data"]
        for w in output["wire"]
        if w["dir"] == "<<" and w["msg"].get("method") == changed
    ]
    assert logged == ["one", "two"], logged  # each once, in order
