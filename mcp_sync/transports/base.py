"""The transport interface and a line reader for file descriptors.

A transport moves whole lines (one JSON-RPC message each) in both directions:

* :meth:`Transport.read_line` blocks until a line arrives and returns it without its newline,
  or returns ``None`` at end of stream (or after :meth:`Transport.close`);
* :meth:`Transport.write` writes one encoded line (newline included); it may block;
* :meth:`Transport.close` ends the connection and wakes a blocked :meth:`~Transport.read_line`.

A transport that routes messages (Streamable HTTP: each request's messages on its own
stream) is also a :class:`RoutingTransport`: the endpoint then hands it every message with
an :class:`OutboundMeta` -- its kind, method, id and the request it belongs to -- so the
transport never decodes what the endpoint has just encoded, and tells it of cancelled
inbound requests and how to fail one outbound call.
"""

from __future__ import annotations

import os
import select
import stat
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..jsonrpc import ErrorResponse, InvalidMessage, Message, Request, RequestId, Response, decode
from ..protocol import CANCELLED_METHOD

__all__ = [
    "Transport",
    "RoutingTransport",
    "CallerReadTransport",
    "HandshakeOnlyTransport",
    "OutboundMeta",
    "MessageKind",
    "FailCall",
    "describe_outbound",
    "as_routing",
    "as_caller_read",
    "FdLineReader",
    "MAX_LINE_BYTES",
    "enlarge_pipe",
]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""A line longer than this is discarded (and reported as an empty line)."""


PIPE_BYTES = 1 << 20
"""Pipe buffer size asked for on Linux, so a large message is written in one go instead of
in 64 KiB steps that each wait for the reader."""


def enlarge_pipe(fd: int, size: int = PIPE_BYTES) -> None:
    """Grow the kernel buffer of the pipe ``fd`` (Linux only; anything else is left alone)."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (ImportError, OSError, ValueError):
        pass  # not a pipe, not Linux, or over the system's limit: the default buffer works


def _pollable(fd: int) -> bool:
    """False for a regular file: it is always readable, so there is nothing to wait for."""
    try:
        return not stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return True


def _strip_cr(line: bytes) -> bytes:
    """A line without the ``\r`` of a ``\r\n`` ending."""
    return line[:-1] if line.endswith(b"\r") else line


@runtime_checkable
class Transport(Protocol):
    """What an :class:`~mcp_sync.endpoint.Endpoint` needs from a connection."""

    def read_line(self) -> bytes | None:
        """Next line without its newline; ``None`` at end of stream or after close."""
        ...

    def write(self, data: bytes) -> None:
        """Write one encoded line. Raises ``OSError``/``ValueError`` if the connection broke."""
        ...

    def close(self) -> None:
        """End the connection; wakes a blocked :meth:`read_line`. Idempotent."""
        ...


@runtime_checkable
class HandshakeOnlyTransport(Protocol):
    """A transport that can carry only the handshake era (2025-11-25 and older): a client on
    it skips the ``server/discover`` probe under ``protocol="auto"`` and refuses a protocol
    that allows only 2026-07-28. The Streamable HTTP client transport is one until it stamps
    the 2026-07-28 routing headers."""

    handshake_only: bool


MessageKind = Literal["request", "notification", "response", "batch"]
"""What an outgoing line holds -- one request, one notification, one response (result or
error), or a JSON-RPC batch of responses."""

FailCall = Callable[..., bool]
"""``fail_call(request_id, exception, cancel=...)``: fail one outbound call without ending
the connection (:meth:`Endpoint.fail_call <mcp_sync.endpoint.Endpoint.fail_call>`)."""


@dataclass(frozen=True, slots=True)
class OutboundMeta:
    """What the sender knows about one outgoing line, handed to a :class:`RoutingTransport`."""

    kind: MessageKind
    method: str | None = None
    """The method of a request or notification."""
    request_id: RequestId | None = None
    """The id of a request (the one this line sends)."""
    related_request_id: RequestId | None = None
    """The inbound request this line belongs to -- the one a response answers, or the one on
    whose behalf a request or notification is sent (progress, a log message, sampling)."""
    cancelled_request_id: RequestId | None = None
    """For ``notifications/cancelled``: the request it cancels."""
    caller_reads: bool = False
    """For a request: its caller is about to block for the answer and will read it itself
    (:class:`CallerReadTransport`), so the transport need not hand it to a thread of its own."""
    params: Any = field(default=None, compare=False, repr=False)
    """For a request: the ``params`` object the line encodes (``None`` when it has none, or
    when the sender did not say), so that a transport that routes by them need not decode
    the line again. Not compared."""

    @classmethod
    def of_line(cls, data: bytes) -> OutboundMeta:
        """Describe an encoded line by decoding it (for a caller that has only the bytes;
        the endpoint never needs this). Raises :class:`ValueError` for a line that is not
        one JSON-RPC message."""
        message = decode(data.rstrip(b"\n"))
        if isinstance(message, InvalidMessage):
            raise ValueError(f"not a JSON-RPC message: {message.detail}")
        return describe_outbound(message, None)


def describe_outbound(
    message: Message | bytes, related: RequestId | None, *, caller_reads: bool = False
) -> OutboundMeta:
    """The :class:`OutboundMeta` of ``message`` sent on behalf of the inbound request
    ``related``. Pre-encoded bytes are a handler's reply to ``related``; a response always
    relates to the request it answers. ``caller_reads``: a request is read by its caller
    (:attr:`OutboundMeta.caller_reads`; ignored for anything else)."""
    if isinstance(message, bytes):
        return OutboundMeta("response", related_request_id=related)
    if isinstance(message, (Response, ErrorResponse)):
        return OutboundMeta("response", related_request_id=message.id)
    if isinstance(message, Request):
        return OutboundMeta(
            "request",
            message.method,
            request_id=message.id,
            related_request_id=related,
            caller_reads=caller_reads,
            params=message.params,
        )
    cancelled = None
    if message.method == CANCELLED_METHOD and isinstance(message.params, dict):
        cancelled = message.params.get("requestId")
    return OutboundMeta(
        "notification", message.method, related_request_id=related, cancelled_request_id=cancelled
    )


@runtime_checkable
class RoutingTransport(Transport, Protocol):
    """A transport that routes each message by what it is (Streamable HTTP, batches).

    The endpoint calls :meth:`send` instead of :meth:`Transport.write` for every message,
    :meth:`inbound_cancelled` when an inbound request's cancellation won, and
    :meth:`bind_call_failure` once, when it is created.
    """

    def send(self, data: bytes, meta: OutboundMeta) -> None:
        """Write one encoded line described by ``meta``. Raises like :meth:`Transport.write`."""
        ...

    def inbound_cancelled(self, request_id: RequestId) -> None:
        """The inbound request ``request_id`` was cancelled: no response will follow."""
        ...

    def bind_call_failure(self, fail_call: FailCall) -> None:
        """Called once by the endpoint with the function that fails one outbound call."""
        ...


@runtime_checkable
class CallerReadTransport(Protocol):
    """A transport that lets the thread waiting for a request's answer read it.

    A request sent with :attr:`OutboundMeta.caller_reads` is not read by the transport's
    own threads at once: the transport keeps the job of reading it until the caller claims
    it with :meth:`read_on_caller` (the blocking calls do so before they wait). The claim is
    a handshake under the transport's lock, whichever comes first: a caller that finds the
    job runs it; a caller that comes before the request was sent leaves a mark, and the
    send then reads the answer on a thread of the transport's own, as without the hint.
    """

    def read_on_caller(
        self,
        request_id: RequestId,
        receive: Callable[[bytes], None],
        settled: Callable[[], bool],
    ) -> bool:
        """Claim the read of ``request_id``'s answer and run it on this thread, handing
        each message read to ``receive``; True if it ran here. False, at once, when the
        transport reads it (or did) on its own: the request was not sent yet (the send will
        hand it over), went another way, or the call is ``settled()`` already (nothing to
        read). Exceptions raised inside the read (``KeyboardInterrupt``) close the request's
        stream, then propagate."""
        ...


_CONFORMING: dict[tuple[type, type], bool | None] = {}
"""``(class of a transport, protocol) -> whether it conforms`` (``None``: ask each
instance), filled by :func:`_conforms`."""


def _conforms(transport: object, protocol: type) -> bool:
    """``isinstance(transport, protocol)`` for a runtime-checkable protocol, asked once per
    class: the protocol check walks the protocol's members each time (tens of microseconds),
    and the HTTP app makes an endpoint, which asks, per 2026-07-28 request. What a transport
    offers is a property of its class (its methods); a class that forwards attributes it
    does not have (``__getattr__``, as a wrapper of another transport does) is asked every
    time, since the answer depends on what it wraps."""
    key = (type(transport), protocol)
    try:
        answer = _CONFORMING[key]
    except KeyError:  # the first transport of its class
        forwards = hasattr(key[0], "__getattr__")
        answer = _CONFORMING[key] = None if forwards else isinstance(transport, protocol)
    return isinstance(transport, protocol) if answer is None else answer


def as_routing(transport: Transport) -> RoutingTransport | None:
    """``transport`` if it is a :class:`RoutingTransport`, else ``None`` (see :func:`_conforms`)."""
    return transport if _conforms(transport, RoutingTransport) else None  # type: ignore[return-value]


def as_caller_read(transport: Transport) -> CallerReadTransport | None:
    """``transport`` if it is a :class:`CallerReadTransport`, else ``None`` (see
    :func:`_conforms`)."""
    return transport if _conforms(transport, CallerReadTransport) else None  # type: ignore[return-value]


class FdLineReader:
    """Reads newline-delimited lines from a file descriptor, interruptibly.

    :meth:`wake` makes a blocked :meth:`read_line` return ``None`` (a self-pipe watched
    together with the descriptor), so a reader thread can always be stopped and joined.
    A descriptor that cannot be polled (a regular file, ``/dev/null``) never blocks, so it
    is read directly.
    """

    def __init__(self, fd: int, chunk_size: int = 1 << 18) -> None:
        self._fd = fd
        # one buffer, read into again and again: a fresh large bytes object per read would
        # cost page faults on every message
        self._buffer = bytearray(chunk_size)
        self._view = memoryview(self._buffer)
        # the start of a line whose newline has not arrived yet, in pieces: joined once, when
        # it ends, so a long line read in many chunks costs linear time
        self._partial: list[bytes] = []
        self._partial_size = 0
        self._lines: deque[bytes] = deque()
        self._eof = False
        self._woken = False
        self._wake_r, self._wake_w = os.pipe()
        # a poll object (POSIX, like the self-pipe and readv): the fewest steps between a line
        # and the next wait
        self._poller = select.poll()
        self._pollable = _pollable(fd)
        if self._pollable:
            self._poller.register(fd, select.POLLIN)
        self._poller.register(self._wake_r, select.POLLIN)
        self._lock = threading.Lock()
        self._released = False

    def read_line(self) -> bytes | None:
        """Return the next line (``\\r\\n`` or ``\\n`` stripped), or ``None`` at the end."""
        while True:
            if self._lines:
                return self._lines.popleft()
            size = self._read()
            if size is None:
                return None
            if size < 0:
                continue
            if not size:
                self._eof = True
                if self._partial:
                    self._add_line(b"".join(self._partial))
                    self._partial, self._partial_size = [], 0
                continue
            if not self._partial and self._buffer.find(b"\n", 0, size) == size - 1:
                return _strip_cr(self._view[: size - 1].tobytes())  # one whole line: the usual case
            self._feed(self._view[:size].tobytes())

    def read_chunk(self) -> bytes | None:
        """Return the bytes that are there now, as they came (no line splitting), or ``None``
        at the end or after :meth:`wake`. Use either this or :meth:`read_line`, not both."""
        while True:
            size = self._read()
            if size is None:
                return None
            if size > 0:
                return self._view[:size].tobytes()
            if size == 0:
                self._eof = True

    def _read(self) -> int | None:
        """Wait for data and read it into the buffer: its size (0 at end of stream, -1 for a
        read to retry), or ``None`` once the reader is finished (end seen, or woken)."""
        if self._eof or self._woken:
            self.release()
            return None
        for fd, _ in self._poller.poll(None if self._pollable else 0):
            if fd == self._wake_r:
                self._woken = True
        if self._woken:
            self.release()
            return None
        try:
            return os.readv(self._fd, (self._buffer,))
        except (BlockingIOError, InterruptedError):
            return -1
        except OSError:
            return 0

    def _feed(self, chunk: bytes) -> None:
        newline = chunk.find(b"\n")
        if newline < 0:  # still inside a line: keep the piece, scan nothing again later
            self._partial.append(chunk)
            self._partial_size += len(chunk)
            if self._partial_size > MAX_LINE_BYTES:  # discarded, reported as an empty line
                self._partial, self._partial_size = [], 0
                self._add_line(b"")
            return
        if self._partial:
            self._partial.append(chunk[:newline])
            self._add_line(b"".join(self._partial))
            self._partial, self._partial_size = [], 0
        else:
            self._add_line(chunk[:newline])
        parts = chunk[newline + 1 :].split(b"\n")
        tail = parts.pop()
        for part in parts:
            self._add_line(part)
        if tail:
            self._partial.append(tail)
            self._partial_size = len(tail)

    def _add_line(self, line: bytes) -> None:
        self._lines.append(_strip_cr(line))

    def wake(self) -> None:
        """Make a blocked or future :meth:`read_line` return ``None``."""
        with self._lock:
            if self._released:
                return
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass

    def release(self) -> None:
        """Close the self-pipe. Called by :meth:`read_line` when it returns
        ``None``; later reads return ``None`` at once and :meth:`wake` does nothing."""
        with self._lock:
            if self._released:
                return
            self._released = True
            self._woken = True
            os.close(self._wake_r)
            os.close(self._wake_w)

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass
