"""The sans-IO HTTP/1.1 response parser of the plain ``http://`` client path: every response
fed in every split gives the same events, and malformed or truncated input is an error."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pytest

from mcp_sync.http.http11_parser import (
    NEED_DATA,
    HttpProtocolError,
    NoResponse,
    ResponseEnd,
    ResponseHead,
    ResponseParser,
)


@dataclass
class Parsed:
    head: ResponseHead
    body: bytes
    end: ResponseEnd
    pieces: int  # body events


def parse(chunks: Iterable[bytes], method: str = "POST", *, eof: bool = False) -> Parsed:
    """Feed ``chunks`` one by one (then the end of input if ``eof``), collecting events."""
    parser = ResponseParser(method)
    head: ResponseHead | None = None
    body: list[bytes] = []
    pending = list(chunks)
    while True:
        event = parser.next_event()
        if event is NEED_DATA:
            if pending:
                parser.feed(pending.pop(0))
                continue
            assert eof, "the parser wants more than the whole response"
            parser.feed_eof()
            continue
        if isinstance(event, ResponseHead):
            assert head is None
            head = event
        elif isinstance(event, bytes):
            assert head is not None and event
            body.append(event)
        else:
            assert isinstance(event, ResponseEnd) and head is not None
            assert parser.done
            return Parsed(head, b"".join(body), event, len(body))


def splits(raw: bytes) -> Iterable[list[bytes]]:
    """``raw`` in two pieces at every byte boundary, in three around the middle, and byte by
    byte."""
    for cut in range(1, len(raw)):
        yield [raw[:cut], raw[cut:]]
    middle = len(raw) // 2
    for cut in range(1, middle):
        yield [raw[:cut], raw[cut:middle], raw[middle:]]
    yield [raw[i : i + 1] for i in range(len(raw))]


RESPONSES = {
    "content-length": (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
        b'{"ok":true}',
        "POST",
        False,
        b'{"ok":true}',
        True,
    ),
    "chunked with trailers": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\nA\r\n, world!!!\r\n0\r\nX-Checksum: 1\r\nX-More: 2\r\n\r\n",
        "POST",
        False,
        b"hello, world!!!",
        True,
    ),
    "chunked, an SSE stream": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"19\r\nevent: message\ndata: {}\n\n\r\n0\r\n\r\n",
        "POST",
        False,
        b"event: message\ndata: {}\n\n",
        True,
    ),
    "close-delimited": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\ndata: 2\n\n",
        "POST",
        True,
        b"data: 1\n\ndata: 2\n\n",
        False,
    ),
    "interim responses first": (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n",
        "POST",
        False,
        b"",
        True,
    ),
    "no body for HEAD": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
        "HEAD",
        False,
        b"",
        True,
    ),
    "no body for 204": (
        b"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n",
        "POST",
        False,
        b"",
        True,
    ),
    "no body for 304": (
        b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET",
        False,
        b"",
        True,
    ),
    "Connection: close": (
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        "POST",
        False,
        b"ok",
        False,
    ),
    "HTTP/1.0 kept alive": (
        b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok",
        "POST",
        False,
        b"ok",
        True,
    ),
    "HTTP/1.0 closes by default": (
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        "POST",
        False,
        b"ok",
        False,
    ),
    "HTTP/1.0 until close": (
        b"HTTP/1.0 200\r\n\r\nall of it",
        "GET",
        True,
        b"all of it",
        False,
    ),
}


@pytest.mark.parametrize("name", list(RESPONSES))
def test_a_response_parses_the_same_in_every_split(name: str) -> None:
    raw, method, eof, body, keep_alive = RESPONSES[name]
    whole = parse([raw], method, eof=eof)
    assert whole.body == body
    assert whole.end.keep_alive is keep_alive
    for pieces in splits(raw):
        parsed = parse(pieces, method, eof=eof)
        assert parsed.head == whole.head, pieces
        assert parsed.body == body, pieces
        assert parsed.end == whole.end, pieces


def test_headers_are_looked_up_without_regard_to_case_and_repeats_are_joined() -> None:
    raw = (
        b"HTTP/1.1 404 Not Found\r\nContent-TYPE:  text/plain \r\nVary: a\r\nvary: b\r\n"
        b"Content-Length: 0\r\n\r\n"
    )
    head = parse([raw]).head
    assert (head.status, head.reason, head.http_version) == (404, "Not Found", "1.1")
    assert head.headers["content-type"] == "text/plain"
    assert head.headers.get("CONTENT-TYPE") == "text/plain"
    assert head.headers.get("vary") == "a, b"
    assert "Content-Length" in head.headers and "x-missing" not in head.headers
    assert head.headers.get("x-missing", "") == ""


def test_trailers_of_a_chunked_body_are_kept() -> None:
    parsed = parse([RESPONSES["chunked with trailers"][0]])
    assert parsed.end.trailers is not None
    assert dict(parsed.end.trailers) == {"x-checksum": "1", "x-more": "2"}


def test_a_content_length_body_arrives_in_the_pieces_received() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n"
    parsed = parse([head + b"ab", b"cd", b"ef"])
    assert parsed.body == b"abcdef" and parsed.pieces == 3


def test_the_parser_is_reused_for_the_next_response_on_the_connection() -> None:
    parser = ResponseParser("POST")
    parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na")
    assert isinstance(parser.next_event(), ResponseHead)
    assert parser.next_event() == b"a"
    assert parser.next_event() == ResponseEnd(True)
    parser.next_request("POST")
    assert parser.next_event() is NEED_DATA
    assert not parser.received_any
    parser.feed(b"HTTP/1.1 204 No Content\r\n\r\n")
    assert parser.received_any
    head = parser.next_event()
    assert isinstance(head, ResponseHead) and head.status == 204


def test_bytes_after_the_response_forbid_reusing_the_connection() -> None:
    parser = ResponseParser("POST")
    parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 200 OK\r\n")
    parser.next_event()
    assert parser.next_event() == b"a"
    end = parser.next_event()
    assert end == ResponseEnd(False) and parser.leftover
    with pytest.raises(HttpProtocolError):
        parser.next_request("POST")


def errors(raw: bytes, *, eof: bool = True, method: str = "POST") -> HttpProtocolError:
    with pytest.raises(HttpProtocolError) as caught:
        parse([raw], method, eof=eof)
    return caught.value


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/2 200 OK\r\n\r\n",
        b"HTTP/1.1 20 OK\r\n\r\n",
        b"HTTP/1.1 200OK\r\n\r\n",
        b"http/1.1 200 OK\r\n\r\n",
        b"HTTP/1.1 099 Low\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nNo-Colon\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-A: nul\x00\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-A: bare\nX-B: lf\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: \xc2\xb2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 9999999999999999999\r\n\r\n",
    ],
)
def test_a_malformed_head_is_an_error(raw: bytes) -> None:
    assert not isinstance(errors(raw, eof=False), NoResponse)


def test_a_repeated_content_length_with_one_value_is_accepted() -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"
    assert parse([raw]).body == b"ok"


CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    "body",
    [
        b"xyz\r\n",  # not hex
        b"-1\r\n",
        b"+5\r\nhello\r\n0\r\n\r\n",
        b"0x5\r\nhello\r\n0\r\n\r\n",
        b"\r\n",  # no size at all
        b"11111111111111111\r\n",  # 17 hex digits
        b"5\r\nhelloX\r\n0\r\n\r\n",  # data longer than its size
        b"5\r\nhello\n0\r\n\r\n",  # no CRLF after the data
        b"0\r\nBad Trailer\r\n\r\n",
    ],
)
def test_a_bad_chunked_body_is_an_error(body: bytes) -> None:
    errors(CHUNKED + body, eof=False)


def test_a_chunk_size_line_without_end_is_bounded() -> None:
    error = errors(CHUNKED + b"5;" + b"e" * 5000, eof=False)
    assert "too long" in str(error)


def test_a_head_over_the_bound_is_an_error_before_it_ends() -> None:
    parser = ResponseParser("POST", max_head_bytes=1024)
    parser.feed(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 2000)  # no end of head in sight
    with pytest.raises(HttpProtocolError, match="over 1024 bytes"):
        parser.next_event()


def test_a_complete_head_over_the_bound_is_an_error() -> None:
    parser = ResponseParser("POST", max_head_bytes=1024)
    parser.feed(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 2000 + b"\r\n\r\n")
    with pytest.raises(HttpProtocolError, match="over 1024 bytes"):
        parser.next_event()


def test_too_many_header_lines_are_an_error() -> None:
    parser = ResponseParser("POST", max_headers=10)
    parser.feed(b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * 11 + b"\r\n")
    with pytest.raises(HttpProtocolError, match="more than 10 header lines"):
        parser.next_event()


def test_trailers_over_the_bound_are_an_error() -> None:
    parser = ResponseParser("POST", max_head_bytes=1024)
    parser.feed(CHUNKED + b"0\r\nX-Big: " + b"a" * 2000)
    assert isinstance(parser.next_event(), ResponseHead)
    with pytest.raises(HttpProtocolError, match="trailers over 1024 bytes"):
        parser.next_event()


def test_an_end_of_input_before_any_byte_is_no_response() -> None:
    assert isinstance(errors(b""), NoResponse)


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nContent-Le",  # inside the head
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        CHUNKED + b"5\r\nhel",  # inside a chunk
        CHUNKED + b"5\r\nhello",  # before the chunk's CRLF
        CHUNKED + b"5\r\nhello\r\n",  # before the next size
        CHUNKED + b"0\r\nX-A: 1\r\n",  # inside the trailers
    ],
)
def test_an_end_of_input_inside_a_response_is_an_error(raw: bytes) -> None:
    error = errors(raw)
    assert not isinstance(error, NoResponse)


def test_bytes_after_the_end_of_input_are_refused() -> None:
    parser = ResponseParser("POST")
    parser.feed_eof()
    with pytest.raises(HttpProtocolError):
        parser.feed(b"late")


def test_the_error_of_a_malformed_header_line_names_that_line() -> None:
    raw = b"HTTP/1.1 200 OK\r\nX-A: 1\r\nBad Name: x\r\nX-B: 2\r\n\r\n"
    assert "b'Bad Name: x'" in str(errors(raw, eof=False))
    trailers = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\nNo-Colon\r\n\r\n"
    )
    assert "b'No-Colon'" in str(errors(trailers, eof=False))
