"""The in-process message bus: ordering, bounds, failures, closing, threads."""

from __future__ import annotations

import logging
import os
import threading
import warnings
from typing import Any

import pytest

from mcp_sync.server.bus import (
    BusMessage,
    InProcessBus,
    MessageBus,
    Subscription,
    decode_event,
    encode_event,
    process_id,
)

WAIT = 5.0


class Collector:
    """A callback that records events and signals when it has seen `expected` of them."""

    def __init__(self, expected: int = 1, name: str = "") -> None:
        self.name = name
        self.expected = expected
        self.messages: list[BusMessage] = []
        self.done = threading.Event()
        self.log: list[tuple[str, Any]] | None = None

    def __call__(self, message: BusMessage) -> None:
        self.messages.append(message)
        if self.log is not None:
            self.log.append((self.name, message.event["n"]))
        if len(self.messages) >= self.expected:
            self.done.set()

    def events(self) -> list[dict[str, Any]]:
        return [m.event for m in self.messages]

    def wait(self) -> None:
        assert self.done.wait(WAIT), f"only {len(self.messages)} of {self.expected} events"


def bus_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("mcp_sync-bus")]


def test_events_arrive_in_publish_order_and_subscribers_in_subscription_order() -> None:
    order: list[tuple[str, Any]] = []
    first, second = Collector(50, "first"), Collector(50, "second")
    first.log = second.log = order
    with InProcessBus() as bus:
        bus.subscribe("tools", first)
        bus.subscribe(["tools", "prompts"], second)
        for n in range(50):
            bus.publish("tools", {"n": n})
        first.wait()
        second.wait()
        assert order == [(name, n) for n in range(50) for name in ("first", "second")]
        stats = bus.stats()
    assert (stats.published, stats.delivered, stats.dropped) == (50, 100, 0)


def test_a_subscriber_receives_only_its_topics() -> None:
    tools, both = Collector(1), Collector(2)
    with InProcessBus() as bus:
        bus.subscribe("tools", tools)
        bus.subscribe({"tools", "resources"}, both)
        bus.publish("resources", {"n": 1})
        bus.publish("tools", {"n": 2})
        bus.publish("nobody", {"n": 3})
        tools.wait()
        both.wait()
        assert tools.events() == [{"n": 2}]
        assert both.events() == [{"n": 1}, {"n": 2}]
        assert [m.topic for m in both.messages] == ["resources", "tools"]
        assert bus.stats().delivered == 3


def test_the_message_names_this_process_and_is_a_copy() -> None:
    got = Collector(1)
    event = {"n": 1, "uri": "file:///a"}
    with InProcessBus() as bus:
        bus.subscribe("updated", got)
        bus.publish("updated", event)
        event["n"] = 99
        got.wait()
    message = got.messages[0]
    assert message.event == {"n": 1, "uri": "file:///a"}
    assert message.origin == process_id()
    assert message.from_this_process


def test_a_full_queue_drops_the_oldest_events_and_counts_them() -> None:
    started, release = threading.Event(), threading.Event()
    seen: list[int] = []
    finished = threading.Event()

    def slow(message: BusMessage) -> None:
        seen.append(message.event["n"])
        if message.event["n"] == 0:
            started.set()
            assert release.wait(WAIT)
        if message.event["n"] == 10:
            finished.set()

    with InProcessBus(queue_size=3) as bus:
        bus.subscribe("t", slow)
        bus.publish("t", {"n": 0})
        assert started.wait(WAIT)
        for n in range(1, 11):  # never blocks although the subscriber is stuck
            bus.publish("t", {"n": n})
        assert bus.stats().dropped == 7
        release.set()
        assert finished.wait(WAIT)
        stats = bus.stats()
    assert seen == [0, 8, 9, 10]
    assert (stats.published, stats.delivered, stats.dropped) == (11, 4, 7)


def test_dropped_counts_each_subscriber_that_lost_the_event() -> None:
    started, release = threading.Event(), threading.Event()

    def blocker(message: BusMessage) -> None:
        started.set()
        assert release.wait(WAIT)

    other = Collector(2)
    with InProcessBus(queue_size=1) as bus:
        bus.subscribe("t", blocker)
        bus.subscribe("t", other)
        bus.publish("t", {"n": 0})
        assert started.wait(WAIT)
        bus.publish("t", {"n": 1})
        bus.publish("t", {"n": 2})  # pushes out n=1, which two subscribers would have had
        assert bus.stats().dropped == 2
        release.set()
        other.wait()
    assert other.events() == [{"n": 0}, {"n": 2}]


def test_a_raising_callback_is_logged_and_delivery_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(message: BusMessage) -> None:
        if message.event["n"] == 1:
            raise SystemExit("a callback calling sys.exit")
        raise RuntimeError(f"broken on {message.event['n']}")

    after = Collector(3)
    with InProcessBus() as bus, caplog.at_level(logging.ERROR, "mcp_sync.server.bus"):
        bus.subscribe("t", broken)
        bus.subscribe("t", after)
        for n in range(3):
            bus.publish("t", {"n": n})
        after.wait()
        stats = bus.stats()
    assert after.events() == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert stats.callback_errors == 3 and stats.delivered == 6
    failures = [r for r in caplog.records if r.exc_info]
    assert len(failures) == 3
    assert "broken on 0" in str(failures[0].exc_info[1])  # type: ignore[index]


def test_close_is_idempotent_everywhere() -> None:
    bus = InProcessBus()
    sub = bus.subscribe("t", Collector())
    sub.close()
    sub.close()
    assert sub.closed
    other = bus.subscribe("t", Collector())
    bus.close()
    bus.close()
    assert other.closed
    other.close()
    with pytest.raises(RuntimeError):
        bus.subscribe("t", Collector())
    with pytest.raises(RuntimeError):
        bus.publish("t", {})
    assert bus_threads() == []


def test_a_closed_subscription_receives_nothing_more() -> None:
    gone, stays = Collector(), Collector(2)
    with InProcessBus() as bus:
        sub = bus.subscribe("t", gone)
        bus.subscribe("t", stays)
        bus.publish("t", {"n": 0})
        gone.wait()
        sub.close()
        bus.publish("t", {"n": 1})
        stays.wait()
    assert gone.events() == [{"n": 0}]


def test_events_queued_for_a_subscription_are_not_delivered_after_it_closed() -> None:
    started, release = threading.Event(), threading.Event()
    first_seen: list[int] = []

    def first(message: BusMessage) -> None:
        first_seen.append(message.event["n"])
        if message.event["n"] == 0:
            started.set()
            assert release.wait(WAIT)

    later = Collector()
    tail = Collector(2)
    with InProcessBus() as bus:
        bus.subscribe("t", first)
        sub = bus.subscribe("t", later)
        bus.subscribe("t", tail)
        bus.publish("t", {"n": 0})
        bus.publish("t", {"n": 1})
        assert started.wait(WAIT)
        sub.close()  # both events are still queued for it
        release.set()
        tail.wait()
    assert first_seen == [0, 1]
    assert later.messages == []


def test_close_waits_for_a_running_callback_of_that_subscription() -> None:
    started, release = threading.Event(), threading.Event()

    def slow(message: BusMessage) -> None:
        started.set()
        assert release.wait(WAIT)

    closed = threading.Event()
    with InProcessBus() as bus:
        bus.subscribe("t", Collector())  # keeps the delivery thread running
        sub = bus.subscribe("t", slow)
        bus.publish("t", {"n": 0})
        assert started.wait(WAIT)

        def close() -> None:
            sub.close()
            closed.set()

        closer = threading.Thread(target=close)
        closer.start()
        # a bounded wait that must expire: close() is held by the running callback
        assert not closed.wait(0.2)
        release.set()
        assert closed.wait(WAIT)
        closer.join(WAIT)


def test_a_callback_may_close_its_own_subscription() -> None:
    seen: list[int] = []
    sub: Subscription | None = None
    after = Collector(2)

    def once(message: BusMessage) -> None:
        seen.append(message.event["n"])
        assert sub is not None
        sub.close()

    with InProcessBus() as bus:
        sub = bus.subscribe("t", once)
        bus.subscribe("t", after)
        bus.publish("t", {"n": 0})
        bus.publish("t", {"n": 1})
        after.wait()
    assert seen == [0]


def test_the_last_subscription_closed_from_its_callback_ends_the_thread() -> None:
    sub: Subscription | None = None
    called = threading.Event()

    def once(message: BusMessage) -> None:
        assert sub is not None
        sub.close()
        called.set()

    bus = InProcessBus()
    sub = bus.subscribe("t", once)
    bus.publish("t", {})
    assert called.wait(WAIT)
    for thread in bus_threads():  # it ends on its own once the callback returned
        thread.join(WAIT)
    assert bus_threads() == []
    again = Collector()  # a new subscription starts a new thread
    bus.subscribe("t", again)
    bus.publish("t", {"n": 1})
    again.wait()
    bus.close()
    assert bus_threads() == []


def test_one_delivery_thread_per_bus_and_only_while_subscribed() -> None:
    bus = InProcessBus()
    bus.publish("t", {})  # nobody listens: nothing is queued, no thread
    assert bus_threads() == []
    subs = [bus.subscribe(f"t{i}", Collector()) for i in range(20)]
    assert len(bus_threads()) == 1
    for sub in subs[:-1]:
        sub.close()
    assert len(bus_threads()) == 1
    subs[-1].close()
    assert bus_threads() == []
    assert bus.stats().published == 1 and bus.stats().delivered == 0
    bus.close()


def test_concurrent_publishers_keep_their_own_order() -> None:
    per_thread, writers = 200, 4
    got = Collector(per_thread * writers)
    barrier = threading.Barrier(writers)

    def publish(w: int) -> None:
        barrier.wait(WAIT)
        for n in range(per_thread):
            bus.publish("t", {"w": w, "n": n})

    with InProcessBus(queue_size=per_thread * writers) as bus:
        bus.subscribe("t", got)
        threads = [threading.Thread(target=publish, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        got.wait()
    for w in range(writers):
        assert [e["n"] for e in got.events() if e["w"] == w] == list(range(per_thread))


def test_subscriptions_coming_and_going_race_with_publishing(fast_switching: None) -> None:
    events, churners, rounds = 300, 3, 60
    steady = Collector(events)
    start = threading.Barrier(churners + 1)
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            start.wait(WAIT)
            for _ in range(rounds):
                bus.subscribe("t", lambda message: None).close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    with InProcessBus(queue_size=events) as bus:
        bus.subscribe("t", steady)
        threads = [threading.Thread(target=churn) for _ in range(churners)]
        for t in threads:
            t.start()
        start.wait(WAIT)
        for n in range(events):
            bus.publish("t", {"n": n})
        for t in threads:
            t.join(WAIT)
        steady.wait()
        assert len(bus_threads()) == 1
    assert errors == []
    assert [e["n"] for e in steady.events()] == list(range(events))
    assert bus_threads() == []


def test_the_delivery_thread_restarts_cleanly_many_times(fast_switching: None) -> None:
    with InProcessBus() as bus:
        for n in range(50):
            got = Collector()
            sub = bus.subscribe("t", got)
            bus.publish("t", {"n": n})
            got.wait()
            sub.close()
            assert bus_threads() == []
        assert bus.stats().delivered == 50


@pytest.mark.parametrize(
    "topic, event, error",
    [
        ("", {}, ValueError),
        ("t", ["not", "an", "object"], TypeError),
        ("t", {"x": object()}, TypeError),
        ("t", {"x": float("nan")}, TypeError),
    ],
)
def test_bad_topics_and_events_are_refused(topic: str, event: Any, error: type) -> None:
    with InProcessBus() as bus, pytest.raises(error):
        bus.publish(topic, event)
    assert bus.stats().published == 0


def test_bad_subscriptions_are_refused() -> None:
    with InProcessBus() as bus:
        with pytest.raises(ValueError):
            bus.subscribe([], Collector())
        with pytest.raises(ValueError):
            bus.subscribe(["t", ""], Collector())
        with pytest.raises(TypeError):
            bus.subscribe("t", "not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        InProcessBus(queue_size=0)


def test_the_encoded_form_carries_version_and_origin() -> None:
    text = encode_event("tools", {"a": 1})
    assert text.startswith('{"v":1,')
    message = decode_event(text)
    assert message == BusMessage("tools", {"a": 1}, process_id())
    assert decode_event(text.replace('"v":1', '"v":2')) is None
    assert decode_event("not json") is None
    assert decode_event('{"v":1,"topic":"t","event":[],"origin":"x"}') is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_has_its_own_process_id() -> None:
    parent = process_id()
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():  # 3.12+ warns about forking a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: report and leave at once, running no pytest code
        try:
            os.write(write_end, process_id().encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        child = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert child and child != parent
    assert child.split("/")[1] == str(pid)
    assert process_id() == parent


def test_the_bus_satisfies_the_protocol() -> None:
    with InProcessBus() as bus:
        assert isinstance(bus, MessageBus)
