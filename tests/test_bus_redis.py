"""RedisBus against a real redis-server: round trips, other processes, a restarted server."""

from __future__ import annotations

import json
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from support.paths import PYTHON
from support.processes import Proc
from support.redis_server import REDIS_SERVER, RedisServer, running_redis
from support.waiting import PEER_WAIT, wait_until

from mcp_sync.errors import BusUnavailable
from mcp_sync.server.bus import BusMessage, MessageBus, RedisBus, process_id

pytestmark = pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server is not installed (.ci/run installs it)"
)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture
def make_bus(redis_server: RedisServer) -> Iterator[Callable[..., RedisBus]]:
    buses: list[RedisBus] = []

    def make(**options: Any) -> RedisBus:
        options.setdefault("backoff_max", 0.2)
        bus = RedisBus(redis_server.url, **options)
        buses.append(bus)
        return bus

    yield make
    for bus in buses:
        bus.close()


class Collector:
    def __init__(self, expected: int = 1) -> None:
        self.expected = expected
        self.messages: list[BusMessage] = []
        self.done = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, message: BusMessage) -> None:
        with self._lock:
            self.messages.append(message)
            if len(self.messages) >= self.expected:
                self.done.set()

    def wait(self, expected: int | None = None) -> list[dict[str, Any]]:
        with self._lock:
            if expected is not None:
                self.expected = expected
                if len(self.messages) < expected:
                    self.done.clear()
        assert self.done.wait(PEER_WAIT), f"only {len(self.messages)} of {self.expected} events"
        return [m.event for m in self.messages]


def test_events_go_through_redis_in_order(make_bus: Callable[..., RedisBus]) -> None:
    bus = make_bus(health_check_interval=0.001)  # pings between the events too
    got = Collector(200)
    bus.subscribe("tools", got)
    for n in range(200):
        bus.publish("tools", {"n": n})
    assert got.wait() == [{"n": n} for n in range(200)]
    assert all(m.from_this_process and m.topic == "tools" for m in got.messages)
    stats = bus.stats()
    assert (stats.published, stats.delivered, stats.dropped, stats.reconnects) == (200, 200, 0, 0)
    assert isinstance(bus, MessageBus)


def test_every_bus_on_the_prefix_receives_and_other_prefixes_do_not(
    make_bus: Callable[..., RedisBus],
) -> None:
    publisher, listener, elsewhere = make_bus(), make_bus(), make_bus(prefix="other:")
    got, stray = Collector(2), Collector(1)
    listener.subscribe(["tools", "resources"], got)
    elsewhere.subscribe("tools", stray)
    publisher.publish("tools", {"n": 1})
    publisher.publish("prompts", {"n": 2})  # no one subscribed to it
    publisher.publish("resources", {"n": 3})
    elsewhere.publish("tools", {"n": 4})
    assert got.wait() == [{"n": 1}, {"n": 3}]
    assert stray.wait() == [{"n": 4}]
    assert publisher.stats().published == 3 and publisher.stats().delivered == 0


def test_threads_run_only_while_subscribed(make_bus: Callable[..., RedisBus]) -> None:
    def bus_threads() -> list[str]:
        return sorted(t.name for t in threading.enumerate() if "redis-bus" in t.name)

    bus = make_bus()
    bus.publish("t", {})
    assert bus_threads() == []
    subs = [bus.subscribe("t", Collector()) for _ in range(5)]
    assert bus_threads() == ["mcp_sync-redis-bus-delivery", "mcp_sync-redis-bus-listener"]
    for sub in subs:
        sub.close()
    assert bus_threads() == []
    got = Collector()
    bus.subscribe("t", got)  # subscribed again: a new listener, active at once
    bus.publish("t", {"again": True})
    assert got.wait() == [{"again": True}]
    bus.close()
    bus.close()
    assert bus_threads() == []


def test_a_raising_callback_does_not_stop_the_listener(make_bus: Callable[..., RedisBus]) -> None:
    def broken(message: BusMessage) -> None:
        raise ValueError("broken")

    bus = make_bus()
    got = Collector(2)
    bus.subscribe("t", broken)
    bus.subscribe("t", got)
    bus.publish("t", {"n": 1})
    bus.publish("t", {"n": 2})
    assert got.wait() == [{"n": 1}, {"n": 2}]
    assert bus.stats().callback_errors == 2


def test_foreign_or_malformed_messages_are_rejected(
    make_bus: Callable[..., RedisBus], redis_server: RedisServer
) -> None:
    bus = make_bus()
    got = Collector()
    bus.subscribe("t", got)
    raw = redis.Redis.from_url(redis_server.url)
    try:
        raw.publish("mcp_sync:t", b"not json")
        raw.publish("mcp_sync:t", json.dumps({"v": 99, "topic": "t", "event": {}, "origin": "x"}))
    finally:
        raw.close()
    bus.publish("t", {"ok": 1})
    assert got.wait() == [{"ok": 1}]
    assert bus.stats().rejected == 2


PUBLISHER = textwrap.dedent(
    """
    import sys
    from mcp_sync.server.bus import RedisBus, process_id
    with RedisBus(sys.argv[1]) as bus:
        for n in range(int(sys.argv[2])):
            bus.publish("tools", {"n": n})
    print("published by", process_id(), flush=True)
    """
)

SUBSCRIBER = textwrap.dedent(
    """
    import json, sys, threading
    from mcp_sync.server.bus import RedisBus
    expected = int(sys.argv[2])
    got = []
    done = threading.Event()
    def collect(message):
        got.append({"event": message.event, "origin": message.origin,
                    "own": message.from_this_process})
        if len(got) == expected:
            done.set()
    with RedisBus(sys.argv[1]) as bus:
        bus.subscribe("tools", collect)
        print("subscribed", flush=True)
        if not done.wait(20):
            sys.exit(f"only {len(got)} events")
    print(json.dumps(got), flush=True)
    """
)


def test_another_process_publishes_and_this_one_receives(
    make_bus: Callable[..., RedisBus], redis_server: RedisServer
) -> None:
    bus = make_bus()
    got = Collector(50)
    bus.subscribe("tools", got)
    with Proc([PYTHON, "-c", PUBLISHER, redis_server.url, "50"]) as child:
        line = child.wait_for("stdout", "published by", PEER_WAIT)
        finished = child.finish(PEER_WAIT)
    assert finished.code == 0, finished.describe()
    assert got.wait() == [{"n": n} for n in range(50)]
    origin = line.split()[-1]
    assert origin != process_id()
    assert all(m.origin == origin and not m.from_this_process for m in got.messages)


def test_this_process_publishes_and_another_one_receives(
    make_bus: Callable[..., RedisBus], redis_server: RedisServer
) -> None:
    bus = make_bus()
    with Proc([PYTHON, "-c", SUBSCRIBER, redis_server.url, "20"]) as child:
        child.wait_for("stdout", "subscribed", PEER_WAIT)
        for n in range(20):
            bus.publish("tools", {"n": n})
        result = child.line_at("stdout", 1, PEER_WAIT)
        finished = child.finish(PEER_WAIT)
    assert finished.code == 0, finished.describe()
    received = json.loads(result)
    assert [r["event"] for r in received] == [{"n": n} for n in range(20)]
    assert {r["origin"] for r in received} == {process_id()}
    assert not any(r["own"] for r in received)


def test_the_bus_reconnects_after_redis_restarts(
    make_bus: Callable[..., RedisBus], redis_server: RedisServer
) -> None:
    bus = make_bus()
    got = Collector(1)
    bus.subscribe("tools", got)
    bus.publish("tools", {"n": 1})
    assert got.wait() == [{"n": 1}]

    redis_server.kill()
    with pytest.raises(BusUnavailable):
        bus.publish("tools", {"n": "lost"})
    wait_until(
        lambda: not bus.connected, "the listener to notice the lost connection", timeout=PEER_WAIT
    )

    redis_server.start()
    wait_until(lambda: bus.stats().reconnects == 1, "the listener to reconnect", timeout=PEER_WAIT)
    assert bus.connected
    bus.publish("tools", {"n": 2})
    assert got.wait(2) == [{"n": 1}, {"n": 2}]
    stats = bus.stats()
    assert (stats.published, stats.delivered, stats.reconnects) == (2, 2, 1)


def test_subscribing_while_redis_is_down_fails_in_bounded_time(
    make_bus: Callable[..., RedisBus], redis_server: RedisServer
) -> None:
    redis_server.kill()
    bus = make_bus(subscribe_timeout=0.3, socket_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(BusUnavailable):
        bus.subscribe("tools", Collector())
    assert time.monotonic() - started < 0.3 + PEER_WAIT / 2
    with pytest.raises(BusUnavailable):
        bus.publish("tools", {})
    assert bus.stats().published == 0
    assert not any("redis-bus" in t.name for t in threading.enumerate())


def test_a_bus_subscribed_across_a_restart_receives_events_of_new_buses(
    make_bus: Callable[..., RedisBus], redis_server: RedisServer
) -> None:
    listener = make_bus()
    got = Collector(1)
    listener.subscribe("resources", got)
    redis_server.kill()
    wait_until(
        lambda: not listener.connected,
        "the listener to notice the lost connection",
        timeout=PEER_WAIT,
    )
    redis_server.start()
    wait_until(lambda: listener.connected, "the listener to reconnect", timeout=PEER_WAIT)
    make_bus().publish("resources", {"uri": "file:///a"})
    assert got.wait() == [{"uri": "file:///a"}]


def test_subscribing_and_closing_from_many_threads_starts_and_stops_cleanly(
    make_bus: Callable[..., RedisBus],
) -> None:
    bus = make_bus()
    workers, rounds = 4, 15
    start = threading.Barrier(workers)
    errors: list[BaseException] = []
    received = [0] * workers

    def churn(w: int) -> None:
        try:
            start.wait(PEER_WAIT)
            for n in range(rounds):
                got = Collector()
                with bus.subscribe(f"t{w}", got):  # the listener may be starting or stopping
                    bus.publish(f"t{w}", {"n": n})
                    got.wait()
                    received[w] += 1
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PEER_WAIT * 3)
    assert errors == []
    assert received == [rounds] * workers
    assert not any("redis-bus" in t.name for t in threading.enumerate())
