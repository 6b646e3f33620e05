"""A cancellation storm against a real mcp_sync server, in both protocol eras.

Hundreds of ``work`` calls (``tests/peers/storm_server.py``: handlers that report progress and
log at random points, some that ignore their token and return late) are sent by an mcp_sync
:class:`~mcp_sync.endpoint.Endpoint` from several threads, under
``sys.setswitchinterval(1e-6)``, and cancelled at random moments: at once, after a random
spin, from the progress callback, from a chaos thread, or after their answer. A recording
transport under the client keeps every message the server wrote; the handlers keep their own
journal. :func:`support.storm.judge` holds them against each other (see there), and the
client's own view must agree: a request whose cancellation won on the server is a cancelled
call, and every call settles exactly once.

The same storm runs at 2025-11-25 (after ``initialize``: today's guarantees) and at
2026-07-28 (every request enveloped, no handshake), over a memory pair, over OS pipes in this
process, and over a subprocess's stdio.
"""

from __future__ import annotations

import os
import random
import threading
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from peers.storm_server import Journal, build_server
from support.paths import PEERS, PYTHON, ROOT
from support.recording import RecordingTransport
from support.storm import (
    ERAS,
    INIT_PARAMS,
    LEGACY,
    MODERN,
    CallPlan,
    check_era,
    judge,
    make_plans,
    spin,
    stamp,
    work_params,
)
from support.waiting import WAIT

from mcp_sync.cancel import CancelToken
from mcp_sync.endpoint import Endpoint, PendingCall
from mcp_sync.errors import Cancelled, RequestTimeout
from mcp_sync.protocol import NOT_RUNNING
from mcp_sync.transports.memory import memory_pair
from mcp_sync.transports.stdio import StdioTransport
from mcp_sync.transports.subprocess import SubprocessTransport

CALLS = 240
CALLERS = 6
BATCH = 4
SERVER_WORKERS = 3
STORM_WAIT = 60.0


@contextmanager
def served_memory(journal: Journal, withheld: Counter[str]) -> Iterator[Any]:
    client_end, server_end = memory_pair()
    handle = build_server(journal, max_workers=SERVER_WORKERS).serve_in_thread(server_end)
    try:
        yield client_end
    finally:
        handle.stop(WAIT)
        withheld.update(handle.session.endpoint.withheld)


class _PipeEnd:
    """The client's end of two OS pipes (a line transport over file descriptors)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._in = os.fdopen(read_fd, "rb", buffering=0)
        self._out = os.fdopen(write_fd, "wb", buffering=0)
        self._transport = StdioTransport(self._in, self._out)

    def read_line(self) -> bytes | None:
        return self._transport.read_line()

    def write(self, data: bytes) -> None:
        self._transport.write(data)

    def close(self) -> None:
        self._transport.close()
        if not self._out.closed:
            self._out.close()  # the server reads the end of its input


@contextmanager
def served_pipes(journal: Journal, withheld: Counter[str]) -> Iterator[Any]:
    to_server_r, to_server_w = os.pipe()
    to_client_r, to_client_w = os.pipe()
    server_in, server_out = (
        os.fdopen(to_server_r, "rb", buffering=0),
        os.fdopen(to_client_w, "wb", buffering=0),
    )
    handle = build_server(journal, max_workers=SERVER_WORKERS).serve_in_thread(
        StdioTransport(server_in, server_out)
    )
    client_end = _PipeEnd(to_client_r, to_server_w)
    try:
        yield client_end
    finally:
        handle.stop(WAIT)
        withheld.update(handle.session.endpoint.withheld)
        server_out.close()  # the client reads the end of its input
        server_in.close()
        client_end._in.close()


@contextmanager
def served_subprocess(journal: Journal, tmp_path: Any) -> Iterator[Any]:
    path = tmp_path / "journal.jsonl"
    env = {
        "PYTHONPATH": str(ROOT),
        "STORM_JOURNAL": str(path),
        "STORM_WORKERS": str(SERVER_WORKERS),
        "STORM_SWITCH_INTERVAL": "1e-6",
    }
    transport = SubprocessTransport(
        [PYTHON, str(PEERS / "storm_server.py")], env=env, stderr="capture"
    )
    try:
        yield transport
    finally:
        transport.close()
        assert transport.process.returncode == 0, transport.stderr_tail
        journal.events.extend(Journal.load(path))


class CrossingRecorder(RecordingTransport):
    """Records every line; on reading the answer of a chosen call, runs that call's action
    before the client may see the answer (the pause control: the answer is on its way, not
    yet read, when the action cancels the call -- so the server's completion has won)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self._actions: dict[str, Any] = {}
        self._actions_lock = threading.Lock()

    def before_answer(self, tag: str, action: Any) -> None:
        with self._actions_lock:
            self._actions[tag] = action

    def read_line(self) -> bytes | None:
        line = super().read_line()
        if line is not None and line.strip():
            message = self._decode(line)
            result = message.get("result") if isinstance(message, dict) else None
            content = result.get("structuredContent") if isinstance(result, dict) else None
            tag = content.get("tag") if isinstance(content, dict) else None
            with self._actions_lock:
                action = self._actions.pop(tag, None)
            if action is not None:
                action()
        return line


def storm(
    transport: Any, era: str, plans: list[CallPlan], seed: int
) -> tuple[RecordingTransport, list[Any]]:
    """Run the storm through an mcp_sync endpoint on ``transport``; returns the recorder and
    the ids of the requests that were not storm calls."""
    recorder = CrossingRecorder(transport)
    client = Endpoint(recorder, name="storm-client", max_workers=1).start()
    other_ids: list[Any] = []
    try:
        if era == LEGACY:
            init = client.submit("initialize", INIT_PARAMS, timeout=WAIT)
            init.result(WAIT)
            other_ids.append(init.request_id)
            client.notify("notifications/initialized")
        calls: dict[str, PendingCall] = {}
        calls_lock = threading.Lock()
        barrier = threading.Barrier(CALLERS + 1)
        finished = threading.Event()
        errors: list[BaseException] = []

        def submit(plan: CallPlan) -> PendingCall:
            token = CancelToken()
            if plan.cancel_at == "answer crossing":  # cancelled by the reader, the answer in hand
                submitted = threading.Event()

                def cross() -> None:
                    if not (submitted.wait(WAIT) and calls[plan.tag].cancel(plan.reason)):
                        errors.append(
                            AssertionError(f"{plan.tag}: not cancelled with its answer in hand")
                        )

                recorder.before_answer(plan.tag, cross)

            def on_progress(_progress: float, _total: float | None, _message: str | None) -> None:
                if plan.cancel_at == "on progress":
                    token.cancel(plan.reason)

            call = client.submit(
                "tools/call",
                stamp(work_params(plan), era, plan.log_level),
                cancel_token=token,
                on_progress=on_progress,
                timeout=plan.timeout,
            )
            plan.request_id = plan.progress_token = call.request_id
            with calls_lock:
                calls[plan.tag] = call
            if plan.cancel_at == "answer crossing":
                submitted.set()
            return call

        def caller(mine: list[CallPlan], rng: random.Random) -> None:
            try:
                barrier.wait(WAIT)
                for start in range(0, len(mine), BATCH):
                    batch = mine[start : start + BATCH]
                    pending = [(plan, submit(plan)) for plan in batch]
                    rng.shuffle(pending)
                    for plan, call in pending:
                        if plan.cancel_at == "at once":
                            call.cancel(plan.reason)
                        elif plan.cancel_at == "later":
                            spin(plan.delay)
                            call.cancel(plan.reason)

                    for plan, call in pending:
                        try:
                            call.result(STORM_WAIT)
                            plan.outcome = "result"
                        except Cancelled:
                            plan.outcome = "cancelled"
                        except RequestTimeout:
                            plan.outcome = "timeout"
                        if plan.cancel_at == "after answer":
                            assert call.cancel(plan.reason) is (plan.outcome == "cancelled")
            except BaseException as exc:
                errors.append(exc)

        def chaos(rng: random.Random) -> None:
            """Cancels calls planned to be cancelled 'later', at moments of its own."""
            try:
                barrier.wait(WAIT)
                pause = threading.Event()
                while not finished.is_set():
                    with calls_lock:
                        target = rng.choice(list(calls.items())) if calls else None
                    if target is not None:
                        plan = by_tag[target[0]]
                        if plan.cancel_at == "later":
                            target[1].cancel(plan.reason)
                    pause.wait(0.0003)
            except BaseException as exc:
                errors.append(exc)

        by_tag = {plan.tag: plan for plan in plans}
        rng = random.Random(seed)
        threads = [
            threading.Thread(
                target=caller,
                args=(plans[k::CALLERS], random.Random(rng.random())),
                name=f"caller-{k}",
            )
            for k in range(CALLERS)
        ]
        monkey = threading.Thread(target=chaos, args=(random.Random(rng.random()),), name="chaos")
        for thread in [*threads, monkey]:
            thread.start()
        for thread in threads:
            thread.join(STORM_WAIT)
        finished.set()
        monkey.join(WAIT)
        assert not any(t.is_alive() for t in [*threads, monkey]), "a storm thread hung"
        assert not errors, errors
        settle = client.submit(
            "tools/call", stamp({"name": "settle", "arguments": {}}, era), timeout=STORM_WAIT
        )
        assert settle.result(STORM_WAIT)["structuredContent"] == {"result": True}, (
            "the server did not settle"
        )
        other_ids.append(settle.request_id)
        # every call settled exactly once, and the client's view of it is consistent
        for plan in plans:
            call = calls[plan.tag]
            assert call.done() and plan.outcome in ("result", "cancelled", "timeout"), plan
            assert (plan.outcome == "timeout") <= (plan.timeout is not None), plan
            assert call.cancelled() is (plan.outcome == "cancelled"), plan
        assert client.in_flight() == (0, 0)
        # a response that lost to the client's own cancel was dropped quietly: the caller
        # saw "cancelled", never the result, never a connection error
        answered = {
            m.get("id") for m in recorder.received if isinstance(m, dict) and "method" not in m
        }
        late = sum(1 for plan in plans if plan.outcome != "result" and plan.request_id in answered)
        assert client.dropped["late response after cancellation"] == late, client.dropped
        # and so was progress that crossed the cancel on the wire; nothing else was dropped
        crossing = {
            "late response after cancellation",
            "progress for an unknown or finished request",
        }
        assert set(client.dropped) <= crossing, client.dropped
    finally:
        client.close(WAIT)
    for plan in plans:
        plan.cancels_sent = sum(
            1
            for m in recorder.sent
            if isinstance(m, dict)
            and m.get("method") == "notifications/cancelled"
            and (m.get("params") or {}).get("requestId") == plan.request_id
        )
        # a cancelled or timed-out call sent its cancellation exactly once; one that got its
        # result (or was cancelled only after it) sent none
        expected = 0 if plan.outcome == "result" else 1
        assert plan.cancels_sent == expected, (
            f"{plan}: cancelled {plan.cancels_sent} times on the wire"
        )
    return recorder, other_ids


def check_client_agrees(plans: list[CallPlan], journal: list[dict[str, Any]]) -> None:
    """A request whose cancellation won on the server is a cancelled call on the client; a
    call that got its result was answered on the server."""
    fired = {e["tag"] for e in journal if e["kind"] == "cancel"}
    started = {e["tag"] for e in journal if e["kind"] == "start"}
    for plan in plans:
        if plan.tag in fired or plan.tag not in started:
            assert plan.outcome in ("cancelled", "timeout"), (
                f"{plan.tag}: the server's cancellation won, the client saw {plan.outcome}"
            )
        if plan.outcome == "result":
            assert plan.tag in started and plan.tag not in fired, plan


TRANSPORTS = ("memory", "pipes", "subprocess")


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("era", ERAS)
def test_cancellation_storm(era: str, transport: str, fast_switching: None, tmp_path: Any) -> None:
    seed = zlib.crc32(f"{era} {transport}".encode()) % 1000
    plans = make_plans(random.Random(seed), CALLS, timeouts=True)
    journal = Journal()
    withheld: Counter[str] = Counter()
    if transport == "memory":
        serving = served_memory(journal, withheld)
    elif transport == "pipes":
        serving = served_pipes(journal, withheld)
    else:
        serving = served_subprocess(journal, tmp_path)
    with serving as client_end:
        recorder, other_ids = storm(client_end, era, plans, seed)
    verdict = judge(
        plans, recorder.received, journal.events, era=era, other_ids=other_ids, sent=recorder.sent
    )
    check_era(recorder.received, era)
    check_client_agrees(plans, journal.events)
    verdict.check_mix()
    assert verdict.counts["ordered after cancel"] > 0, dict(verdict.counts)
    assert {plan.outcome for plan in plans} == {"result", "cancelled", "timeout"}
    if transport != "subprocess":  # the server counts what it withheld, one by one
        unwanted = {p.tag for p in plans if era == MODERN and p.log_level not in ("debug", "info")}
        not_sent = sum(
            1
            for e in journal.events
            if not e.get("sent", True) and (e["kind"] == "progress" or e["tag"] not in unwanted)
        )
        assert withheld == Counter({NOT_RUNNING: not_sent}), withheld
