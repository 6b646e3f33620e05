"""Completion against cancellation, raced for real on many threads.

Each run counts the outcomes and checks the invariants of the design:

* every call settles exactly once (one done-callback, one outcome);
* on the server, every request ends in exactly one of "cancellation accepted" (its token fired
  by the peer's notifications/cancelled) and "a response written" -- never both, never neither;
* the client's view agrees: a call with a result was answered and not cancelled on the
  server; a cancellation the server accepted always shows up as a cancelled call; a response
  that lost the race to a local cancel is dropped quietly as a late response.

The default run is modest; ``-m stress`` runs a much bigger one.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from support.endpoints import endpoint_pair
from support.waiting import WAIT, wait_until

from mcp_sync import deadlines
from mcp_sync.cancel import CancelToken
from mcp_sync.errors import Cancelled, RequestTimeout
from mcp_sync.protocol import Dispatch


@dataclass
class CallRecord:
    call: Any
    i: int
    cancel_returned: bool | None = None
    outcome: str = ""
    value: Any = None
    done_callbacks: int = 0


def _spin(n: int) -> None:
    for _ in range(n):
        pass


def race_round(
    *,
    seed: int,
    threads: int,
    per_thread: int,
    server_workers: int,
    use_timeouts: bool = False,
    chaos: bool = True,
) -> Counter:
    """One endpoint pair, ``threads * per_thread`` calls raced against cancellation."""
    rng_master = random.Random(seed)
    started_ids: set[int] = set()
    started_lock = threading.Lock()

    def race(req):
        with started_lock:
            started_ids.add(req.id)
        for _ in range(req.params["spin"]):
            if req.token.cancelled:
                break
        return {"i": req.params["i"]}

    shared_token = CancelToken()  # never cancelled: finished calls must not pile up on it
    records: list[CallRecord] = []
    records_lock = threading.Lock()
    inbound: list[Any] = []
    stats: Counter = Counter()

    with endpoint_pair(
        {"race": race}, server_workers=server_workers, inline={"ping": lambda r: {}}
    ) as p:
        original_perform = p.server._perform

        def perform(actions, inline=None):
            for action in actions:
                if isinstance(action, Dispatch) and action.request.method == "race":
                    inbound.append(action.request)
            return original_perform(actions, inline)

        p.server._perform = perform  # see every request the server registers

        barrier = threading.Barrier(threads + (1 if chaos else 0))
        finished = threading.Event()
        errors: list[BaseException] = []

        def caller(tid: int, rng: random.Random) -> None:
            try:
                barrier.wait(WAIT)
                for k in range(per_thread):
                    i = tid * per_thread + k
                    options: dict[str, Any] = {}
                    if use_timeouts and rng.random() < 0.5:
                        options["timeout"] = rng.choice([0.0, 0.0005, 0.001, 0.003])
                    elif rng.random() < 0.3:
                        options["timeout"] = 30
                    if rng.random() < 0.3:
                        options["cancel_token"] = shared_token
                    call = p.client.submit(
                        "race", {"i": i, "spin": rng.randrange(0, 5000)}, **options
                    )
                    record = CallRecord(call, i)

                    def on_done(_f, record=record):
                        record.done_callbacks += 1

                    call.add_done_callback(on_done)
                    with records_lock:
                        records.append(record)
                    mode = rng.random()
                    if mode < 0.3:
                        record.cancel_returned = call.cancel("race")
                    elif mode < 0.65:
                        _spin(rng.randrange(0, 2000))
                        record.cancel_returned = call.cancel("race")
                    try:
                        record.value = call.result(WAIT)
                        record.outcome = "result"
                    except Cancelled:
                        record.outcome = "cancelled"
                    except RequestTimeout:
                        record.outcome = "timeout"
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        def chaos_monkey(rng: random.Random) -> None:
            try:
                barrier.wait(WAIT)
                pause = threading.Event()
                while not finished.is_set():
                    with records_lock:
                        target = rng.choice(records) if records else None
                    if target is not None:
                        target.call.cancel("chaos")
                    pause.wait(0.0002)
            except BaseException as exc:
                errors.append(exc)

        workers = [
            threading.Thread(
                target=caller, args=(t, random.Random(rng_master.random())), name=f"caller-{t}"
            )
            for t in range(threads)
        ]
        if chaos:
            workers.append(
                threading.Thread(target=chaos_monkey, args=(random.Random(seed + 1),), name="chaos")
            )
        for w in workers:
            w.start()
        for w in workers[:threads]:
            w.join(60)
        finished.set()
        for w in workers:
            w.join(WAIT)
        assert not any(w.is_alive() for w in workers), "a racing thread hung"
        assert not errors, errors

        # barrier: every notifications/cancelled was queued before this ping, so once it is
        # answered the server has processed them all; every request is finished on the server
        assert p.client.request("ping", timeout=WAIT) == {}
        assert p.server.in_flight() == (0, 0), "requests left in flight on the server"
        assert p.client.in_flight() == (0, 0)
        assert p.server.close(grace=WAIT) == []  # joins workers: every write is made
        assert p.client.wait_closed(WAIT)

        server_responses = Counter()
        for msg in p.server_t.messages():
            if "method" not in msg and ("result" in msg or "error" in msg):
                server_responses[msg["id"]] += 1
        client_cancels = Counter(m["params"]["requestId"] for m in p.client_t.cancels())

        # -- invariants -----------------------------------------------------------------------
        total = threads * per_thread
        assert len(records) == total
        by_id = {r.call.request_id: r for r in records}
        assert len(by_id) == total
        assert {r.id for r in inbound} == set(by_id), "the server did not see exactly our requests"
        assert len(inbound) == total

        for req in inbound:
            record = by_id[req.id]
            accepted_cancel = req.token.cancelled
            responded = server_responses[req.id]
            assert responded <= 1, f"request {req.id} answered {responded} times"
            assert accepted_cancel != bool(responded), (
                f"request {req.id}: cancellation accepted={accepted_cancel}, responses={responded}"
            )
            if accepted_cancel:
                assert req.token.reason in ("race", "chaos") or req.token.reason.startswith(
                    "timed out"
                )
                assert record.outcome in ("cancelled", "timeout"), (
                    f"request {req.id}: server accepted the cancel but the client got {record.outcome}"
                )
                stats[
                    "cancel accepted while running"
                    if req.id in started_ids
                    else "cancel accepted while queued"
                ] += 1
            else:
                stats["answered"] += 1

        for record in records:
            call = record.call
            rid = call.request_id
            assert record.done_callbacks == 1, f"call {rid} settled {record.done_callbacks} times"
            assert call.done()
            assert record.outcome in ("result", "cancelled", "timeout"), record.outcome
            stats[record.outcome] += 1
            if record.outcome == "result":
                assert not call.cancelled()
                assert record.value == {"i": record.i}, "a call got another call's result"
                assert server_responses[rid] == 1
                assert client_cancels[rid] == 0, f"completed call {rid} was cancelled on the wire"
                if record.cancel_returned is not None:
                    assert record.cancel_returned is False
            elif record.outcome == "cancelled":
                assert call.cancelled()
                assert client_cancels[rid] == 1, (
                    f"cancelled call {rid} sent {client_cancels[rid]} cancels"
                )
                if record.cancel_returned is not None:
                    # a chaos cancel may have won first, but cancel() still reports True
                    assert record.cancel_returned is True
            else:
                assert not call.cancelled()
                assert client_cancels[rid] == 1
                if record.cancel_returned is not None:
                    assert record.cancel_returned is False
            if record.outcome != "result" and server_responses[rid]:
                stats["late response dropped"] += 1

        assert (
            p.client.dropped["late response after cancellation"] == stats["late response dropped"]
        )
        assert (
            p.server.dropped["cancellation of an unknown or finished request"]
            == stats["late response dropped"]
        )
        assert sum(client_cancels.values()) == stats["cancelled"] + stats["timeout"]
        assert set(p.client.dropped) <= {"late response after cancellation"}, p.client.dropped
        assert set(p.server.dropped) <= {"cancellation of an unknown or finished request"}, (
            p.server.dropped
        )
        assert shared_token._callbacks == [], (
            f"{len(shared_token._callbacks)} finished calls still hang on a shared cancel token"
        )
    wait_until(
        lambda: deadlines.pending_deadlines() == 0, "the scheduler to drop the call timeouts"
    )
    return stats


def _check_mix(stats: Counter) -> None:
    """The run must really have raced: both winners must appear."""
    assert stats["result"] > 0, stats
    assert stats["cancelled"] > 0, stats
    assert stats["cancel accepted while running"] > 0, stats
    assert stats["cancel accepted while queued"] > 0, stats
    assert stats["late response dropped"] > 0, stats


def test_complete_vs_cancel_race(fast_switching):
    stats: Counter = Counter()
    for seed in range(4):
        stats.update(race_round(seed=seed, threads=8, per_thread=150, server_workers=3))
    _check_mix(stats)
    assert sum(stats[k] for k in ("result", "cancelled", "timeout")) == 4800


def test_complete_vs_timeout_race(fast_switching):
    stats: Counter = Counter()
    for seed in range(2):
        stats.update(
            race_round(
                seed=100 + seed,
                threads=4,
                per_thread=150,
                server_workers=2,
                use_timeouts=True,
                chaos=False,
            )
        )
    assert stats["result"] > 0, stats
    assert stats["timeout"] > 0, stats


def test_token_callbacks_race_cancel(fast_switching):
    """add_callback racing cancel: every callback runs exactly once, children all follow."""
    for _ in range(200):
        token = CancelToken()
        counts: Counter = Counter()
        lock = threading.Lock()
        children: list[CancelToken] = []
        barrier = threading.Barrier(5)

        def adder(base: int) -> None:
            barrier.wait(WAIT)
            for j in range(20):

                def cb(_t, key=base + j):
                    with lock:
                        counts[key] += 1

                token.add_callback(cb)
                children.append(token.child())

        def canceller() -> None:
            barrier.wait(WAIT)
            token.cancel("raced")

        threads = [threading.Thread(target=adder, args=(b * 100,)) for b in range(4)]
        threads.append(threading.Thread(target=canceller))
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
            assert not t.is_alive()
        assert len(counts) == 80 and set(counts.values()) == {1}, counts
        assert all(c.cancelled and c.reason == "raced" for c in children)


@pytest.mark.stress
def test_complete_vs_cancel_race_big(fast_switching):
    stats: Counter = Counter()
    for seed in range(20):
        stats.update(race_round(seed=1000 + seed, threads=8, per_thread=250, server_workers=4))
        stats.update(
            race_round(
                seed=5000 + seed, threads=4, per_thread=200, server_workers=2, use_timeouts=True
            )
        )
    _check_mix(stats)
    assert stats["timeout"] > 0
