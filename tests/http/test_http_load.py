"""Load: 20 HTTP clients x 100 calls, about 30% of them cancelled, against the built-in
server and under waitress.

Judged on both sides: every call ends exactly once on the client, a call whose cancel()
returned True raises Cancelled, and the server never answers a request whose handler saw
its cancellation. Threads and memory are measured as growth against a baseline taken after
a warm-up round, and the app's stats must show nothing left in flight.
"""

from __future__ import annotations

import gc
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.http import Wire, legacy_http, run_waitress
from support.waiting import WAIT, wait_until

from mcp_sync import Cancelled, Context, RequestTimeout, Server, ServerSession, deadlines
from mcp_sync.http import McpWsgiApp, serve_http
from mcp_sync.http.session_transport import HttpSessionTransport

CLIENTS = 20
CALLS = 100
HOLD = 1.0
"""Seconds a handler whose call will be cancelled waits for the cancellation. A cancel that
reaches the server before its request (over HTTP they travel on different connections) is
kept by the session and applied when the request arrives, so the handler sees it at once;
HOLD only bounds a handler whose cancellation never came (its answer, if any, is one the
client has settled as cancelled already and drops)."""
RSS_GROWTH_LIMIT = 64 * 1024 * 1024
"""Bytes the process may grow by over the load (a leak of a few KiB per call exceeds it)."""


class Ledger:
    """What the server's handlers saw: which calls started, and which saw their token."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: dict[int, threading.Event] = {}
        self.saw_cancel: set[int] = set()

    def started(self, n: int) -> threading.Event:
        with self._lock:
            return self._started.setdefault(n, threading.Event())

    def cancelled(self, n: int) -> None:
        with self._lock:
            self.saw_cancel.add(n)


def load_server(ledger: Ledger) -> Server:
    server = Server("load")

    @server.tool()
    def work(n: int, hold: bool, ctx: Context) -> int:
        """Answer ``n`` at once, or (``hold``) wait for the cancellation that will come."""
        ledger.started(n).set()
        if hold and ctx.wait(HOLD):
            ledger.cancelled(n)
            return -n - 1  # discarded: a cancelled request gets no answer
        if ctx.cancelled:
            ledger.cancelled(n)
        return n

    return server


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


@pytest.fixture(params=["serve_http", "waitress"])
def site(request) -> Iterator[tuple[str, McpWsgiApp, Ledger]]:
    ledger = Ledger()
    app = McpWsgiApp(load_server(ledger), path="/mcp", max_workers=32)
    if request.param == "serve_http":
        handle = serve_http(app, "127.0.0.1", 0)
        url, stop = handle.url, handle.stop
    else:
        # every client holds a GET stream and one call's stream, plus short POSTs
        base, stop_waitress = run_waitress(app, threads=2 * CLIENTS + 8)
        url = base + "/mcp"

        def stop() -> None:
            app.close()
            stop_waitress()

    try:
        yield url, app, ledger
    finally:
        stop()


class Round:
    """What the clients of one round saw: each call's outcome, and how often it settled."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.outcomes: dict[int, str] = {}
        self.settled: Counter[int] = Counter()

    def on_done(self, n: int) -> Callable[[Any], None]:
        def done(_future: Any) -> None:
            with self.lock:
                self.settled[n] += 1

        return done


def run_client(url: str, ledger: Ledger, record: Round, index: int, calls: int, first: int) -> None:
    """One client's ``calls`` calls: ~70% answered, ~30% cancelled (at once, or once the
    handler runs) or timed out. Calls are numbered from ``first``."""
    rng = random.Random(first + index)
    with legacy_http(url) as client:
        for i in range(calls):
            n = first + index * calls + i
            roll = rng.random()
            hold = roll < 0.3
            timeout = 0.05 if roll < 0.05 else None
            future = client.call_tool_future("work", {"n": n, "hold": hold}, timeout=timeout)
            future.add_done_callback(record.on_done(n))
            cancel_returned = None
            if timeout is None and roll < 0.15:
                cancel_returned = future.cancel("at once")  # queued, in flight or running
            elif timeout is None and hold:
                assert ledger.started(n).wait(WAIT), f"call {n} never started"
                cancel_returned = future.cancel("while running")
            try:
                value = future.result(WAIT * 2)
                assert value.structured_content["result"] == n
                outcome = "result"
            except Cancelled:
                outcome = "cancelled"
            except RequestTimeout:
                outcome = "timeout"
            if cancel_returned is True:
                assert outcome == "cancelled", (n, outcome)
            elif cancel_returned is False:
                assert outcome == "result", (n, outcome)  # completion won the race
            else:
                assert outcome == ("timeout" if timeout is not None else "result"), (n, outcome)
            with record.lock:
                record.outcomes[n] = outcome


def session_threads() -> list[str]:
    """The names of the live threads but the process-wide deadline thread."""
    return [t.name for t in threading.enumerate() if t.name != "mcp_sync-deadlines"]


def run_round(url: str, ledger: Ledger, clients: int, calls: int, first: int = 0) -> Round:
    record = Round()
    errors: list[BaseException] = []

    def target(index: int) -> None:
        try:
            run_client(url, ledger, record, index, calls, first)
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)

    threads = [
        threading.Thread(target=target, args=(i,), name=f"load-client-{i}") for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not [t.name for t in threads if t.is_alive()], "clients still running"
    assert not errors, errors[:3]
    return record


def test_twenty_clients_with_random_cancellations(site, wire: Wire):
    url, app, ledger = site
    # warm-up, numbered apart: imports, the server's threads, the allocator's pools
    run_round(url, ledger, CLIENTS, 5, first=10 * CLIENTS * CALLS)
    wait_until(
        lambda: app.stats().sessions == 0 and app.stats().pool.threads == 0,
        "the warm-up's sessions and workers to end",
    )
    threads_before = len(session_threads())
    rss_before = rss_bytes()
    wire.pushed.clear()
    ledger.saw_cancel.clear()

    record = run_round(url, ledger, CLIENTS, CALLS)
    outcomes, settled = record.outcomes, record.settled

    total = CLIENTS * CALLS
    assert len(outcomes) == total
    assert settled == Counter(dict.fromkeys(range(total), 1)), "a call settled twice or never"
    counts = Counter(outcomes.values())
    assert counts["cancelled"] + counts["timeout"] >= total * 0.2, counts

    # the server's side: every answer is for a call whose handler did not see its token,
    # no call is answered twice, and every call the client got a result for was answered
    answered: Counter[int] = Counter()
    for _, message in list(wire.pushed):
        result = message.get("result")
        if isinstance(result, dict) and "structuredContent" in result:
            answered[result["structuredContent"]["result"]] += 1
    assert not [n for n in answered if n < 0], "a cancelled handler's value was sent"
    assert not (ledger.saw_cancel & set(answered)), "a handler saw its token, yet was answered"
    assert max(answered.values()) == 1
    assert {n for n, o in outcomes.items() if o == "result"} <= set(answered)
    assert ledger.saw_cancel, "no handler ever saw a cancellation"

    # nothing left behind: sessions ended, nothing in flight, threads back to baseline
    wait_until(
        lambda: app.stats().sessions == 0 and app.stats().pool.threads == 0,
        "every session and worker to end",
    )
    stats = app.stats()
    assert (
        stats.inbound_in_flight,
        stats.outbound_in_flight,
        stats.pool.queued,
        stats.pool.busy,
    ) == (0, 0, 0, 0)

    def back_to_baseline() -> bool:
        # the shared deadline thread is one per process, not per session: it lingers after
        # its last deadline (asked to go now, as the suite's leak check does) and may be
        # alive or not at the baseline, so it is not counted on either side
        deadlines.stop_idle_scheduler(0)
        return len(session_threads()) <= threads_before

    try:
        wait_until(back_to_baseline, "the thread count to return to the baseline")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; threads now: {sorted(session_threads())}") from None
    gc.collect()
    leaked = [o for o in gc.get_objects() if isinstance(o, (ServerSession, HttpSessionTransport))]
    assert not leaked, f"{len(leaked)} session objects outlived their sessions"
    growth = rss_bytes() - rss_before
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew by {growth / 2**20:.1f} MiB"
