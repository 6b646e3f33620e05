"""mcp_sync's Client against a server built with the official ``mcp`` SDK, over stdio.

One official server process serves every test of this module (its start-up costs a second or
more); each test uses its own tags, prompts and request ids, and judges by the wire our client
wrote and read (:class:`WireRecorder`) and by the markers the server appends to its events file.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.interop import OFFICIAL_SERVER, prewarm_workers, read_events, wait_for_marker
from support.messages import cancelled_ids, is_response
from support.recording import WireRecorder
from support.waiting import PEER_WAIT, wait_event

from mcp_sync import (
    Cancelled,
    CancelToken,
    Client,
    Context,
    McpError,
    RequestTimeout,
    SubprocessTransport,
    deadlines,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

ROOTS = ["file:///tmp/interop-a", {"uri": "file:///tmp/interop-b", "name": "b"}]


@dataclass
class Blocked:
    """A sampling request our handler holds until it is cancelled (or 10 s pass)."""

    started: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    request_id: Any = None
    cancelled: bool | None = None
    reason: str | None = None
    thread: str | None = None


class ClientSide:
    """The handlers our client offers the official server (roots, sampling, elicitation)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sampling_params: list[dict[str, Any]] = []
        self.elicitation_params: list[dict[str, Any]] = []
        self.blocked: dict[str, Blocked] = {}

    def roots(self) -> list[Any]:
        return list(ROOTS)

    def expect_block(self, prompt: str) -> Blocked:
        """Make the sampling handler hold the request whose prompt is ``prompt``."""
        with self.lock:
            return self.blocked.setdefault(prompt, Blocked())

    def sample(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        text = params["messages"][0]["content"]["text"]
        with self.lock:
            self.sampling_params.append(params)
            blocked = self.blocked.get(text)
        if blocked is not None:
            blocked.request_id = ctx.request_id
            blocked.thread = threading.current_thread().name
            blocked.started.set()
            blocked.cancelled = ctx.wait(10)
            blocked.reason = ctx.cancel_token.reason
            blocked.finished.set()
            # whatever is returned now must never reach the wire: the request was cancelled
        return {
            "role": "assistant",
            "content": {"type": "text", "text": f"sampled:{text}"},
            "model": "interop-model",
            "stopReason": "endTurn",
        }

    def elicit(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        with self.lock:
            self.elicitation_params.append(params)
        if params.get("mode") == "url":
            return {"action": "accept"}
        return {"action": "accept", "content": {"name": "Ada"}}


@dataclass
class Peer:
    client: Client
    wire: WireRecorder
    events: Path
    side: ClientSide
    transport: SubprocessTransport


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    before = set(threading.enumerate())
    events = tmp_path_factory.mktemp("official-server") / "events.txt"
    side = ClientSide()
    transport = SubprocessTransport(
        OFFICIAL_SERVER,
        env={"PEER_EVENTS_FILE": str(events)},
        stderr="capture",
        close_grace=3.0,
        terminate_grace=2.0,
    )
    wire = WireRecorder(transport)
    client = Client.connect(
        wire,
        protocol="legacy",  # the 2025-11-25 era, with real server-to-client requests (2026: test_client_2026_peers)
        init_timeout=30.0,
        roots=side.roots,
        sampling_handler=side.sample,
        elicitation_handler=side.elicit,
        max_workers=4,
    )
    try:
        prewarm_workers(client)
        yield Peer(client, wire, events, side, transport)
    finally:
        client.close()  # cancels any handler still held, joins every thread, reaps the server
    # whole-session invariants, checked once every thread of the client has been joined
    assert transport.process.poll() is not None, "the official server process was not reaped"
    end = time.monotonic() + 5
    while True:
        deadlines.stop_idle_scheduler(0)  # idle, it only lingers; with a deadline pending it stays
        left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not left or time.monotonic() >= end:
            break
        left[0].join(0.05)
    assert not left, f"threads left behind by the module's client: {[t.name for t in left]}"
    sent, received = wire.snapshot()
    for request_id in cancelled_ids(received):
        answers = [m for m in sent if is_response(m, request_id)]
        assert not answers, (
            f"our client answered request {request_id!r} after the server cancelled it: {answers}"
        )


def text_of(result: Any) -> str:
    assert result.content, result
    return result.content[0].text


def sent_call(wire: WireRecorder, tag: str) -> dict[str, Any]:
    """The tools/call our client sent with arguments.tag == tag."""
    calls = [
        m
        for m in wire.sent_requests("tools/call")
        if (m["params"].get("arguments") or {}).get("tag") == tag
    ]
    assert len(calls) == 1, calls
    return calls[0]


def assert_cancelled_on_wire(peer: Peer, request_id: int, reason: str | None = None) -> None:
    """We sent exactly one notifications/cancelled for ``request_id`` (with ``reason``)."""
    sent, _ = peer.wire.snapshot()
    notes = [
        m
        for m in sent
        if m.get("method") == "notifications/cancelled" and m["params"]["requestId"] == request_id
    ]
    assert len(notes) == 1, f"expected one notifications/cancelled for {request_id}: {notes}"
    assert "id" not in notes[0]
    if reason is not None:
        assert notes[0]["params"].get("reason") == reason


def assert_no_late_response(peer: Peer, request_id: int) -> None:
    """After a ping round trip, no response to the cancelled request has reached us."""
    peer.client.ping(timeout=PEER_WAIT)
    _, received = peer.wire.snapshot()
    assert not [m for m in received if is_response(m, request_id)], (
        f"the server answered cancelled request {request_id}"
    )


def assert_stopped(peer: Peer, tag: str) -> None:
    """The official server's slow handler for ``tag`` started, was cancelled, never finished."""
    lines = wait_for_marker(peer.events, f"CANCELLED slow {tag}")
    assert lines.index(f"STARTED slow {tag}") < lines.index(f"CANCELLED slow {tag}")
    assert f"FINISHED slow {tag}" not in lines


# -- handshake and tools ----------------------------------------------------------------------------
def test_handshake(peer: Peer) -> None:
    assert peer.client.protocol_version == "2025-11-25"
    assert peer.client.server_info.name == "official-stdio-peer"
    init = peer.wire.sent_requests("initialize")[0]
    assert init["params"]["capabilities"] == {
        "roots": {"listChanged": True},
        "sampling": {},
        "elicitation": {"form": {}, "url": {}},
    }
    sent, _ = peer.wire.snapshot()
    assert [m.get("method") for m in sent[:2]] == ["initialize", "notifications/initialized"]


def test_list_tools(peer: Peer) -> None:
    tools = {tool.name: tool for tool in peer.client.list_tools(timeout=PEER_WAIT)}
    assert {
        "echo",
        "add",
        "slow",
        "ask_roots",
        "ask_sample",
        "ask_sample_timeout",
        "ask_elicit",
        "ask_elicit_url",
    } <= set(tools)
    assert tools["add"].input_schema["properties"]["a"]["type"] == "integer"
    assert tools["echo"].input_schema["required"] == ["text"]


def test_call_echo_and_add(peer: Peer) -> None:
    assert (
        text_of(peer.client.call_tool("echo", {"text": "héllo ✓"}, timeout=PEER_WAIT)) == "héllo ✓"
    )
    result = peer.client.call_tool("add", {"a": 2, "b": 40}, timeout=PEER_WAIT)
    assert not result.is_error
    assert text_of(result) == "42"
    assert result.structured_content == {"result": 42}


def test_tool_errors_from_the_official_server(peer: Peer) -> None:
    # the official SDK reports an unknown tool and bad arguments as tool errors, not -32602
    unknown = peer.client.call_tool("no_such_tool", {}, timeout=PEER_WAIT)
    assert unknown.is_error and "no_such_tool" in text_of(unknown)
    bad = peer.client.call_tool("add", {"a": "x", "b": 1}, timeout=PEER_WAIT)
    assert bad.is_error


def test_progress(peer: Peer) -> None:
    seen: list[tuple[Any, ...]] = []
    last = threading.Event()

    def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))
        if progress >= 3:
            last.set()

    result = peer.client.call_tool(
        "slow",
        {"seconds": 0.3, "steps": 3, "tag": "progress"},
        timeout=PEER_WAIT,
        on_progress=on_progress,
    )
    assert text_of(result) == "slept 0.3"
    wait_event(
        last, "the third progress callback", PEER_WAIT
    )  # callbacks run on a worker, after the reader
    assert seen == [(1, 3, "step 1/3"), (2, 3, "step 2/3"), (3, 3, "step 3/3")]
    call = sent_call(peer.wire, "progress")
    assert call["params"]["_meta"]["progressToken"] is not None
    assert wait_for_marker(peer.events, "FINISHED slow progress")


# -- cancellation of our requests ---------------------------------------------------------------------
def test_timeout_cancels_the_official_handler(peer: Peer) -> None:
    start = time.monotonic()
    with pytest.raises(RequestTimeout):
        peer.client.call_tool("slow", {"seconds": 20, "steps": 200, "tag": "timeout"}, timeout=1.0)
    assert time.monotonic() - start < 5
    request_id = sent_call(peer.wire, "timeout")["id"]
    assert_cancelled_on_wire(peer, request_id)
    assert_stopped(peer, "timeout")
    assert_no_late_response(peer, request_id)


def test_pending_call_cancel_from_another_thread(peer: Peer) -> None:
    running = threading.Event()
    future = peer.client.call_tool_future(
        "slow", {"seconds": 20, "steps": 200, "tag": "future"}, on_progress=lambda *_: running.set()
    )
    wait_event(running, "the first progress notification (the handler is running)", PEER_WAIT)
    outcome: list[bool] = []
    canceller = threading.Thread(
        target=lambda: outcome.append(future.cancel("stopped by the user")), name="canceller"
    )
    canceller.start()
    canceller.join(PEER_WAIT)
    assert outcome == [True]
    with pytest.raises(Cancelled):
        future.result(PEER_WAIT)
    assert future.cancelled()
    assert future.cancel() is True  # idempotent
    assert_cancelled_on_wire(peer, future.request_id, "stopped by the user")
    assert_stopped(peer, "future")
    assert_no_late_response(peer, future.request_id)


def test_cancel_token(peer: Peer) -> None:
    token = CancelToken()

    def on_progress(progress: float, total: float | None, message: str | None) -> None:
        token.cancel("enough progress")  # runs on one of the client's worker threads

    with pytest.raises(Cancelled):
        peer.client.call_tool(
            "slow",
            {"seconds": 20, "steps": 200, "tag": "token"},
            timeout=PEER_WAIT,
            cancel_token=token,
            on_progress=on_progress,
        )
    request_id = sent_call(peer.wire, "token")["id"]
    assert_cancelled_on_wire(peer, request_id, "enough progress")
    assert_stopped(peer, "token")
    assert_no_late_response(peer, request_id)


# -- requests from the official server to our client ---------------------------------------------------
def test_roots(peer: Peer) -> None:
    result = peer.client.call_tool("ask_roots", {}, timeout=PEER_WAIT)
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result)) == [
        {"uri": "file:///tmp/interop-a"},
        {"uri": "file:///tmp/interop-b", "name": "b"},
    ]


def test_sampling(peer: Peer) -> None:
    result = peer.client.call_tool("ask_sample", {"prompt": "write a haiku"}, timeout=PEER_WAIT)
    assert text_of(result) == "sampled:write a haiku"
    params = [
        p
        for p in peer.side.sampling_params
        if p["messages"][0]["content"]["text"] == "write a haiku"
    ]
    assert params and params[0]["maxTokens"] == 50


def test_elicitation(peer: Peer) -> None:
    result = peer.client.call_tool("ask_elicit", {"message": "Your name?"}, timeout=PEER_WAIT)
    assert text_of(result) == "accept:Ada"
    params = [p for p in peer.side.elicitation_params if p["message"] == "Your name?"]
    assert params and params[0]["requestedSchema"]["properties"]["name"]["type"] == "string"


def test_url_elicitation(peer: Peer) -> None:
    result = peer.client.call_tool(
        "ask_elicit_url", {"url": "https://example.com/auth"}, timeout=PEER_WAIT
    )
    assert text_of(result) == "accept"
    [params] = [p for p in peer.side.elicitation_params if p.get("mode") == "url"]
    assert params["url"] == "https://example.com/auth"
    assert params["elicitationId"] == "official-1"


def blocked_sampling_request(peer: Peer, prompt: str) -> dict[str, Any]:
    requests = [
        m
        for m in peer.wire.received_requests("sampling/createMessage")
        if m["params"]["messages"][0]["content"]["text"] == prompt
    ]
    assert len(requests) == 1, requests
    return requests[0]


def assert_we_never_answered(peer: Peer, blocked: Blocked, request_id: Any) -> None:
    """Our handler saw the cancellation, and our client wrote no response for the request.

    (The module fixture re-checks every cancelled id after close() joined all workers.)
    """
    wait_event(blocked.finished, "our sampling handler to return after the cancellation", PEER_WAIT)
    assert blocked.cancelled is True, "our handler's token did not fire"
    assert blocked.request_id == request_id
    peer.client.ping(timeout=PEER_WAIT)
    sent, _ = peer.wire.snapshot()
    assert not [m for m in sent if is_response(m, request_id)], (
        f"our client answered cancelled request {request_id}"
    )


def test_server_timeout_cancels_our_sampling_handler(peer: Peer) -> None:
    blocked = peer.side.expect_block("block: server times out")
    start = time.monotonic()
    result = peer.client.call_tool(
        "ask_sample_timeout",
        {"prompt": "block: server times out", "timeout": 0.5, "tag": "sampling"},
        timeout=PEER_WAIT,
    )
    assert text_of(result).startswith("TIMEOUT"), text_of(result)
    assert time.monotonic() - start < 5
    request = blocked_sampling_request(peer, "block: server times out")
    _, received = peer.wire.snapshot()
    assert request["id"] in cancelled_ids(received), (
        "the official server sent no notifications/cancelled"
    )
    assert_we_never_answered(peer, blocked, request["id"])
    assert (
        blocked.reason and "timed out" in blocked.reason
    )  # the server's reason reaches the handler
    assert "TIMEOUT ask_sample_timeout sampling" in read_events(peer.events)


def test_cancelling_our_call_cascades_to_our_sampling_handler(peer: Peer) -> None:
    """We cancel a tools/call while the server waits for our sampling answer: the official
    server cancels its nested request, and our handler for it stops without answering."""
    blocked = peer.side.expect_block("block: caller gives up")
    future = peer.client.call_tool_future("ask_sample", {"prompt": "block: caller gives up"})
    wait_event(blocked.started, "the nested sampling request to reach our handler", PEER_WAIT)
    assert future.cancel("caller gave up")
    with pytest.raises(Cancelled):
        future.result(PEER_WAIT)
    request = blocked_sampling_request(peer, "block: caller gives up")
    peer.wire.wait_for(
        lambda _s, received: request["id"] in cancelled_ids(received),
        "the server to cancel its nested request",
    )
    assert_we_never_answered(peer, blocked, request["id"])


# -- resources, prompts, completion ---------------------------------------------------------------------
def test_resources(peer: Peer) -> None:
    client = peer.client
    assert [(r.uri, r.name, r.mime_type) for r in client.list_resources(timeout=PEER_WAIT)] == [
        ("peer://readme", "readme", "text/plain")
    ]
    assert [
        (t.uri_template, t.name) for t in client.list_resource_templates(timeout=PEER_WAIT)
    ] == [("peer://notes/{name}", "note")]
    readme = client.read_resource("peer://readme", timeout=PEER_WAIT)
    assert [(c.uri, c.text) for c in readme.contents] == [("peer://readme", "official readme")]
    note = client.read_resource("peer://notes/zed", timeout=PEER_WAIT)
    assert [(c.uri, c.text) for c in note.contents] == [("peer://notes/zed", "note zed")]
    with pytest.raises(McpError) as info:
        client.read_resource("peer://nowhere", timeout=PEER_WAIT)
    assert info.value.code == -32602  # the official SDK's choice (the spec suggests -32002)
    assert "peer://nowhere" in info.value.message


def test_prompts(peer: Peer) -> None:
    client = peer.client
    prompts = client.list_prompts(timeout=PEER_WAIT)
    assert [p.name for p in prompts] == ["greet"]
    assert [(a.name, a.required) for a in prompts[0].arguments] == [
        ("name", True),
        ("style", False),
    ]
    result = client.get_prompt("greet", {"name": "Bob", "style": "pirate"}, timeout=PEER_WAIT)
    assert [(m.role, m.content.text) for m in result.messages] == [("user", "Hello Bob (pirate)")]
    with pytest.raises(McpError) as info:
        client.get_prompt("no_such_prompt", timeout=PEER_WAIT)
    assert "no_such_prompt" in info.value.message


def test_completion(peer: Peer) -> None:
    client = peer.client
    styles = client.complete(
        {"type": "ref/prompt", "name": "greet"}, "style", "p", timeout=PEER_WAIT
    )
    assert styles.completion.values == ["plain", "pirate", "poetic"]
    names = client.complete(
        {"type": "ref/resource", "uri": "peer://notes/{name}"}, "name", "al", timeout=PEER_WAIT
    )
    assert names.completion.values == ["alpha", "alps"]
