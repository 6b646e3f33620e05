"""The endpoint describes every message it sends to a routing transport (kind, method, ids,
the inbound request it belongs to), so transports never decode what it just encoded."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from support.endpoints import Blocker, dispatcher
from support.waiting import WAIT, wait_until

from mcp_sync import Endpoint, McpError, memory_pair
from mcp_sync.jsonrpc import RequestId
from mcp_sync.transports import MemoryTransport, Transport
from mcp_sync.transports.base import FailCall, OutboundMeta, RoutingTransport


class RoutingRecorder:
    """A routing transport over one end of a memory pair that records what it is told."""

    def __init__(self, inner: MemoryTransport) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.sent: list[tuple[bytes, OutboundMeta]] = []
        self.plain_writes = 0
        self.cancelled: list[RequestId] = []
        self.fail_call: FailCall | None = None

    def read_line(self) -> bytes | None:
        return self._inner.read_line()

    def write(self, data: bytes) -> None:
        with self._lock:
            self.plain_writes += 1
        self._inner.write(data)

    def send(self, data: bytes, meta: OutboundMeta) -> None:
        with self._lock:
            self.sent.append((data, meta))
        self._inner.write(data)

    def inbound_cancelled(self, request_id: RequestId) -> None:
        with self._lock:
            self.cancelled.append(request_id)

    def bind_call_failure(self, fail_call: FailCall) -> None:
        self.fail_call = fail_call

    def close(self) -> None:
        self._inner.close()

    def metas(self) -> list[OutboundMeta]:
        with self._lock:
            return [meta for _, meta in self.sent]


def test_the_protocols_tell_a_routing_transport_from_a_plain_one() -> None:
    from mcp_sync.http import HttpClientTransport
    from mcp_sync.http.session_transport import HttpSessionTransport
    from mcp_sync.transports.batching import BatchingTransport

    a, b = memory_pair()
    assert isinstance(RoutingRecorder(a), RoutingTransport)
    assert isinstance(a, Transport) and not isinstance(a, RoutingTransport)
    # the library's routing transports: a missing method would silently make them plain
    for routing in (HttpClientTransport, HttpSessionTransport, BatchingTransport):
        missing = [
            name
            for name in ("send", "inbound_cancelled", "bind_call_failure")
            if not callable(getattr(routing, name, None))
        ]
        assert not missing, (routing, missing)
    a.close()
    b.close()


def test_a_routing_transport_is_bound_and_gets_only_described_messages() -> None:
    a, b = memory_pair()
    recorder = RoutingRecorder(a)

    def work(req: Any) -> Any:
        server.report_progress(req, 1, 2, "half")
        server.notify(
            "notifications/message", {"level": "info", "data": "x"}, related_request=req.id
        )
        return {"done": True}

    with Endpoint(b, name="client") as client:
        server = Endpoint(
            recorder, request_handler=dispatcher({"work": work}), name="server"
        ).start()
        try:
            assert recorder.fail_call == server.fail_call
            progress: list[float] = []
            call = client.submit("work", {}, on_progress=lambda p, _t, _m: progress.append(p))
            assert call.result(WAIT) == {"done": True}
            request_id = call.request_id
            asked = server.submit("sampling/createMessage", {"m": 1}, related_request=request_id)
            with pytest.raises(McpError):
                asked.result(WAIT)  # the client has no handler: -32601
        finally:
            server.close()
    metas = recorder.metas()
    assert recorder.plain_writes == 0
    assert metas[:3] == [
        OutboundMeta("notification", "notifications/progress", related_request_id=request_id),
        OutboundMeta("notification", "notifications/message", related_request_id=request_id),
        OutboundMeta("response", related_request_id=request_id),
    ]
    assert metas[3] == OutboundMeta(
        "request",
        "sampling/createMessage",
        request_id=asked.request_id,
        related_request_id=request_id,
    )


def test_what_the_endpoint_says_is_what_the_line_holds() -> None:
    """Every meta agrees with decoding its own line (which knows no related request)."""
    a, b = memory_pair()
    recorder = RoutingRecorder(a)
    blocker = Blocker()
    with Endpoint(
        b, request_handler=dispatcher({"echo": lambda req: req.params}), name="peer"
    ) as peer:
        endpoint = Endpoint(recorder, request_handler=blocker, name="ours").start()
        try:
            assert endpoint.request("echo", {"x": 1}, timeout=WAIT) == {"x": 1}
            pending = endpoint.submit("echo", {"y": 2}, timeout=WAIT)
            pending.result(WAIT)
            incoming = peer.submit("block", {})
            blocker.wait_started()
            incoming.cancel("enough")
            wait_until(lambda: recorder.cancelled != [], "inbound_cancelled was not called")
        finally:
            blocker.release_all()
            endpoint.close()
    assert recorder.cancelled == [incoming.request_id]
    with recorder._lock:
        sent = list(recorder.sent)
    assert sent, "nothing was sent"
    for data, meta in sent:
        decoded = OutboundMeta.of_line(data)
        assert (meta.kind, meta.method, meta.request_id, meta.cancelled_request_id) == (
            decoded.kind,
            decoded.method,
            decoded.request_id,
            decoded.cancelled_request_id,
        ), data
    assert {meta.kind for _, meta in sent} == {"request"}  # the cancelled request got no response


def test_a_cancellation_names_the_request_it_cancels() -> None:
    a, b = memory_pair()
    recorder = RoutingRecorder(a)
    blocker = Blocker()
    with Endpoint(b, request_handler=blocker, name="peer"):
        endpoint = Endpoint(recorder, name="ours").start()
        try:
            call = endpoint.submit("block", {})
            blocker.wait_started()
            call.cancel("no longer needed")
            wait_until(
                lambda: any(m.method == "notifications/cancelled" for m in recorder.metas()),
                'any(m.method == "notifications/cancelled" for m in recorder.metas())',
            )
        finally:
            blocker.release_all()
            endpoint.close()
    cancel = next(m for m in recorder.metas() if m.method == "notifications/cancelled")
    assert cancel == OutboundMeta(
        "notification", "notifications/cancelled", cancelled_request_id=call.request_id
    )


def test_a_line_that_is_not_one_message_cannot_be_described() -> None:
    with pytest.raises(ValueError):
        OutboundMeta.of_line(b"[1, 2]\n")
    with pytest.raises(ValueError):
        OutboundMeta.of_line(b"not json\n")
    assert OutboundMeta.of_line(
        b'{"jsonrpc":"2.0","id":"7","error":{"code":1,"message":"m"}}\n'
    ) == OutboundMeta("response", related_request_id="7")
