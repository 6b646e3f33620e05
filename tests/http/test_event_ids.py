"""``parse_event_id``: the ``Last-Event-ID`` a client sends back is untrusted input."""

from __future__ import annotations

import random

import pytest

from mcp_sync.http.sse import MAX_EVENT_NUMBER_DIGITS, parse_event_id


def test_event_ids_this_library_makes_parse_back():
    assert parse_event_id("r-abc:12") == ("r-abc", 12)
    assert parse_event_id("a:b:0") == ("a:b", 0)
    assert parse_event_id("s:" + "9" * MAX_EVENT_NUMBER_DIGITS) == (
        "s",
        int("9" * MAX_EVENT_NUMBER_DIGITS),
    )


@pytest.mark.parametrize(
    "value",
    [
        "x:\u00b2",
        "s:" + "9" * 5000,
        "s:" + "1" * (MAX_EVENT_NUMBER_DIGITS + 1),
        "s:\u0661",
        "s:-1",
        "s:1_0",
        "s: 1",
        "s:",
        "nocolon",
        "",
        ":1",
    ],
)
def test_malformed_event_ids_are_refused(value):
    assert parse_event_id(value) is None


def test_parse_event_id_never_raises_on_random_input():
    rng = random.Random(10)
    alphabet = ":0123456789-_ar \x00\t\u00b2\u0661\u2167\uff11\ud7ff\U0001d7ce" + "9" * 20
    for _ in range(5000):
        length = rng.choice([0, 1, 2, 5, 20, 100])
        value = "".join(rng.choice(alphabet) for _ in range(length))
        for candidate in (value, value + ":" + "9" * rng.randrange(1, 6000)):
            parsed = parse_event_id(candidate)  # never raises
            if parsed is not None:
                stream, _sep, digits = candidate.rpartition(":")
                assert parsed == (stream, int(digits))
                assert (
                    digits.isascii() and digits.isdigit() and len(digits) <= MAX_EVENT_NUMBER_DIGITS
                )


def test_request_streams_are_named_without_random_bytes_and_never_twice(monkeypatch):
    # a counter names them (every 2026-07-28 request makes one): no system call per request,
    # and still an id of one session's stream is nobody else's
    from mcp_sync.http import session_transport

    def no_random(*_args: object) -> str:
        raise AssertionError("a request stream drew random bytes")

    monkeypatch.setattr(session_transport.secrets, "token_hex", no_random)
    first, second = (session_transport.HttpSessionTransport(name) for name in ("a", "b"))
    streams = [t.open_request_stream(n) for t in (first, second) for n in (1, 2)]
    ids = [stream.id for stream in streams if stream is not None]
    assert len(set(ids)) == 4
    assert all(parse_event_id(f"{i}:0") == (i, 0) for i in ids)
    assert first.stream(ids[2]) is None and second.stream(ids[0]) is None
