"""JSON-RPC batches over a line transport (stdio), for sessions at revision 2025-03-26.

Revision 2025-03-26 says receivers MUST support batches; later revisions forbid them. The
endpoint reads one message per line, so batches are a transport concern:
:class:`BatchingTransport` wraps the connection of a server session and

* splits a line that holds a JSON array into its elements, which the endpoint then reads
  one by one, in array order (while the session is at a batch revision; otherwise the line
  goes through and the endpoint answers -32600 as for any batch);
* holds back the responses to the batch's requests and writes them as **one** array line
  once every request of the batch has been answered or cancelled (a cancelled one is left
  out; a batch whose requests were all cancelled gets no line at all);
* answers elements that are not valid messages, and ``initialize`` (never part of a batch),
  with error elements of that array; an empty array gets a single -32600.

Everything else -- progress, notifications, requests to the client -- goes out at once, as
without batches.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from ..jsonrpc import (
    INVALID_REQUEST,
    ErrorResponse,
    InvalidMessage,
    Message,
    Request,
    RequestId,
    decode_object,
    encode,
    id_key,
)
from .base import FailCall, OutboundMeta, RoutingTransport, Transport

__all__ = ["BATCH_REVISIONS", "BatchingTransport", "SplitBatch", "split_batch", "EMPTY_BATCH"]

BATCH_REVISIONS = frozenset({"2025-03-26"})
"""Protocol revisions whose sessions may send JSON-RPC batches (later ones forbid them)."""

_ARRAY_START = re.compile(rb"[ \t\r\n]*\[")

EMPTY_BATCH = "an empty batch is not a valid request"
"""The message of the -32600 error that answers ``[]``."""


class SplitBatch:
    """A batch taken apart by :func:`split_batch`.

    Attributes:
        replies: error responses owed at once (invalid elements, ``initialize``, refused
            requests), encoded.
        requests: the requests that go on, in array order.
        lines: every element that goes on (those requests, notifications, responses), in
            array order, as lines for the endpoint.
        messages: the same elements decoded (``messages[i]`` is ``lines[i]``).
    """

    __slots__ = ("replies", "requests", "lines", "messages")

    def __init__(self) -> None:
        self.replies: list[bytes] = []
        self.requests: list[Request] = []
        self.lines: list[bytes] = []
        self.messages: list[Message] = []


def split_batch(
    items: list[Any], admit: Callable[[Request], bytes | None] | None = None
) -> SplitBatch:
    """Take a (non-empty) batch apart, element by element, in array order.

    An element that is not a valid message gets its error reply (if it owes one);
    ``initialize``, which is never part of a batch, and a request whose id an earlier
    element of the batch used get -32600; ``admit(request)`` may refuse any other request
    by returning the encoded error that answers it.
    """
    split = SplitBatch()
    seen: set[tuple[type, RequestId]] = set()
    for item in items:
        message = decode_object(item)
        if isinstance(message, InvalidMessage):
            if message.reply is not None:
                split.replies.append(encode(message.reply))
            continue
        if isinstance(message, Request):
            refusal = None
            key = id_key(message.id)
            if message.method == "initialize":
                refusal = encode(
                    ErrorResponse(
                        message.id,
                        INVALID_REQUEST,
                        "initialize must not be part of a JSON-RPC batch",
                    )
                )
            elif key in seen:
                refusal = encode(
                    ErrorResponse(message.id, INVALID_REQUEST, "request id is already in use")
                )
            elif admit is not None:
                refusal = admit(message)
            if refusal is not None:
                split.replies.append(refusal)
                continue
            seen.add(key)
            split.requests.append(message)
        split.lines.append(json.dumps(item).encode())
        split.messages.append(message)
    return split


class _Batch:
    """The responses gathered for one batch, and the requests still owed one."""

    __slots__ = ("replies", "waiting")

    def __init__(self) -> None:
        self.replies: list[bytes] = []
        self.waiting: set[tuple[type, RequestId]] = set()


class BatchingTransport:
    """A server session's transport that answers JSON-RPC batches (see the module).

    Args:
        inner: the connection (stdio, a memory pair, ...).
        batches_allowed: called for each array line; True while the session may batch
            (it negotiated a revision in :data:`BATCH_REVISIONS`).
    """

    def __init__(self, inner: Transport, batches_allowed: Callable[[], bool]) -> None:
        self._inner = inner
        self._allowed = batches_allowed
        self._lock = threading.Lock()  # guards _lines and _owed
        self._write_lock = threading.Lock()  # one writer at a time: the endpoint and the reader
        self._lines: deque[bytes] = deque()  # elements of a split batch, still to be read
        self._owed: dict[tuple[type, RequestId], _Batch] = {}  # request -> its batch
        self._routing: RoutingTransport | None = (
            inner if isinstance(inner, RoutingTransport) else None
        )

    # -- reading --------------------------------------------------------------------------------
    def read_line(self) -> bytes | None:
        """The next message line: an element of a batch being split, or the next line."""
        while True:
            with self._lock:
                if self._lines:
                    return self._lines.popleft()
            line = self._inner.read_line()
            if line is None or not _ARRAY_START.match(line) or not self._allowed():
                return line
            try:
                items = json.loads(line)
            except (ValueError, UnicodeDecodeError, RecursionError):
                return line  # the endpoint answers it as the parse error it is
            if type(items) is not list:
                return line
            self._split(items)

    def _split(self, items: list[Any]) -> None:
        if not items:
            self._write_raw(
                encode(ErrorResponse(None, INVALID_REQUEST, EMPTY_BATCH)), OutboundMeta("response")
            )
            return
        split = split_batch(items)
        batch = _Batch()
        batch.replies = split.replies
        batch.waiting = {id_key(request.id) for request in split.requests}
        with self._lock:
            for key in batch.waiting:
                self._owed[key] = batch
            self._lines.extend(split.lines)
        if not batch.waiting and batch.replies:
            self._write_batch(batch)

    # -- writing --------------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Write one line at once."""
        self._write_raw(data, None)

    def send(self, data: bytes, meta: OutboundMeta) -> None:
        """Hold a response owed to a batch; write anything else at once."""
        related = meta.related_request_id
        if related is not None and self._owed:
            key = id_key(related)
            with self._lock:
                batch = self._owed.get(key)
                if batch is not None and meta.kind == "response":
                    del self._owed[key]
                    batch.waiting.discard(key)
                    batch.replies.append(data)
                    complete = not batch.waiting
                else:
                    batch = None
            if batch is not None:
                if complete:
                    self._write_batch(batch)
                return
        self._write_raw(data, meta)

    def inbound_cancelled(self, request_id: RequestId) -> None:
        """A request was cancelled: its batch owes it no response any more."""
        key = id_key(request_id)
        with self._lock:
            batch = self._owed.pop(key, None)
            complete = False
            if batch is not None:
                batch.waiting.discard(key)
                complete = not batch.waiting  # only the thread that empties it writes it
        if batch is not None and complete and batch.replies:
            self._write_batch(batch)
        if self._routing is not None:
            self._routing.inbound_cancelled(request_id)

    def bind_call_failure(self, fail_call: FailCall) -> None:
        """Passed on to an inner transport that can fail one call."""
        if self._routing is not None:
            self._routing.bind_call_failure(fail_call)

    def _write_batch(self, batch: _Batch) -> None:
        self._write_raw(
            b"[" + b",".join(reply.rstrip(b"\n") for reply in batch.replies) + b"]\n",
            OutboundMeta("batch"),
        )

    def _write_raw(self, data: bytes, meta: OutboundMeta | None) -> None:
        """Write to the inner transport: with ``meta`` if it routes by message."""
        with self._write_lock:
            if meta is not None and self._routing is not None:
                self._routing.send(data, meta)
            else:
                self._inner.write(data)

    # -- the rest of the transport --------------------------------------------------------------
    def close(self) -> None:
        """Close the connection (responses held for unfinished batches are dropped: their
        requests were cancelled by the close)."""
        with self._lock:
            self._owed.clear()
            self._lines.clear()
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        """Anything else is the inner transport's (``pid``, ``stderr_lines``, ...)."""
        if name == "_inner":  # not set yet: never recurse
            raise AttributeError(name)
        return getattr(self._inner, name)
