"""The callback queue is bounded: a flooding peer waits on the transport, responses still flow.

Before the fix the queue grew without limit (every notification was queued at once) and
``Endpoint`` had no ``max_queued_callbacks``: these tests could not even be built; with the
bound but without the reply exemption, a callback that calls the same peer deadlocked (the
test's bounded wait failed).
"""

from __future__ import annotations

import sys
import threading
import tracemalloc
from typing import Any

import pytest
from support.endpoints import dispatcher
from support.paths import PEERS, ROOT
from support.threads import wait_until_blocked_in
from support.waiting import WAIT, wait_until

from mcp_sync import Client, Endpoint, memory_pair
from mcp_sync.endpoint import CALLBACK_QUEUE_FULL
from mcp_sync.workers import MAX_QUEUED_CALLBACKS, CallbackThread

HOSTILE = PEERS / "hostile_input_server.py"


# -- the queue itself, deterministically -------------------------------------------------------------
def test_default_bound_is_documented_value():
    assert MAX_QUEUED_CALLBACKS == 1000
    assert CallbackThread("x").max_queued == MAX_QUEUED_CALLBACKS
    with pytest.raises(ValueError):
        CallbackThread("x", 0)


def test_submit_with_wait_blocks_while_full_and_resumes_in_order():
    runner = CallbackThread("bp", max_queued=2)
    gate = threading.Event()
    ran: list[int] = []

    def first() -> None:
        assert gate.wait(WAIT), "the test never released the first callback"
        ran.append(0)

    runner.submit(first, wait=True)
    wait_until(lambda: len(runner) == 0, "the first callback to start")
    runner.submit(ran.append, 1, wait=True)
    runner.submit(ran.append, 2, wait=True)
    results: list[bool] = []
    submitter = threading.Thread(
        target=lambda: results.append(runner.submit(ran.append, 3, wait=True))
    )
    submitter.start()
    wait_until_blocked_in(submitter, "submit")
    assert len(runner) == 2 and not results
    # a submission that must not wait goes in anyway
    assert runner.submit(ran.append, 4) is True
    gate.set()
    submitter.join(WAIT)
    assert results == [True]
    assert runner.join(WAIT) is None
    # 4 did not wait, so it went in ahead of 3, which waited for room
    assert ran == [0, 1, 2, 4, 3]


def test_a_full_queue_refuses_instead_of_waiting_while_the_callback_waits_for_a_reply():
    runner = CallbackThread("bp", max_queued=1)
    inside = threading.Event()
    leave = threading.Event()
    outcome: list[bool] = []

    def waiting_callback() -> None:
        assert runner.is_current()
        inside.set()
        with runner.waiting_for_reply():
            assert leave.wait(WAIT), "the test never let the callback finish"

    runner.submit(waiting_callback, wait=True)
    assert inside.wait(WAIT)
    runner.submit(lambda: None, wait=True)  # fills the queue
    submitter = threading.Thread(
        target=lambda: outcome.append(runner.submit(lambda: None, wait=True))
    )
    submitter.start()
    submitter.join(WAIT)
    assert outcome == [False], (
        "a full queue made the reader wait for a callback that waits for the reader"
    )
    assert len(runner) == 1
    leave.set()
    assert runner.join(WAIT) is None


def test_stop_waiting_releases_a_blocked_submitter():
    runner = CallbackThread("bp", max_queued=1)
    gate = threading.Event()
    runner.submit(lambda: gate.wait(WAIT), wait=True)
    wait_until(lambda: len(runner) == 0, "the first callback to start")
    runner.submit(lambda: None, wait=True)
    submitter = threading.Thread(target=runner.submit, args=(lambda: None,), kwargs={"wait": True})
    submitter.start()
    wait_until_blocked_in(submitter, "submit")
    runner.stop_waiting()
    submitter.join(WAIT)
    assert not submitter.is_alive()
    gate.set()
    assert runner.join(WAIT) is None


# -- two endpoints in memory -----------------------------------------------------------------------
class Flood:
    """A server endpoint whose ``flood`` request sends ``count`` notifications, then answers."""

    def __init__(self, *, client_limit: int, on_note: Any) -> None:
        a, b = memory_pair()

        def flood(req: Any) -> Any:
            for n in range(req.params["count"]):
                self.server.notify("note", {"n": n})
            return {"sent": req.params["count"]}

        self.server = Endpoint(
            b,
            request_handler=dispatcher({"flood": flood, "echo": lambda r: r.params}),
            name="flood-server",
        )
        self.client = Endpoint(
            a, notification_handler=on_note, max_queued_callbacks=client_limit, name="flood-client"
        )
        self.server.start()
        self.client.start()

    def close(self) -> None:
        self.client.close(WAIT)
        self.server.close(WAIT)


def test_blocked_callback_bounds_the_queue_and_the_reader_waits_then_everything_arrives():
    limit, count = 10, 300
    gate = threading.Event()
    seen: list[int] = []
    depths: list[int] = []
    flood: Flood | None = None

    def on_note(note: Any) -> None:
        assert flood is not None
        depths.append(flood.client.stats().callback_queue_depth)
        if note.params["n"] == 0:
            assert gate.wait(WAIT * 2), "the test never released the callback"
        seen.append(note.params["n"])

    flood = Flood(client_limit=limit, on_note=on_note)
    try:
        pending = flood.client.submit("flood", {"count": count}, timeout=WAIT * 4)
        wait_until(
            lambda: flood.client.stats().callback_queue_depth == limit, "the callback queue to fill"
        )
        assert flood.client._reader is not None
        wait_until_blocked_in(flood.client._reader, "submit")
        assert flood.client.stats().callback_queue_depth == limit
        assert not pending.done(), "the response overtook notifications the peer sent before it"
        gate.set()
        assert pending.result(WAIT * 2) == {"sent": count}
        wait_until(lambda: len(seen) == count, f"all notifications delivered ({len(seen)})")
        assert seen == list(range(count)), "delivery order changed"
        assert max(depths) <= limit
        assert flood.client.stats().dropped.get(CALLBACK_QUEUE_FULL, 0) == 0
    finally:
        gate.set()
        flood.close()


def test_a_callback_that_calls_the_same_peer_while_the_queue_is_full_gets_its_answer():
    limit, count = 5, 200
    answers: list[Any] = []
    seen: list[int] = []
    flood: Flood | None = None

    def on_note(note: Any) -> None:
        assert flood is not None
        seen.append(note.params["n"])
        if note.params["n"] == 0:
            wait_until(
                lambda: flood.client.stats().callback_queue_depth == limit, "the queue to fill"
            )
            answers.append(flood.client.request("echo", {"from": "callback"}, timeout=WAIT))

    flood = Flood(client_limit=limit, on_note=on_note)
    try:
        pending = flood.client.submit("flood", {"count": count}, timeout=WAIT * 4)
        assert pending.result(WAIT * 2) == {"sent": count}
        wait_until(
            lambda: answers == [{"from": "callback"}], "the callback's own call to be answered"
        )
        client = flood.client
        wait_until(
            lambda: len(seen) + client.stats().dropped.get(CALLBACK_QUEUE_FULL, 0) == count,
            f"every notification delivered or dropped ({len(seen)} delivered)",
        )
        assert seen == sorted(seen)
        assert client.stats().callback_queue_limit == limit
    finally:
        flood.close()


# -- a real stdio server: the pipe fills and the server waits ----------------------------------------
def _spawn(**options: Any) -> Client:
    return Client.stdio(
        [sys.executable, str(HOSTILE)],
        env={"PYTHONPATH": str(ROOT)},
        stderr="discard",
        init_timeout=20,
        protocol="legacy",
        **options,  # the flood of notifications/message is a 2025-11-25 session's
    )


def test_stdio_flood_with_a_blocked_callback_stays_bounded_and_the_response_arrives():
    limit, count, size = 20, 3_000, 1_024  # ~3 MiB: more than the pipe and the reader's buffer
    gate = threading.Event()
    seen: list[int] = []
    depths: list[int] = []
    holder: list[Client] = []

    def on_log(params: dict[str, Any]) -> None:
        depths.append(holder[0].stats().callback_queue_depth)
        n = params["data"]["n"]
        if n == 0:
            assert gate.wait(30), "the test never released the callback"
        seen.append(n)

    with _spawn(on_log=on_log, max_queued_callbacks=limit) as client:
        holder.append(client)
        tracemalloc.start()
        try:
            baseline = tracemalloc.get_traced_memory()[0]
            pending = client.call_tool_future("flood", {"count": count, "size": size}, timeout=60)
            wait_until(
                lambda: client.stats().callback_queue_depth == limit,
                "the queue to fill",
                timeout=20,
            )
            reader = client.endpoint._reader
            assert reader is not None
            wait_until_blocked_in(reader, "submit", timeout=20)
            growth = tracemalloc.get_traced_memory()[0] - baseline
        finally:
            tracemalloc.stop()
        assert not pending.done()
        assert client.stats().callback_queue_depth == limit
        # the rest of the ~3 MiB flood waits in the pipe and the server, not in this process
        assert growth < 1024 * 1024, f"memory grew by {growth} bytes while the reader waited"
        gate.set()
        result = pending.result(60)
        assert result.structured_content == {"result": count}
        wait_until(
            lambda: len(seen) == count, f"all notifications delivered ({len(seen)})", timeout=20
        )
        assert seen == list(range(count))
        assert max(depths) <= limit
        assert client.stats().dropped.get(CALLBACK_QUEUE_FULL, 0) == 0


def test_stdio_callback_calling_the_server_during_a_flood_is_answered():
    limit, count, size = 10, 2_000, 1_024
    answers: list[Any] = []
    seen: list[int] = []
    holder: list[Client] = []

    def on_log(params: dict[str, Any]) -> None:
        client = holder[0]
        n = params["data"]["n"]
        seen.append(n)
        if n == 0:
            wait_until(
                lambda: client.stats().callback_queue_depth == limit,
                "the queue to fill",
                timeout=20,
            )
            answers.append(client.call_tool("pid", timeout=20).structured_content)

    with _spawn(on_log=on_log, max_queued_callbacks=limit) as client:
        holder.append(client)
        result = client.call_tool("flood", {"count": count, "size": size}, timeout=60)
        assert result.structured_content == {"result": count}
        wait_until(lambda: len(answers) == 1, "the callback's call to be answered", timeout=20)
        assert answers[0] == {"result": client.transport.pid}
        wait_until(
            lambda: len(seen) + client.stats().dropped.get(CALLBACK_QUEUE_FULL, 0) == count,
            f"every notification delivered or dropped ({len(seen)} delivered)",
            timeout=20,
        )


def test_close_releases_a_reader_blocked_on_a_full_queue():
    gate = threading.Event()
    flood = Flood(client_limit=3, on_note=lambda note: gate.wait(WAIT * 2))
    try:
        flood.client.submit("flood", {"count": 100})
        wait_until(lambda: flood.client.stats().callback_queue_depth == 3, "the queue to fill")
        reader = flood.client._reader
        assert reader is not None
        wait_until_blocked_in(reader, "submit")
        stuck = flood.client.close(grace=0.2)
        assert not reader.is_alive(), "close() left the reader blocked on the full queue"
        assert [t.name for t in stuck] == ["flood-client-callbacks"], stuck
    finally:
        gate.set()
        flood.close()


def test_stress_callbacks_calling_the_peer_during_floods(fast_switching):
    for _ in range(15):
        answered: list[Any] = []
        seen: list[int] = []
        flood: Flood | None = None

        def on_note(note: Any) -> None:
            assert flood is not None
            seen.append(note.params["n"])
            if note.params["n"] % 10 == 0:
                answered.append(flood.client.request("echo", {"n": note.params["n"]}, timeout=WAIT))

        flood = Flood(client_limit=2, on_note=on_note)
        try:
            assert flood.client.request("flood", {"count": 60}, timeout=WAIT * 2) == {"sent": 60}
            client = flood.client

            def settled() -> bool:  # every notification delivered or dropped, every call answered
                dropped = client.stats().dropped.get(CALLBACK_QUEUE_FULL, 0)
                return len(seen) + dropped == 60 and len(answered) == len(
                    [n for n in seen if n % 10 == 0]
                )

            wait_until(settled, f"the callbacks to finish ({len(seen)} seen)")
            assert answered == [{"n": n} for n in seen if n % 10 == 0]
            assert seen == sorted(seen)
        finally:
            flood.close()


def test_a_cancellation_read_while_the_queue_is_full_fires_the_token_at_once():
    """The queue being full holds back only notification deliveries: a cancellation the
    reader reads meanwhile fires the handler's token without waiting for queue space."""
    limit = 3
    gate = threading.Event()
    started = threading.Event()
    saw_cancel = threading.Event()
    a, b = memory_pair()

    def on_note(note: Any) -> None:
        if note.params["n"] == 0:
            assert gate.wait(WAIT * 2), "the test never released the callback"

    def work(req: Any) -> Any:
        started.set()
        if req.token.wait(WAIT * 2):
            saw_cancel.set()
        return {"done": True}

    server = Endpoint(
        b,
        request_handler=dispatcher({"work": work}),
        notification_handler=on_note,
        max_queued_callbacks=limit,
        name="full-server",
    )
    client = Endpoint(a, name="full-client")
    server.start()
    client.start()
    try:
        pending = client.submit("work", {}, timeout=WAIT * 4)
        assert started.wait(WAIT), "the handler never started"
        for n in range(limit + 1):  # one running (blocked), `limit` queued: the queue is full
            client.notify("note", {"n": n})
        wait_until(lambda: server.stats().callback_queue_depth == limit, "the queue to fill")
        assert pending.cancel("stop") is True
        assert saw_cancel.wait(WAIT), "the cancellation waited for the full callback queue"
        assert server.stats().callback_queue_depth == limit, "the queue drained before the cancel"
        assert pending.cancelled()
    finally:
        gate.set()
        client.close(WAIT)
        server.close(WAIT)
