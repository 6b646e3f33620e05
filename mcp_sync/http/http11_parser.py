"""A sans-IO parser of HTTP/1.1 responses, for the client's own plain ``http://`` path.

Bytes go in (:meth:`ResponseParser.feed`, :meth:`ResponseParser.feed_eof`), events come out
(:meth:`ResponseParser.next_event`): one :class:`ResponseHead`, then body pieces as
``bytes``, then :class:`ResponseEnd`; :data:`NEED_DATA` when more bytes are needed. It does
no I/O and starts no thread, so the same parser serves a blocking reader and a selector.

It is strict, and bounded by :data:`MAX_HEAD_BYTES` and :data:`MAX_HEADERS`:

* a status line ``HTTP/1.0`` or ``HTTP/1.1``, three digits and a reason; header lines
  ``name: value`` with token names, CRLF line ends, no obsolete line folding;
* bodies delimited by ``Content-Length`` (ASCII digits; repeated only with one value),
  by ``Transfer-Encoding: chunked`` (chunk extensions ignored, trailers read and kept), or
  by the end of the connection (then never reused);
* no body for ``1xx`` (skipped: the next head follows), ``204``, ``304`` and the answer to
  ``HEAD``; a ``101`` (nobody asked to switch protocols) is an error;
* the connection may serve another request only if the response said nothing against it
  (``Connection: close``; HTTP/1.0 without ``Connection: keep-alive``) and ended with its
  body: :attr:`ResponseEnd.keep_alive`.

Anything else -- a malformed line, a bad chunk size, both ``Transfer-Encoding`` and
``Content-Length``, an end of input inside a response -- raises :class:`HttpProtocolError`
(:class:`NoResponse` when the connection ended before the first byte of a response).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..errors import HttpProtocolError, NoResponse

__all__ = [
    "MAX_CHUNK_LINE_BYTES",
    "MAX_HEADERS",
    "MAX_HEAD_BYTES",
    "NEED_DATA",
    "Headers",
    "HttpProtocolError",
    "NoResponse",
    "ResponseEnd",
    "ResponseHead",
    "ResponseParser",
]

MAX_HEAD_BYTES = 64 * 1024
"""The largest response head (status line and headers, or a chunked body's trailers)."""

MAX_HEADERS = 128
"""The most header lines in one response head (or trailer section)."""

MAX_CHUNK_LINE_BYTES = 4096
"""The longest chunk-size line (with its extensions) of a chunked body."""


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA = _NeedData()
"""What :meth:`ResponseParser.next_event` returns when it needs more bytes."""


class Headers(Mapping[str, str]):
    """Response headers, looked up without regard to case (the values of a repeated header
    joined with ``", "``); :attr:`raw` keeps every line as it came."""

    __slots__ = ("_map", "raw")

    def __init__(self, raw: list[tuple[str, str]]) -> None:
        self.raw = raw
        merged = {name.lower(): value for name, value in raw}
        if len(merged) < len(raw):  # a repeated header: its values joined, in order
            merged = {}
            for name, value in raw:
                key = name.lower()
                merged[key] = f"{merged[key]}, {value}" if key in merged else value
        self._map = merged

    def __getitem__(self, name: str) -> str:
        return self._map[name.lower()]

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self._map.get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._map

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __repr__(self) -> str:
        return f"Headers({self.raw!r})"


@dataclass(frozen=True)
class ResponseHead:
    """The status line and headers of a (final) response."""

    status: int
    reason: str
    http_version: str  # "1.0" or "1.1"
    headers: Headers


@dataclass(frozen=True)
class ResponseEnd:
    """The end of a response's body."""

    keep_alive: bool
    """True if the connection may carry another request."""
    trailers: Headers | None = None
    """The trailer fields of a chunked body (``None`` for other bodies)."""


_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: ([^\x00-\x08\x0a-\x1f\x7f]*))?")
_HEADER_LINE = re.compile(
    rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([^\x00-\x08\x0a-\x1f\x7f]*?)[ \t]*"
)
# the same lines, over a whole header section decoded as Latin-1 (a token is ASCII), each
# line ended by CRLF: one match checks them all, one findall reads the (name, value) pairs
_HEADER_SECTION = re.compile(r"(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\x00-\x08\x0a-\x1f\x7f]*\r\n)*")
_HEADER_PAIR = re.compile(
    r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([^\x00-\x08\x0a-\x1f\x7f]*?)[ \t]*\r\n"
)
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\x00-\x08\x0a-\x1f\x7f]*)?")
_VERSIONS = {b"0": "1.0", b"1": "1.1"}

# states
_HEAD, _LENGTH, _CHUNK_SIZE_LINE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE, _DONE = range(8)


class ResponseParser:
    """Parses one response (see the module's description); :meth:`next_request` readies it
    for the next response on the same connection.

    Args:
        method: the request's method (the answer to ``HEAD`` has no body).
        max_head_bytes: bound of the head and of the trailers (:data:`MAX_HEAD_BYTES`).
        max_headers: bound of the header lines (:data:`MAX_HEADERS`).
    """

    def __init__(
        self,
        method: str = "GET",
        *,
        max_head_bytes: int = MAX_HEAD_BYTES,
        max_headers: int = MAX_HEADERS,
    ) -> None:
        self._max_head = max_head_bytes
        self._max_headers = max_headers
        self._buf = b""
        self._eof = False
        self._received = False  # a byte of this response arrived
        self.next_request(method)

    def next_request(self, method: str) -> None:
        """Expect the answer to a new request (``method``) on the same connection."""
        if self._buf:
            raise HttpProtocolError("bytes after the end of the previous response")
        self._head_request = method.upper() == "HEAD"
        self._state = _HEAD
        self._received = False
        self._remaining = 0
        self._keep_alive = True
        self.head: ResponseHead | None = None

    @property
    def received_any(self) -> bool:
        """True once a byte of the current response arrived."""
        return self._received

    @property
    def done(self) -> bool:
        """True once the current response ended (:class:`ResponseEnd` was returned)."""
        return self._state == _DONE

    @property
    def leftover(self) -> bool:
        """True if bytes beyond the end of the response were received."""
        return bool(self._buf)

    def feed(self, data: bytes) -> None:
        """Add bytes received from the connection."""
        if self._eof:
            raise HttpProtocolError("bytes fed after the end of the connection")
        if data:
            self._received = True
            self._buf = self._buf + data if self._buf else data

    def feed_eof(self) -> None:
        """The connection ended (the server closed it)."""
        self._eof = True

    def next_event(self) -> ResponseHead | bytes | ResponseEnd | _NeedData:
        """The next event, or :data:`NEED_DATA`; raises :class:`HttpProtocolError`."""
        state = self._state
        if state == _LENGTH:
            return self._length_body()
        if state == _HEAD:
            return self._head()
        if state == _UNTIL_CLOSE:
            if self._buf:
                data, self._buf = self._buf, b""
                return data
            if self._eof:
                return self._end(keep_alive=False)
            return NEED_DATA
        if state == _DONE:
            raise HttpProtocolError("the response has ended")
        return self._chunked()

    # -- head -------------------------------------------------------------------------------
    def _head(self) -> ResponseHead | bytes | ResponseEnd | _NeedData:
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > self._max_head:
                    raise HttpProtocolError(f"response head over {self._max_head} bytes")
                if self._eof:
                    if not self._buf and not self._received:
                        raise NoResponse("the server closed the connection without a response")
                    raise HttpProtocolError("the connection ended inside the response head")
                return NEED_DATA
            if end > self._max_head:
                raise HttpProtocolError(f"response head over {self._max_head} bytes")
            block, self._buf = self._buf[:end], self._buf[end + 4 :]
            status_end = block.find(b"\r\n")
            match = _STATUS_LINE.fullmatch(block if status_end < 0 else block[:status_end])
            if match is None:
                first = block if status_end < 0 else block[:status_end]
                raise HttpProtocolError(f"malformed status line {first[:80]!r}")
            status = int(match.group(2))
            if status < 100:
                raise HttpProtocolError(f"status {status} is out of range")
            headers = Headers([]) if status_end < 0 else self._header_lines(block[status_end + 2 :])
            if status == 101:
                raise HttpProtocolError("unexpected 101 Switching Protocols")
            if status < 200:
                continue  # an interim response (100 Continue, 103 Early Hints): skip it
            version = _VERSIONS[match.group(1)]
            head = ResponseHead(status, (match.group(3) or b"").decode("latin-1"), version, headers)
            self.head = head
            self._body_framing(head)
            return head

    def _header_lines(self, section: bytes) -> Headers:
        """The header lines of ``section`` (CRLF between them, none after the last)."""
        if section.count(b"\r\n") >= self._max_headers:
            raise HttpProtocolError(f"more than {self._max_headers} header lines")
        text = section.decode("latin-1") + "\r\n"
        if _HEADER_SECTION.fullmatch(text) is None:
            for line in section.split(b"\r\n"):
                if _HEADER_LINE.fullmatch(line) is None:
                    raise HttpProtocolError(f"malformed header line {line[:80]!r}")
            raise AssertionError("unreachable")  # pragma: no cover - the section is one of them
        return Headers(_HEADER_PAIR.findall(text))

    def _body_framing(self, head: ResponseHead) -> None:
        headers = head.headers
        connection = headers.get("connection")
        if connection is None:
            self._keep_alive = head.http_version != "1.0"
        else:
            tokens = {t.strip().lower() for t in connection.split(",")}
            if head.http_version == "1.0":
                self._keep_alive = "keep-alive" in tokens
            else:
                self._keep_alive = "close" not in tokens
        if self._head_request or head.status in (204, 304):
            self._state = _LENGTH
            self._remaining = 0
            return
        coding = headers.get("transfer-encoding")
        length = headers.get("content-length")  # repeated: the values joined with ", "
        if coding is not None:
            if length is not None:
                raise HttpProtocolError("both Transfer-Encoding and Content-Length")
            if coding.strip().lower() != "chunked" or head.http_version == "1.0":
                raise HttpProtocolError(f"unsupported Transfer-Encoding {coding!r}")
            self._state = _CHUNK_SIZE_LINE
            return
        if length is not None:
            if "," in length:
                values = {v.strip() for v in length.split(",")}
                value = values.pop() if len(values) == 1 else ""
            else:
                value = length.strip()
            if not (value.isascii() and value.isdigit()) or len(value) > 18:
                raise HttpProtocolError(f"invalid Content-Length {length!r}")
            self._state = _LENGTH
            self._remaining = int(value)
            return
        self._state = _UNTIL_CLOSE
        self._keep_alive = False

    # -- bodies -----------------------------------------------------------------------------
    def _end(self, *, keep_alive: bool, trailers: Headers | None = None) -> ResponseEnd:
        self._state = _DONE
        return ResponseEnd(keep_alive and self._keep_alive and not self._buf, trailers)

    def _length_body(self) -> bytes | ResponseEnd | _NeedData:
        if self._remaining == 0:
            return self._end(keep_alive=True)
        data = self._counted_piece()
        if data is not None:
            return data
        if self._eof:
            raise HttpProtocolError(
                f"the connection ended {self._remaining} bytes before the body's end"
            )
        return NEED_DATA

    def _chunked(self) -> bytes | ResponseEnd | _NeedData:
        while True:
            state = self._state
            if state == _CHUNK_DATA:
                if self._remaining:
                    data = self._counted_piece()
                    if data is not None:
                        return data
                    if self._eof:
                        raise HttpProtocolError("the connection ended inside a chunk")
                    return NEED_DATA
                self._state = _CHUNK_END
            elif state == _CHUNK_END:
                if len(self._buf) < 2:
                    return self._starve()
                if self._buf[:2] != b"\r\n":
                    raise HttpProtocolError("a chunk does not end with CRLF")
                self._buf = self._buf[2:]
                self._state = _CHUNK_SIZE_LINE
            elif state == _CHUNK_SIZE_LINE:
                end = self._buf.find(b"\r\n")
                if end < 0:
                    if len(self._buf) > MAX_CHUNK_LINE_BYTES:
                        raise HttpProtocolError("chunk-size line too long")
                    return self._starve()
                line, self._buf = self._buf[:end], self._buf[end + 2 :]
                match = _CHUNK_SIZE.fullmatch(line)
                if match is None or end > MAX_CHUNK_LINE_BYTES:
                    raise HttpProtocolError(f"invalid chunk size {line[:40]!r}")
                size = int(match.group(1), 16)
                if size == 0:
                    self._state = _TRAILERS
                else:
                    self._remaining = size
                    self._state = _CHUNK_DATA
            else:  # _TRAILERS
                if self._buf.startswith(b"\r\n"):
                    self._buf = self._buf[2:]
                    return self._end(keep_alive=True, trailers=Headers([]))
                end = self._buf.find(b"\r\n\r\n")
                if end < 0 or end > self._max_head:
                    if len(self._buf) > self._max_head or end > self._max_head:
                        raise HttpProtocolError(f"trailers over {self._max_head} bytes")
                    return self._starve()
                block, self._buf = self._buf[:end], self._buf[end + 4 :]
                trailers = self._header_lines(block)
                return self._end(keep_alive=True, trailers=trailers)

    def _counted_piece(self) -> bytes | None:
        """Up to the ``_remaining`` bytes of a counted body (or chunk) from the buffer;
        ``None`` if the buffer is empty."""
        remaining = self._remaining
        buf = self._buf
        if not buf:
            return None
        if len(buf) <= remaining:
            self._buf = b""
            self._remaining = remaining - len(buf)
            return buf
        self._buf = buf[remaining:]
        self._remaining = 0
        return buf[:remaining]

    def _starve(self) -> _NeedData:
        if self._eof:
            raise HttpProtocolError("the connection ended inside a chunked body")
        return NEED_DATA
