"""The cancellation guarantees of a real server in both eras, made certain with gates.

Each handler here stops at a gate (an event the test opens), so "the cancel lands while the
handler runs" or "while it is queued" is certain, not likely. The client is a line-level one
over a memory pair (:class:`support.line_client.LineClient`): every message the server
writes is kept. Each test runs at 2025-11-25 (after ``initialize``) and at 2026-07-28
(enveloped requests, no handshake); the cancellation itself comes with the TypeScript
client's envelope, an empty ``_meta`` or none (the official Python client's).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from support.line_client import LineClient
from support.storm import CANCEL_ENVELOPE, ERAS, INIT_PARAMS, LEGACY, stamp
from support.waiting import WAIT, wait_event

from mcp_sync import Context, Server
from mcp_sync.transports.memory import memory_pair

UNKNOWN = "cancellation of an unknown or finished request"
MALFORMED = "malformed cancellation"


@dataclass
class Gate:
    """One gated call's events and what its handler saw."""

    started: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    fired: threading.Event = field(default_factory=threading.Event)
    returned: threading.Event = field(default_factory=threading.Event)
    after: list[tuple[str, bool]] = field(default_factory=list)
    """(what, sent) of every report the handler made after its gate opened."""
    thread: threading.Thread | None = None


class Gates:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gates: dict[str, Gate] = {}

    def __getitem__(self, tag: str) -> Gate:
        with self._lock:
            return self._gates.setdefault(tag, Gate())

    def ran(self, tag: str) -> bool:
        with self._lock:
            return tag in self._gates and self._gates[tag].started.is_set()


def build(gates: Gates, max_workers: int) -> Server:
    server = Server("gated", max_workers=max_workers)

    @server.tool()
    def gated(tag: str, raise_late: bool, ctx: Context) -> str:
        """Report, log, stop at the gate (ignoring the token), report and log again, return."""
        gate = gates[tag]
        ctx.cancel_token.add_callback(lambda _token: gate.fired.set())
        ctx.report_progress(1, message="before")
        ctx.log("info", {"tag": tag, "when": "before"})
        gate.started.set()
        assert gate.release.wait(WAIT), f"{tag}: the gate never opened"
        gate.after.append(("progress", ctx.report_progress(2, message="after")))
        gate.after.append(("log", ctx.log("error", {"tag": tag, "when": "after"})))
        gate.returned.set()
        if raise_late:
            raise RuntimeError(f"{tag} failed after its cancellation")
        return tag

    @server.tool()
    def leaky(tag: str, ctx: Context) -> str:
        """Returns at once, leaving a thread that reports and logs for it once its gate opens."""
        gate = gates[tag]

        def later() -> None:
            if gate.release.wait(WAIT):
                gate.after.append(("progress", ctx.report_progress(5, message="after")))
                gate.after.append(("log", ctx.log("error", {"tag": tag, "when": "after"})))
            gate.returned.set()

        gate.thread = threading.Thread(target=later, name=f"leaky-{tag}")
        gate.thread.start()
        return tag

    @server.tool()
    def quick() -> str:
        """Answered at once (a barrier: cancellations read before it are processed)."""
        return "quick"

    return server


class Conversation:
    """One connection in one era: a served :class:`Server` and a line-level client."""

    def __init__(self, era: str, max_workers: int = 2) -> None:
        self.era = era
        self.gates = Gates()
        client_end, server_end = memory_pair()
        self.handle = build(self.gates, max_workers).serve_in_thread(server_end)
        self.client_end = client_end
        self.client = LineClient(client_end)
        self._ids = iter(range(1, 10_000))
        if era == LEGACY:
            self.client.write(
                {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT_PARAMS}
            )
            assert "result" in self.client.wait_answer(0)
            self.client.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, name: str, arguments: dict[str, Any], progress_token: Any = None) -> int:
        request_id = next(self._ids)
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if progress_token is not None:
            params["_meta"] = {"progressToken": progress_token}
        message = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": stamp(params, self.era),
        }
        self.client.write(message)
        return request_id

    def gated(self, tag: str, *, raise_late: bool = False) -> int:
        return self.call("gated", {"tag": tag, "raise_late": raise_late}, progress_token=f"p-{tag}")

    def cancel(self, params: dict[str, Any]) -> None:
        self.client.write({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})

    def barrier(self) -> None:
        """Every line written before this is processed once its answer is read."""
        assert (
            self.client.wait_answer(self.call("quick", {}))["result"]["content"][0]["text"]
            == "quick"
        )

    @property
    def dropped(self) -> Any:
        return self.handle.session.endpoint.dropped

    @property
    def withheld(self) -> Any:
        return self.handle.session.endpoint.withheld

    def close(self) -> None:
        """Stop the server (every worker joined: all it would write is written); idempotent."""
        if self.client.ended.is_set():
            return
        self.handle.stop(WAIT)
        self.client_end.close()
        self.client.join()


@pytest.fixture(params=ERAS)
def conversation(request: pytest.FixtureRequest) -> Iterator[Conversation]:
    conv = Conversation(request.param)
    try:
        yield conv
    finally:
        for tag in ("a", "b", "c"):
            conv.gates[tag].release.set()
        conv.close()


def with_meta(params: dict[str, Any], meta: str) -> dict[str, Any]:
    if meta == "envelope":
        return {**params, "_meta": dict(CANCEL_ENVELOPE)}
    if meta == "empty":
        return {**params, "_meta": {}}
    return params


def kinds(messages: list[Any]) -> list[str]:
    """A short name for each message: ``result``, ``error``, ``progress <message>``, ``log <when>``."""
    out = []
    for m in messages:
        if m.get("method") == "notifications/progress":
            out.append(f"progress {m['params'].get('message')}")
        elif m.get("method") == "notifications/message":
            out.append(f"log {m['params']['data']['when']}")
        else:
            out.append("error" if "error" in m else "result")
    return out


@pytest.mark.parametrize("raise_late", [False, True], ids=["returns", "raises"])
@pytest.mark.parametrize("meta", ["none", "envelope", "empty"])
def test_cancel_while_running_then_nothing_more(
    conversation: Conversation, meta: str, raise_late: bool
) -> None:
    conv = conversation
    request_id = conv.gated("a", raise_late=raise_late)
    gate = conv.gates["a"]
    wait_event(gate.started, "the handler to reach its gate")
    conv.cancel(with_meta({"requestId": request_id, "reason": "enough"}, meta))
    wait_event(gate.fired, "the cancellation to fire the handler's token")
    gate.release.set()
    wait_event(gate.returned, "the handler to go on and return")
    conv.barrier()
    conv.close()  # every worker joined: whatever the server would write is written
    assert gate.after == [("progress", False), ("log", False)], (
        "a report after the cancel was not withheld"
    )
    assert kinds(conv.client.about(request_id, "p-a", "a")) == ["progress before", "log before"]
    assert conv.withheld == {"notification for a request that is not running": 2}


def test_cancel_while_queued_never_runs(conversation: Conversation) -> None:
    conv = conversation
    first = conv.gated("a")
    busy = conv.call("gated", {"tag": "c", "raise_late": False})
    wait_event(conv.gates["a"].started, "the first worker to be busy")
    wait_event(conv.gates["c"].started, "the second worker to be busy")
    second = conv.gated("b")
    # the request 'b' is queued behind them (arrival order): cancel it, then free the workers
    conv.cancel({"requestId": second, "reason": "not needed"})
    barrier = conv.call("quick", {})  # queued after 'b' as well
    conv.gates["a"].release.set()
    conv.gates["c"].release.set()
    conv.client.wait_answer(barrier)
    assert conv.client.wait_answer(first)["result"]["content"][0]["text"] == "a"
    assert conv.client.wait_answer(busy)["result"]["content"][0]["text"] == "c"
    conv.close()
    assert not conv.gates.ran("b"), "a request cancelled while queued ran"
    assert conv.client.about(second, "p-b", "b") == []


@pytest.mark.parametrize("meta", ["none", "envelope"])
def test_complete_then_cancel_is_ignored(conversation: Conversation, meta: str) -> None:
    conv = conversation
    conv.gates["a"].release.set()
    request_id = conv.gated("a")
    answer = conv.client.wait_answer(request_id)
    conv.cancel(with_meta({"requestId": request_id, "reason": "too late"}, meta))
    conv.barrier()
    assert not conv.gates["a"].fired.is_set()
    conv.close()
    assert kinds(conv.client.about(request_id, "p-a", "a")) == [
        "progress before",
        "log before",
        "progress after",
        "log after",
        "result",
    ]
    assert answer["result"]["content"][0]["text"] == "a"
    assert conv.dropped[UNKNOWN] == 1


def test_unknown_and_malformed_cancels_are_ignored(conversation: Conversation) -> None:
    conv = conversation
    request_id = conv.gated("a")
    wait_event(conv.gates["a"].started, "the handler to reach its gate")
    junk = [
        {"requestId": 999, "reason": "unknown"},
        {"requestId": str(request_id)},  # the same value as a string: another id
        {"reason": "no requestId"},
        {"requestId": None},
        {"requestId": True},
        {"requestId": float(request_id)},
        {"requestId": [request_id]},
    ]
    for params in junk:
        conv.cancel(params)
    conv.cancel(with_meta({"reason": "envelope but no requestId"}, "envelope"))
    conv.barrier()
    assert not conv.gates["a"].fired.is_set(), "a cancellation that named nothing fired the token"
    conv.gates["a"].release.set()
    assert conv.client.wait_answer(request_id)["result"]["content"][0]["text"] == "a"
    conv.close()
    assert conv.dropped[UNKNOWN] == 2 and conv.dropped[MALFORMED] == 6, conv.dropped
    # nothing answered a cancellation: every answer is to a request of ours
    asked = {m["id"] for m in conv.client.sent if "id" in m}
    assert all(m.get("id") in asked for m in conv.client.received if "method" not in m), (
        conv.client.received
    )


def test_cancel_twice_fires_once(conversation: Conversation) -> None:
    conv = conversation
    request_id = conv.gated("a")
    wait_event(conv.gates["a"].started, "the handler to reach its gate")
    conv.cancel({"requestId": request_id, "reason": "first"})
    conv.cancel(with_meta({"requestId": request_id, "reason": "second"}, "envelope"))
    conv.barrier()
    conv.gates["a"].release.set()
    wait_event(conv.gates["a"].returned, "the handler to return")
    conv.close()
    assert conv.dropped[UNKNOWN] == 1
    assert [m for m in conv.client.about(request_id) if "method" not in m] == []


def test_nothing_for_a_request_after_its_answer(conversation: Conversation) -> None:
    """A thread the handler left behind reports and logs after the answer: withheld."""
    conv = conversation
    request_id = conv.call("leaky", {"tag": "a"}, progress_token="p-a")
    assert conv.client.wait_answer(request_id)["result"]["content"][0]["text"] == "a"
    gate = conv.gates["a"]
    gate.release.set()
    wait_event(gate.returned, "the leftover thread to report")
    assert gate.thread is not None
    gate.thread.join(WAIT)
    conv.barrier()
    conv.close()
    assert gate.after == [("progress", False), ("log", False)]
    assert kinds(conv.client.about(request_id, "p-a", "a")) == ["result"]
    assert conv.withheld == {"notification for a request that is not running": 2}


def test_a_duplicate_id_is_refused_and_the_cancel_reaches_the_first(
    conversation: Conversation,
) -> None:
    conv = conversation
    request_id = conv.gated("a")
    wait_event(conv.gates["a"].started, "the handler to reach its gate")
    params = stamp({"name": "gated", "arguments": {"tag": "b", "raise_late": False}}, conv.era)
    conv.client.write(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    )
    refusal = conv.client.wait_answer(request_id)
    assert refusal["error"]["code"] == -32600, refusal  # the one answer that id gets
    conv.cancel({"requestId": request_id, "reason": "stop the first"})
    wait_event(conv.gates["a"].fired, "the cancellation to reach the first request")
    conv.gates["a"].release.set()
    wait_event(conv.gates["a"].returned, "the first handler to return")
    conv.barrier()
    conv.close()
    assert not conv.gates.ran("b"), "the duplicate ran"
    assert [m for m in conv.client.about(request_id) if "method" not in m] == [refusal]
