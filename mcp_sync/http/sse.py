"""Server-sent events: an outgoing event stream with ids and replay, and a parser.

:class:`EventStream` is one SSE stream of the Streamable HTTP transport. Producers
:meth:`~EventStream.push` JSON-RPC messages; one consumer at a time (the HTTP response
that carries the stream) iterates it. Every event gets an id ``"<stream>:<n>"``; the last
events are kept in a bounded buffer so that a client that lost the connection can resume
with ``Last-Event-ID``.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Iterator

__all__ = [
    "EventStream",
    "MAX_EVENT_NUMBER_DIGITS",
    "Oversize",
    "SseEvent",
    "SseParser",
    "format_event",
    "parse_event_id",
]

MAX_EVENT_NUMBER_DIGITS = 18
"""The longest event number :func:`parse_event_id` accepts (a stream would need 10**18
events to get there): ``Last-Event-ID`` is a header any client can craft."""


def format_event(event_id: str, data: bytes) -> bytes:
    """One SSE ``message`` event carrying ``data`` (a JSON line without its newline)."""
    return b"event: message\nid: " + event_id.encode() + b"\ndata: " + data.rstrip(b"\n") + b"\n\n"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """Split ``"<stream>:<n>"``; ``None`` if it is not an id this module made.

    ``value`` comes from a client (``Last-Event-ID``): anything else -- non-ASCII digits
    such as ``"\u00b2"``, signs, underscores, more than :data:`MAX_EVENT_NUMBER_DIGITS`
    digits, an empty stream name -- is ``None``, never an exception.
    """
    stream, sep, number = value.rpartition(":")
    if (
        not sep
        or not stream
        or not (number.isascii() and number.isdigit())
        or len(number) > MAX_EVENT_NUMBER_DIGITS
    ):
        return None
    return stream, int(number)


class EventStream:
    """An outgoing SSE stream with a bounded replay buffer.

    Args:
        stream_id: the prefix of its event ids.
        replay: how many recent events are kept for resumption.
    """

    def __init__(self, stream_id: str, replay: int = 256) -> None:
        self.id = stream_id
        self._cond = threading.Condition()
        self._events: deque[tuple[int, bytes]] = deque(maxlen=replay)
        self._seq = 0
        self._delivered = 0
        self._ended = False
        self._final = 0  # the number of the event pushed with last=True (0: none yet)
        self._consumers = 0
        self.last_activity = time.monotonic()

    @property
    def ended(self) -> bool:
        """True once :meth:`end` was called (no more events will come)."""
        return self._ended

    @property
    def exhausted(self) -> bool:
        """True once the stream ended and :meth:`wait_for_event` has handed out every event.

        Check this, not :attr:`ended`, after a :meth:`wait_for_event` that returned
        ``None``: the last event (a response) and the end may both have come in between,
        and ``ended`` alone would lose that event."""
        with self._cond:
            return self._ended and not any(n > self._delivered for n, _ in self._events)

    @property
    def final_delivered(self) -> bool:
        """True once :meth:`wait_for_event` has handed out the event pushed with
        ``last=True`` -- so the event it returned last is that one (nothing comes after it).
        Ask it on the thread that called :meth:`wait_for_event`."""
        return 0 < self._final <= self._delivered

    @property
    def has_consumer(self) -> bool:
        """True while an HTTP response is iterating the stream."""
        return self._consumers > 0

    def drained(self, after: int) -> bool:
        """True when the stream ended and has no event after sequence number ``after``:
        resuming it would deliver nothing, ever."""
        with self._cond:
            return self._ended and self._seq <= after

    def push(self, data: bytes, *, last: bool = False) -> bool:
        """Add an event (``last=True`` also ends the stream). False if already ended."""
        with self._cond:
            if self._ended:
                return False
            self._seq += 1
            self._events.append((self._seq, data))
            if last:
                self._ended = True
                self._final = self._seq
            self.last_activity = time.monotonic()
            self._cond.notify_all()
            return True

    def end(self) -> None:
        """End the stream: consumers finish after the events already pushed."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def events(
        self,
        after: int | None = None,
        *,
        keepalive: float = 15.0,
        stop: threading.Event | None = None,
        until: float | None = None,
    ) -> Iterator[bytes]:
        """Yield formatted SSE events after sequence number ``after`` (default: the ones not
        yet delivered), and a keep-alive comment after ``keepalive`` idle seconds, until the
        stream ends, ``stop`` is set or the :func:`time.monotonic` time ``until`` passes
        (every event pushed before then is yielded first; later ones stay in the replay
        buffer for the next consumer).

        The first event is a *priming* event: an id and no data (the 2025-11-25 transport
        says a server SHOULD send one at once), so a client that loses the connection before
        the first message can still resume with ``Last-Event-ID``. It also sends the
        response headers at once.
        """
        with self._cond:
            self._consumers += 1
            position = self._delivered if after is None else after
        try:
            yield b"id: " + f"{self.id}:{position}".encode() + b"\ndata: \n\n"
            while True:
                with self._cond:
                    deadline = time.monotonic() + keepalive
                    while True:
                        pending = [(n, d) for n, d in self._events if n > position]
                        if pending:
                            break
                        if self._ended or (stop is not None and stop.is_set()):
                            return
                        now = time.monotonic()
                        if until is not None and now >= until:
                            return
                        remaining = deadline - now
                        if remaining <= 0:
                            break
                        self._cond.wait(
                            min(remaining, 0.5, until - now)
                            if until is not None
                            else min(remaining, 0.5)
                        )
                if not pending:
                    yield b": keep-alive\n\n"
                    continue
                for number, data in pending:
                    yield format_event(f"{self.id}:{number}", data)
                    position = number
                    with self._cond:
                        if number > self._delivered:
                            self._delivered = number
        finally:
            with self._cond:
                self._consumers -= 1

    def wait_ended(self, timeout: float) -> bool:
        """True once the stream has ended (waiting at most ``timeout`` seconds for it)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._ended, timeout)

    def wait_for_event(self, timeout: float) -> bytes | None:
        """For JSON (non-SSE) answers: the next undelivered event, or ``None`` once the
        stream ended without one or ``timeout`` passed."""
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                for number, data in self._events:
                    if number > self._delivered:
                        self._delivered = number
                        return data
                if self._ended:
                    return None
                remaining = end - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(min(remaining, 0.5))


class Oversize:
    """What :meth:`SseParser.feed_bytes` returns for an event larger than its limit (its data
    is discarded; the parser skips the rest of it).

    Attributes:
        id_known: True when the event's own ``id:`` line came before the overflow, so
            the parser's ``last_event_id`` already names it (a client can resume *after*
            it instead of reading the rest).
    """

    __slots__ = ("id_known",)

    def __init__(self, id_known: bool) -> None:
        self.id_known = id_known

    def __repr__(self) -> str:
        return f"Oversize(id_known={self.id_known})"


SseEvent = tuple[str | None, str, str]
"""A finished event, ``(event id, event type, data)``."""

_LINE_END = re.compile(rb"\r\n|\r|\n")


class SseParser:
    """Incremental parser of an SSE byte stream (``text/event-stream``).

    Feed it lines (without newlines, :meth:`feed`) or raw bytes as they arrive
    (:meth:`feed_bytes`); it returns ``(event_id, event_type, data)`` when an event is
    complete. Comments and unknown fields are ignored.

    Args:
        max_event_bytes: with :meth:`feed_bytes`, an event whose lines add up to more than
            this is not kept: the parser reports :class:`Oversize` once and discards the
            event's bytes as they come, up to the blank line that ends it (an ``id:`` line
            among them still sets ``last_event_id``), so memory stays bounded whatever
            the peer sends.
    """

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self._data: list[str] = []
        self._event = "message"
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None
        self.max_event_bytes = max_event_bytes
        self._size = 0  # bytes of the current event's lines so far
        self._partial: list[bytes] = []  # the start of a line whose end has not arrived
        self._partial_size = 0
        self._after_cr = False  # the last chunk ended with CR: a LF next is the same line end
        self._discarding = False  # inside an oversize event, up to its blank line
        self._line_dropped = False  # the current line's bytes are not kept
        self._id_in_event = False

    def new_stream(self) -> None:
        """A new connection begins: forget any event or line the last one broke off in the
        middle of (``last_event_id`` and ``retry_ms`` are kept, as SSE says)."""
        self._reset_event()
        self._partial, self._partial_size, self._line_dropped = [], 0, False
        self._after_cr = False
        self._discarding = False

    def feed_bytes(self, chunk: bytes) -> list[SseEvent | Oversize]:
        """Process raw bytes; returns the events they completed, in order (and an
        :class:`Oversize` at the moment an event passes ``max_event_bytes``)."""
        out: list[SseEvent | Oversize] = []
        start = 0
        if self._after_cr and chunk[:1] == b"\n":
            start = 1
        self._after_cr = False
        for match in _LINE_END.finditer(chunk, start):
            self._take(chunk[start : match.start()], out)
            line, dropped = b"".join(self._partial), self._line_dropped
            self._partial, self._partial_size, self._line_dropped = [], 0, False
            if match.group() == b"\r" and match.end() == len(chunk):
                self._after_cr = True
            start = match.end()
            self._line(line, dropped, out)
        self._take(chunk[start:], out)
        return out

    def _take(self, piece: bytes, out: list[SseEvent | Oversize]) -> None:
        """Keep a piece of the current line, unless the event is already over its limit."""
        if not piece or self._line_dropped:
            return
        self._partial_size += len(piece)
        limit = self.max_event_bytes
        if self._discarding:
            # inside an oversize event: a line is kept only to read an id from it, and only
            # within the limit (the line end tells a blank line from a dropped one)
            if limit is not None and self._partial_size > limit:
                self._partial, self._partial_size, self._line_dropped = [], 0, True
            else:
                self._partial.append(piece)
            return
        if limit is not None and self._size + self._partial_size > limit:
            self._overflow(out)
            return
        self._partial.append(piece)

    def _overflow(self, out: list[SseEvent | Oversize]) -> None:
        self._discarding = True
        self._data = []
        self._partial, self._partial_size, self._line_dropped = [], 0, True
        out.append(Oversize(self._id_in_event))

    def _line(self, raw: bytes, dropped: bool, out: list[SseEvent | Oversize]) -> None:
        """Handle one line; ``dropped``: its bytes were not kept (it is not a blank line)."""
        if self._discarding:
            if dropped:
                return
            if raw:  # still inside the oversize event: only its id matters
                line = raw.decode("utf-8", "replace")
                if line.partition(":")[0] == "id":
                    self.feed(line)
                return
            self._discarding = False  # its blank line: the oversize event is over
            self._reset_event()
            return
        self._size += len(raw) + 1
        event = self.feed(raw.decode("utf-8", "replace"))
        if event is not None:
            out.append(event)

    def _reset_event(self) -> None:
        self._data = []
        self._event = "message"
        self._size = 0
        self._id_in_event = False

    def feed(self, line: str) -> SseEvent | None:
        """Process one line; returns a finished event or ``None``."""
        if line == "":
            if not self._data:
                self._reset_event()
                return None
            event = (self.last_event_id, self._event, "\n".join(self._data))
            self._reset_event()
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value or "message"
        elif field == "id":
            if "\0" not in value:
                self.last_event_id = value
                self._id_in_event = True
        elif field == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
        return None
