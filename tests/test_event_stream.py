"""``EventStream`` without HTTP: ids, the priming event, the bounded replay buffer, resumption,
keep-alives and the ways a consumer's iteration ends."""

from __future__ import annotations

import threading
import time

from support.waiting import WAIT, wait_until

from mcp_sync.http.sse import EventStream, SseParser, parse_event_id

PRIMING = b"data: \n\n"


def parse(raw: list[bytes]) -> list[tuple[str | None, str, str]]:
    parser = SseParser()
    return [event for chunk in raw for event in parser.feed_bytes(chunk)]  # type: ignore[misc]


def take(stream: EventStream, count: int, **options: object) -> list[bytes]:
    """The first ``count`` chunks of a consumer's iteration (closed afterwards)."""
    events = stream.events(**options)  # type: ignore[arg-type]
    try:
        return [next(events) for _ in range(count)]
    finally:
        events.close()


def test_the_first_event_primes_with_an_id_and_no_data():
    stream = EventStream("s")
    assert take(stream, 1) == [b"id: s:0\n" + PRIMING]
    stream.push(b'{"n": 1}')
    stream.end()
    assert list(stream.events(after=1)) == [b"id: s:1\n" + PRIMING]


def test_pushed_events_get_increasing_ids_and_arrive_in_order():
    stream = EventStream("r-1")
    for n in range(1, 4):
        assert stream.push(b'{"n": %d}\n' % n)
    stream.end()
    assert parse(list(stream.events())) == [
        ("r-1:0", "message", ""),
        ("r-1:1", "message", '{"n": 1}'),
        ("r-1:2", "message", '{"n": 2}'),
        ("r-1:3", "message", '{"n": 3}'),
    ]
    assert [parse_event_id(i) for i, _, _ in parse(list(stream.events(after=0)))[1:]] == [
        ("r-1", 1),
        ("r-1", 2),
        ("r-1", 3),
    ]


def test_push_after_the_end_is_refused_and_last_ends_the_stream():
    stream = EventStream("s")
    assert stream.push(b"1", last=True)
    assert stream.ended
    assert stream.push(b"2") is False
    assert parse(list(stream.events()))[1:] == [("s:1", "message", "1")]


def test_resuming_after_an_id_replays_only_later_events():
    stream = EventStream("s")
    for n in range(1, 6):
        stream.push(str(n).encode())
    stream.end()
    assert [d for _, _, d in parse(list(stream.events(after=3)))] == ["", "4", "5"]
    assert [d for _, _, d in parse(list(stream.events(after=5)))] == [""]


def test_the_replay_buffer_keeps_only_the_last_events():
    stream = EventStream("s", replay=3)
    for n in range(1, 11):
        stream.push(str(n).encode())
    stream.end()
    # a client that last saw event 2 gets what is left (8, 9, 10), never the evicted ones
    assert [(i, d) for i, _, d in parse(list(stream.events(after=2)))[1:]] == [
        ("s:8", "8"),
        ("s:9", "9"),
        ("s:10", "10"),
    ]


def test_a_new_consumer_continues_after_what_the_last_one_delivered():
    stream = EventStream("s")
    for data in (b"a", b"b", b"c"):
        stream.push(data)
    first = take(stream, 3)  # priming, "a", "b"
    assert [d for _, _, d in parse(first)] == ["", "a", "b"]
    stream.end()
    rest = parse(list(stream.events()))
    # "a" counts as delivered (the consumer asked for more after it); "b" was the last chunk
    # taken before the consumer went away, so it may never have reached the client: sent again
    assert rest[0] == ("s:1", "message", "")
    assert [d for _, _, d in rest[1:]] == ["b", "c"]


def test_has_consumer_while_iterating_only():
    stream = EventStream("s")
    assert not stream.has_consumer
    events = stream.events()
    next(events)
    assert stream.has_consumer
    events.close()
    assert not stream.has_consumer


def test_drained_once_ended_with_nothing_after_the_position():
    stream = EventStream("s")
    stream.push(b"a")
    assert not stream.drained(1)  # not ended: more may come
    stream.end()
    assert stream.drained(1) and stream.drained(5)
    assert not stream.drained(0)  # event 1 is still to be delivered


def test_an_idle_stream_sends_keep_alive_comments():
    stream = EventStream("s")
    chunks = take(stream, 3, keepalive=0.01)
    assert chunks[1:] == [b": keep-alive\n\n", b": keep-alive\n\n"]
    assert parse(chunks) == [("s:0", "message", "")]  # comments are no events


def test_stop_ends_the_iteration_after_the_pending_events():
    stream = EventStream("s")
    stop = threading.Event()
    stream.push(b"a")
    stop.set()
    assert [d for _, _, d in parse(list(stream.events(stop=stop, keepalive=WAIT)))] == ["", "a"]
    assert not stream.ended  # a stopped consumer does not end the stream
    stream.push(b"b")
    stream.end()
    assert [d for _, _, d in parse(list(stream.events()))] == ["", "b"]


def test_until_ends_the_iteration_and_later_events_stay_for_the_next_consumer():
    stream = EventStream("s")
    stream.push(b"a")
    started = time.monotonic()
    got = list(stream.events(until=time.monotonic() + 0.05, keepalive=WAIT))
    assert time.monotonic() - started < WAIT
    assert [d for _, _, d in parse(got)] == ["", "a"]
    stream.push(b"b")
    stream.end()
    assert [d for _, _, d in parse(list(stream.events()))] == ["", "b"]


def test_a_blocked_consumer_wakes_for_an_event_pushed_from_another_thread():
    stream = EventStream("s")
    events = stream.events(keepalive=WAIT * 2)
    next(events)  # priming
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(next(events)))
    reader.start()
    wait_until(lambda: stream.has_consumer, "the consumer to iterate")
    stream.push(b"wake")
    reader.join(WAIT)
    assert not reader.is_alive()
    events.close()
    assert parse([b"id: s:0\n" + PRIMING, *got])[1] == ("s:1", "message", "wake")


def test_end_lets_a_blocked_consumer_finish():
    stream = EventStream("s")
    events = stream.events(keepalive=WAIT * 2)
    next(events)
    done = threading.Event()

    def drain() -> None:
        for _ in events:
            pass
        done.set()

    reader = threading.Thread(target=drain)
    reader.start()
    stream.end()
    reader.join(WAIT)
    assert done.is_set()


def test_wait_for_event_returns_each_undelivered_event_once():
    stream = EventStream("s")
    stream.push(b"a")
    stream.push(b"b")
    assert stream.wait_for_event(WAIT) == b"a"
    assert stream.wait_for_event(WAIT) == b"b"
    assert stream.wait_for_event(0.01) is None  # timed out
    stream.end()
    assert stream.wait_for_event(WAIT) is None  # ended without one
    assert [d for _, _, d in parse(list(stream.events()))] == [""]  # both were delivered already


def test_exhausted_only_once_the_last_event_was_taken():
    stream = EventStream("s")
    stream.push(b'{"id":1}', last=True)
    assert stream.ended and not stream.exhausted  # the response is still to be taken
    assert stream.wait_for_event(0) == b'{"id":1}'
    assert stream.exhausted


class _AnswerAfterTheSlice(EventStream):
    """A stream whose first wait times out just as the response arrives and ends it: the
    interleaving of a slow handler finishing at the end of a disconnect-poll slice."""

    def __init__(self) -> None:
        super().__init__("r")
        self.waits = 0

    def wait_for_event(self, timeout: float) -> bytes | None:
        self.waits += 1
        data = super().wait_for_event(0)
        if self.waits == 1:
            self.push(b'{"jsonrpc":"2.0","id":1,"result":{}}', last=True)
        return data


def test_a_response_that_ends_the_stream_right_after_a_poll_slice_is_answered():
    """StatelessRequest.first_event polls in slices; a response that arrives (ending the
    stream) after a slice ran out but before the loop looks at the stream must be returned,
    not lost (it once was: the POST got a 503 'no answer within request_timeout')."""
    from types import SimpleNamespace

    from mcp_sync.http.stateless import StatelessRequest

    served = SimpleNamespace(stream=_AnswerAfterTheSlice(), client_gone=False)
    first = StatelessRequest.first_event(served, 5.0, lambda: False)  # type: ignore[arg-type]
    assert first == b'{"jsonrpc":"2.0","id":1,"result":{}}'
    assert not served.client_gone


def test_final_delivered_only_once_the_last_event_was_handed_out():
    stream = EventStream("s")
    stream.push(b"note")
    stream.push(b"answer", last=True)
    assert not stream.final_delivered  # pushed, not handed out
    assert stream.wait_for_event(0) == b"note"
    assert not stream.final_delivered  # the one handed out is not the last
    assert stream.wait_for_event(0) == b"answer"
    assert stream.final_delivered
    ended = EventStream("e")
    ended.push(b"note")
    ended.end()  # cancelled: no last event, ever
    assert ended.wait_for_event(0) == b"note"
    assert ended.exhausted and not ended.final_delivered
