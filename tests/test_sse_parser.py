"""``SseParser`` and ``format_event`` without I/O: the SSE rules of the HTML standard's
``text/event-stream`` section, fed as whole lines, as bytes split anywhere, and as hostile input."""

from __future__ import annotations

import pytest

from mcp_sync.http.sse import Oversize, SseParser, format_event


def feed_all(parser: SseParser, chunks: list[bytes]) -> list[object]:
    return [event for chunk in chunks for event in parser.feed_bytes(chunk)]


def every_split(stream: bytes) -> list[list[bytes]]:
    """``stream`` cut in two at every position, and cut into single bytes."""
    cuts = [[stream[:i], stream[i:]] for i in range(len(stream) + 1)]
    return [*cuts, [stream[i : i + 1] for i in range(len(stream))]]


# -- line endings and chunking -------------------------------------------------------------------
@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_ends_a_line(end):
    parser = SseParser()
    stream = b"id: 1" + end + b"data: one" + end + end + b"data: two" + end + end
    assert parser.feed_bytes(stream) == [("1", "message", "one"), ("1", "message", "two")]


def test_an_event_split_at_any_byte_parses_the_same():
    stream = b'event: note\r\nid: s:7\r\ndata: {"a":\r\ndata:  1}\r\n\r\n: keep-alive\r\n\r\ndata: last\n\n'
    expected = [("s:7", "note", '{"a":\n 1}'), ("s:7", "message", "last")]
    for chunks in every_split(stream):
        assert feed_all(SseParser(), chunks) == expected, chunks


def test_a_crlf_split_between_two_chunks_is_one_line_end():
    parser = SseParser()
    assert parser.feed_bytes(b"data: a\r") == []
    # the LF that completes the CRLF is not a second (blank) line: no event yet
    assert parser.feed_bytes(b"\ndata: b\r") == []
    assert parser.feed_bytes(b"\n\r\n") == [(None, "message", "a\nb")]


def test_a_cr_at_a_chunk_end_followed_by_a_blank_line_still_dispatches():
    parser = SseParser()
    assert parser.feed_bytes(b"data: a\r") == []
    assert parser.feed_bytes(b"\r") == [(None, "message", "a")]  # CR CR: line end, then blank line


def test_bytes_without_a_line_end_are_kept_until_it_comes():
    parser = SseParser()
    assert parser.feed_bytes(b"data: par") == []
    assert parser.feed_bytes(b"tial") == []
    assert parser.feed_bytes(b"\n") == []
    assert parser.feed_bytes(b"\n") == [(None, "message", "partial")]


# -- fields ----------------------------------------------------------------------------------------
def test_comments_are_ignored_and_never_dispatch():
    parser = SseParser()
    assert parser.feed_bytes(b": just a comment\n\n:another\n\n") == []
    assert parser.feed_bytes(b"data: x\n: inside an event\ndata: y\n\n") == [
        (None, "message", "x\ny")
    ]


def test_multi_line_data_is_joined_with_line_feeds():
    parser = SseParser()
    assert parser.feed_bytes(b"data: one\ndata: two\ndata:\ndata: four\n\n") == [
        (None, "message", "one\ntwo\n\nfour")
    ]


def test_only_one_space_after_the_colon_is_removed():
    parser = SseParser()
    assert parser.feed_bytes(b"data:tight\n\ndata:  two spaces\n\n") == [
        (None, "message", "tight"),
        (None, "message", " two spaces"),
    ]


def test_a_field_name_alone_has_an_empty_value():
    parser = SseParser()
    assert parser.feed_bytes(b"data\n\n") == [(None, "message", "")]


def test_a_blank_line_without_data_dispatches_nothing_and_resets_the_event_type():
    parser = SseParser()
    assert parser.feed_bytes(b"event: custom\n\n") == []
    assert parser.feed_bytes(b"data: x\n\n") == [(None, "message", "x")]


def test_the_event_type_applies_to_one_event_only():
    parser = SseParser()
    assert parser.feed_bytes(b"event: first\ndata: a\n\ndata: b\n\nevent:\ndata: c\n\n") == [
        (None, "first", "a"),
        (None, "message", "b"),
        (None, "message", "c"),  # an empty event type is "message"
    ]


def test_unknown_fields_are_ignored():
    parser = SseParser()
    assert parser.feed_bytes(b"foo: bar\ndata: x\nDATA: not data\nData: nor this\n\n") == [
        (None, "message", "x")
    ]


# -- ids -------------------------------------------------------------------------------------------
def test_the_last_event_id_carries_over_to_later_events():
    parser = SseParser()
    assert parser.feed_bytes(b"id: s:1\ndata: a\n\ndata: b\n\n") == [
        ("s:1", "message", "a"),
        ("s:1", "message", "b"),
    ]
    assert parser.last_event_id == "s:1"


def test_an_id_without_data_updates_the_last_event_id_without_an_event():
    parser = SseParser()
    assert parser.feed_bytes(b"id: s:0\ndata: \n\n") == [("s:0", "message", "")]  # a priming event
    assert parser.feed_bytes(b"id: s:5\n\n") == []
    assert parser.last_event_id == "s:5"


def test_an_empty_id_resets_the_last_event_id():
    parser = SseParser()
    parser.feed_bytes(b"id: s:1\ndata: a\n\n")
    assert parser.feed_bytes(b"id\ndata: b\n\n") == [("", "message", "b")]
    assert parser.last_event_id == ""


def test_an_id_containing_nul_is_ignored():
    parser = SseParser()
    parser.feed_bytes(b"id: good\n\n")
    assert parser.feed_bytes(b"id: ba\x00d\ndata: x\n\n") == [("good", "message", "x")]
    assert parser.last_event_id == "good"


# -- retry -----------------------------------------------------------------------------------------
def test_retry_takes_ascii_digits_only():
    parser = SseParser()
    parser.feed_bytes(b"retry: 1500\n\n")
    assert parser.retry_ms == 1500
    for bad in (
        b"retry: 12a\n",
        b"retry: -1\n",
        b"retry: 1.5\n",
        b"retry:\n",
        b"retry: \n",
        b"retry:  5\n",
    ):
        assert parser.feed_bytes(bad) == []
        assert parser.retry_ms == 1500, bad
    parser.feed_bytes(b"retry:0\n")
    assert parser.retry_ms == 0


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "\uff11"])
def test_retry_with_non_ascii_digits_is_ignored(value):
    parser = SseParser()
    parser.feed_bytes(b"retry: 10\n")
    assert parser.feed_bytes(f"retry: {value}\ndata: x\n\n".encode()) == [(None, "message", "x")]
    assert parser.retry_ms == 10


# -- hostile bytes and sizes -----------------------------------------------------------------------
def test_invalid_utf8_is_replaced_not_raised():
    parser = SseParser()
    assert parser.feed_bytes(b"data: \xff\xfe ok\n\n") == [(None, "message", "\ufffd\ufffd ok")]


def test_an_oversize_event_whose_id_came_first_is_reported_with_its_id():
    parser = SseParser(max_event_bytes=64)
    out = parser.feed_bytes(b"id: big\ndata: " + b"x" * 100)
    assert len(out) == 1 and isinstance(out[0], Oversize) and out[0].id_known
    assert parser.last_event_id == "big"
    assert parser.feed_bytes(b"x" * 1000 + b"\n\nid: next\ndata: fine\n\n") == [
        ("next", "message", "fine")
    ]


def test_the_lines_after_an_oversize_line_belong_to_the_discarded_event():
    parser = SseParser(max_event_bytes=64)
    assert isinstance(parser.feed_bytes(b"id: big\ndata: " + b"x" * 100)[0], Oversize)
    assert parser.feed_bytes(b"x" * 1000 + b"\ndata: more\n\nid: next\ndata: fine\n\n") == [
        ("next", "message", "fine")
    ]


def test_an_oversize_event_split_at_any_byte_is_discarded_whole():
    stream = (
        b"id: a\ndata: " + b"x" * 40 + b"\r\ndata: more\r\nevent: odd\r\n\r\ndata: fine\r\n\r\n"
    )
    for chunks in every_split(stream):
        out = feed_all(SseParser(max_event_bytes=32), chunks)
        assert len(out) == 2 and isinstance(out[0], Oversize) and out[0].id_known, chunks
        assert out[1] == ("a", "message", "fine"), chunks


def test_an_id_line_after_the_overflow_still_sets_the_last_event_id():
    parser = SseParser(max_event_bytes=32)
    out = parser.feed_bytes(b"data: " + b"x" * 40 + b"\nid: late\ndata: more\n")
    assert len(out) == 1 and isinstance(out[0], Oversize) and not out[0].id_known
    assert parser.last_event_id == "late"
    assert parser.feed_bytes(b"\ndata: fine\n\n") == [("late", "message", "fine")]


def test_the_rest_of_the_overflowing_line_is_not_read_as_a_field():
    parser = SseParser(max_event_bytes=16)
    assert isinstance(parser.feed_bytes(b"data: " + b"x" * 20)[0], Oversize)
    # the same line goes on with bytes that would be an id line on their own
    assert parser.feed_bytes(b"id: forged") == []
    assert parser.feed_bytes(b"\n\ndata: ok\n\n") == [(None, "message", "ok")]
    assert parser.last_event_id is None


def test_a_long_line_inside_an_oversize_event_is_dropped_without_ending_it():
    parser = SseParser(max_event_bytes=16)
    assert isinstance(parser.feed_bytes(b"data: " + b"x" * 20 + b"\n")[0], Oversize)
    assert (
        feed_all(parser, [b"id: " + b"9" * 30, b"9" * 30, b"\n", b"data: still the big one\n"])
        == []
    )
    assert parser.last_event_id is None  # an id line longer than the limit is not kept
    assert parser.feed_bytes(b"\ndata: ok\n\n") == [(None, "message", "ok")]


def test_an_event_exactly_at_the_limit_is_kept_one_byte_more_is_not():
    line = (
        b"data: " + b"y" * 10
    )  # the limit counts a line's bytes, and its line end once another line follows
    parser = SseParser(max_event_bytes=len(line))
    assert parser.feed_bytes(line + b"\n\n") == [(None, "message", "y" * 10)]
    parser = SseParser(max_event_bytes=len(line) - 1)
    out = parser.feed_bytes(line + b"\n\n")
    assert len(out) == 1 and isinstance(out[0], Oversize)
    assert parser.feed_bytes(b"data: next\n\n") == [(None, "message", "next")]


def test_many_small_lines_add_up_to_the_limit():
    parser = SseParser(max_event_bytes=50)
    out = feed_all(parser, [b"data: 12345678\n"] * 10 + [b"\n", b"data: ok\n\n"])
    assert [type(e) for e in out] == [Oversize, tuple]
    assert out[1] == (None, "message", "ok")


def test_without_a_limit_a_large_event_is_kept_whole():
    parser = SseParser()
    data = b"z" * 200_000
    assert feed_all(parser, [b"data: ", data[:70_000], data[70_000:], b"\n\n"]) == [
        (None, "message", data.decode())
    ]


def test_new_stream_forgets_a_broken_line_but_keeps_id_and_retry():
    parser = SseParser()
    assert parser.feed_bytes(b"retry: 7\nid: s:3\ndata: kept?\ndata: hal") == []
    parser.new_stream()
    assert parser.feed_bytes(b"f\n\n") == []  # the rest of the broken line is a line of its own
    assert parser.feed_bytes(b"data: fresh\n\n") == [("s:3", "message", "fresh")]
    assert parser.retry_ms == 7


def test_new_stream_ends_an_oversize_discard():
    parser = SseParser(max_event_bytes=10)
    assert isinstance(parser.feed_bytes(b"data: " + b"q" * 50)[0], Oversize)
    parser.new_stream()
    assert parser.feed_bytes(b"data: ok\n\n") == [(None, "message", "ok")]


# -- feed (lines) and format_event -----------------------------------------------------------------
def test_feed_takes_lines_without_their_ends():
    parser = SseParser()
    assert [parser.feed(line) for line in ["id: 9", "event: e", "data: a", "data: b", ""]] == [
        None,
        None,
        None,
        None,
        ("9", "e", "a\nb"),
    ]


def test_format_event_parses_back_to_the_same_event():
    raw = format_event("s:12", b'{"jsonrpc": "2.0", "method": "x"}\n')
    assert raw == b'event: message\nid: s:12\ndata: {"jsonrpc": "2.0", "method": "x"}\n\n'
    parser = SseParser()
    assert parser.feed_bytes(raw) == [("s:12", "message", '{"jsonrpc": "2.0", "method": "x"}')]
