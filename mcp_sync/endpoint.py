"""The threaded driver of the protocol core: one JSON-RPC connection over a transport.

Threads of one :class:`Endpoint`:

* one **reader** thread: decodes lines, feeds the core, writes error replies, fires the
  tokens of cancelled inbound requests itself (so a cancellation is seen even while every
  worker is busy), settles outbound calls, and never runs a request handler;
* a bounded **worker pool** (started on demand) that runs inbound request handlers;
* a **callback** thread, alive only while callbacks are queued, that runs user callbacks
  (progress, notifications, ``on_cancel``) one at a time in arrival order -- promptly,
  even while every worker is busy;
* the process-wide deadline scheduler (:mod:`mcp_sync.deadlines`) for every timeout.

Nothing is started per request. Writes go through an ordered outbox: a message whose sending
depends on a state transition is queued while the registry lock is held (so a response can
never follow its own cancellation, and a cancellation never precedes its request), and is
written after the lock is released. A cancellation is queued without blocking: if another
thread is in the middle of a write, that thread writes it too.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import threading
import time
import types
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING
from dataclasses import dataclass
from typing import Any

from typing_extensions import Unpack

from . import deadlines
from ._caller_waits import send_and_wait, take_caller_waits
from ._waiting import wait_sliced
from .call_options import USE_CLIENT_DEFAULT, CallOptions, ProgressCallback, resolve_timeout
from .cancel import CancelToken
from .errors import (
    Cancelled,
    ConnectionClosed,
    McpError,
    RequestTimeout,
    WaitTimeout,
    describe_base_exception,
)
from .jsonrpc import (
    INTERNAL_ERROR,
    ErrorResponse,
    InvalidMessage,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    decode,
    encode,
    is_valid_id,
)
from .protocol import (
    CANCELLED_METHOD,
    NOT_RUNNING,
    PROGRESS_METHOD,
    Action,
    CancelInbound,
    Deliver,
    Dispatch,
    Dropped,
    InboundRequest,
    OutboundRequest,
    OutboundState,
    Progress,
    RequestRegistry,
    Send,
    Settle,
)
from .transports.base import (
    CallerReadTransport,
    OutboundMeta,
    Transport,
    as_caller_read,
    as_routing,
    describe_outbound,
)
from .workers import MAX_QUEUED_CALLBACKS, CallbackThread, WorkerPool

__all__ = [
    "Endpoint",
    "EndpointStats",
    "PendingCall",
    "RequestHandler",
    "CancelObserver",
    "ANSWER_LATER",
]

_log = logging.getLogger("mcp_sync.endpoint")
_wire = logging.getLogger("mcp_sync.wire")
"""Every JSON-RPC message read or written, at DEBUG: ``<endpoint name> <- <line>`` for a
message received, ``->`` for one sent (``mcp-sync --trace`` shows it on stderr)."""


def _trace(name: str, direction: str, data: bytes | str) -> None:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    _wire.debug("%s %s %s", name, direction, text.rstrip("\r\n"))


def _through_gate(gate: threading.Lock, seconds: float) -> bool:
    """Wait at most ``seconds`` for a lock held until something happens (a gate); True once
    it did. The gate is released again at once, to let every other waiter through."""
    if gate.acquire(timeout=seconds):
        gate.release()
        return True
    return False


RequestHandler = Callable[[InboundRequest], Any]
"""Runs an inbound request in a worker; returns the JSON ``result`` or raises
:class:`~mcp_sync.errors.McpError` (any other exception becomes -32603). Returning
:data:`ANSWER_LATER` leaves the request open without holding the worker."""


class _AnswerLater:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ANSWER_LATER"


ANSWER_LATER: Any = _AnswerLater()
"""What a request handler returns to keep its request open after it returns: nothing is
written and the request stays running (it counts in :meth:`Endpoint.in_flight`, and its
token fires when the peer cancels it or the connection ends) until someone answers it with
:meth:`Endpoint.respond`. A long-lived request (``subscriptions/listen``) costs no thread
this way."""

NotificationHandler = Callable[[Notification], Any]

CancelObserver = Callable[[RequestId, "str | None"], Any]
"""``on_cancelled(request_id, reason)``: sees each ``notifications/cancelled`` received."""

CALLBACK_QUEUE_FULL = "callback queue full while a callback waits for a reply"
"""The :attr:`Endpoint.dropped` reason of a notification that found the callback queue full
while the callback being run waited for a reply from the same connection."""


_SETTLED_STATES = frozenset((CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED))
"""The states of a :class:`concurrent.futures.Future` that is done."""


class _StateLock(type(threading.RLock())):  # type: ignore[misc]
    """What a :class:`PendingCall` has where a :class:`concurrent.futures.Future` has its
    ``Condition``: the same reentrant lock around the future's state (``wait()`` and
    ``as_completed()`` take it too), but nothing to notify -- nobody waits on it: a pending
    call is waited for through its gate, and its ``result()``/``exception()`` ask the
    future's own only once it is done. Entering it runs no Python code, and making one costs
    a tenth of a ``Condition``."""

    __slots__ = ()

    def notify(self, n: int = 1) -> None:
        pass

    def notify_all(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> bool:
        raise RuntimeError("a PendingCall is waited for with result(), exception() or wait()")


class PendingCall(concurrent.futures.Future):  # type: ignore[type-arg]
    """A request in flight to the peer: a :class:`concurrent.futures.Future` of its result.

    Unlike a plain future, :meth:`cancel` works while the request is running on the peer: it
    sends ``notifications/cancelled`` and makes :meth:`result` raise
    :class:`~mcp_sync.errors.Cancelled` (a :class:`concurrent.futures.CancelledError`).
    It returns False if the call had already completed. ``wait()`` and ``as_completed()``
    work as with any future.

    Done-callbacks run in the thread that settles the call (the connection's reader thread,
    the thread that cancels, or the shared timeout scheduler): keep them short and
    non-blocking, as with any future.

    A call made for a known method (``client.submit("tools/list")``,
    ``client.call_tool_future(...)``) resolves to the same ``mcp_types`` model as the
    blocking method: the raw result is parsed once, by the first thread that asks for it.
    """

    # what most calls leave as it is, read from the class until a call sets its own
    _request: OutboundRequest | None = None
    _deadline: deadlines.Deadline | None = None
    _timeout: float | None = None
    _reset_on_progress = False
    _hard_end: float | None = None
    _on_progress: ProgressCallback | None = None
    _cancel_token: CancelToken | None = None
    _cancel_reason: str | None = None
    _related: RequestId | None = None
    _decode: Callable[[Any], Any] | None = None
    _decoded: tuple[Any, BaseException | None] | None = None
    _caller_reads = False
    """The caller reads the answer itself, on the first wait (see :meth:`_read_here`)."""

    def __init__(self, endpoint: Endpoint, method: str) -> None:
        # concurrent.futures.Future.__init__, with a _StateLock for its Condition
        self._condition = _StateLock()
        self._state = PENDING
        self._result = None
        self._exception = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Callable[[Any], object]] = []
        self._endpoint = endpoint
        self.method = method
        # held until the call settles: one uncontended lock is the cheapest way to block
        self._done_gate = threading.Lock()
        self._done_gate.acquire()

    def decode_result_with(self, decode: Callable[[Any], Any]) -> PendingCall:
        """Make :meth:`result` return ``decode(raw_result)`` (computed once, on first use;
        an exception it raises is what :meth:`result` raises and :meth:`exception`
        returns). Returns this call."""
        self._decode = decode
        return self

    def _decoded_result(self, raw: Any) -> Any:
        assert self._decode is not None
        with self._condition:  # the future's own lock: the decoder runs no user code
            if self._decoded is None:
                try:
                    self._decoded = (self._decode(raw), None)
                except Exception as exc:
                    self._decoded = (None, exc)
        value, error = self._decoded
        if error is not None:
            raise error
        return value

    @property
    def request_id(self) -> int | None:
        """The JSON-RPC id this call was sent with."""
        return None if self._request is None else self._request.id

    @property
    def cancel_reason(self) -> str | None:
        """The reason given when the call was cancelled, if it was."""
        return self._cancel_reason

    def running(self) -> bool:
        """True while the request is in flight: sent (or being sent) and not settled."""
        return self._request is not None and not self.done()

    def cancel(self, reason: str | None = None) -> bool:
        """Cancel the call, in flight or not. Idempotent.

        Sends ``notifications/cancelled`` (never for ``initialize``) and does not wait for
        the peer. Returns True if the call is cancelled (now or before), False if it had
        already completed with a result, an error or a timeout.
        """
        if self._request is not None:
            return self._endpoint._cancel_outbound(self._request, reason)
        return self.cancelled()

    def _settled(self) -> bool:
        """``done()`` without taking the future's lock (one read of its state: the state is
        final once settled, and the result or exception was set before it)."""
        return self._state in _SETTLED_STATES

    def _wait_done(self, timeout: float | None) -> bool:
        """Sliced wait until done; returns done(). KeyboardInterrupt cancels the call."""
        if self._settled():
            self._read_here()  # settled before it was read: the transport drops the read
            return True
        callbacks = self._endpoint._callbacks
        if callbacks.is_current():  # a callback waits for the reader: it must not wait for us
            with callbacks.waiting_for_reply():
                self._read_here()
                return self._wait_gate(timeout)
        self._read_here()
        if self._settled():  # read here, to its end: nothing to wait for
            return True
        return self._wait_gate(timeout)

    def _read_here(self) -> None:
        """Read the answer on this thread when the call was sent by a blocking method to a
        transport that lets the caller read (claimed once: a second waiter just waits).
        KeyboardInterrupt inside the read cancels the call, then propagates."""
        if not self._caller_reads:
            return
        with self._condition:
            claimed, self._caller_reads = self._caller_reads, False
        if not claimed:
            return
        try:
            self._endpoint._read_on_caller(self)
        except KeyboardInterrupt:
            self.cancel("interrupted")
            raise

    def _wait_gate(self, timeout: float | None) -> bool:
        gate = self._done_gate

        def through_gate(seconds: float) -> bool:
            if gate.acquire(timeout=seconds):
                gate.release()  # let every other waiter through too
                return True
            return False

        try:
            # done() is checked first: an interrupted waiter may have left the gate acquired
            return wait_sliced(self.done, through_gate, timeout)
        except KeyboardInterrupt:
            self.cancel("interrupted")
            raise

    def result(self, timeout: float | None = None) -> Any:
        """Wait for and return the result.

        Raises :class:`~mcp_sync.errors.McpError` for an error from the peer,
        :class:`~mcp_sync.errors.RequestTimeout` when the call's ``timeout=`` expired,
        :class:`~mcp_sync.errors.Cancelled` when it was cancelled,
        :class:`~mcp_sync.errors.ConnectionClosed` when the connection ended,
        :class:`~mcp_sync.errors.PeerMisbehaved` when the peer's response was invalid, and
        :class:`TimeoutError` if *this wait's* ``timeout`` passes (the call goes on).
        A ``KeyboardInterrupt`` during the wait cancels the call on the wire, then propagates.
        A negative ``timeout`` raises :class:`ValueError`.
        """
        if not self._wait_done(deadlines.check_timeout(timeout)):
            raise WaitTimeout()
        if self._state == FINISHED and self._exception is None:
            raw = self._result  # final: set before the state
        else:
            try:
                raw = super().result(0)
            except concurrent.futures.CancelledError:
                raise Cancelled(self._cancel_reason) from None
        return raw if self._decode is None else self._decoded_result(raw)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Like :meth:`result`, but returns the exception instead of raising it."""
        if not self._wait_done(deadlines.check_timeout(timeout)):
            raise WaitTimeout()
        try:
            error = super().exception(0)
        except concurrent.futures.CancelledError:
            raise Cancelled(self._cancel_reason) from None
        if error is None and self._decode is not None:
            try:
                self._decoded_result(super().result(0))
            except Exception as exc:
                return exc
        return error

    # -- driven by the endpoint ----------------------------------------------------------------
    def _settle(self, action: Settle) -> None:
        # the registry has forgotten the request: drop its link back to this call, so that
        # no cycle is left for the garbage collector (the call still knows its request)
        action.request.context = None
        deadline, self._deadline = self._deadline, None
        if deadline is not None:
            deadline.cancel()
        token, self._cancel_token = self._cancel_token, None
        if token is not None:
            token.remove_callback(self._on_token)
        if action.response is not None:
            response = action.response
            if isinstance(response, Response):
                self._conclude(result=response.result)
            else:
                self._conclude(exception=McpError(response.code, response.message, response.data))
        elif action.exception is not None:
            self._conclude(exception=action.exception)
        else:
            self._conclude(cancelled=True, reason=action.reason)

    def _conclude(
        self,
        *,
        result: Any = None,
        exception: BaseException | None = None,
        cancelled: bool = False,
        reason: str | None = None,
    ) -> None:
        """Settle the future (once: the caller makes sure) and let every waiter through."""
        if cancelled:
            self._cancel_reason = reason
            concurrent.futures.Future.cancel(self)
            self.set_running_or_notify_cancel()  # wakes wait()/as_completed()
        elif exception is not None:
            self.set_exception(exception)
        else:
            self.set_result(result)
        # they ran (one added from now on runs at once): a callback's object, which may
        # hold this call (an InputRoundsCall its round), is not kept alive in a cycle
        self._done_callbacks = []
        self._done_gate.release()

    def _on_token(self, token: CancelToken) -> None:
        self.cancel(token.reason or "cancelled")

    def _on_deadline(self) -> None:
        if self._request is None:
            return
        reason = f"timed out after {self._timeout if self._timeout is not None else 0:g} s"
        if self._hard_end is not None and time.monotonic() >= self._hard_end - 1e-3:
            reason = "maximum total timeout reached"
        self._endpoint._cancel_outbound(
            self._request, reason, RequestTimeout(f"{self.method}: {reason}")
        )


class Endpoint:
    """A JSON-RPC connection over a :class:`~mcp_sync.transports.base.Transport`.

    Args:
        transport: the connection.
        request_handler: runs each inbound request on a worker thread (see
            :data:`RequestHandler`); ``None`` answers every request with -32601.
        notification_handler: receives inbound notifications (other than cancellation and
            progress, which the endpoint handles), one at a time, in arrival order, on the
            callback thread.
        max_workers: size of the worker pool.
        max_queued_callbacks: bound of the callback queue (notifications, progress and
            cancellation observers waiting for the callback thread). When it is full the
            reader waits, so a flooding peer is slowed down by the transport; responses and
            cancellations are handled by the reader itself and never queue there. See
            :class:`~mcp_sync.workers.CallbackThread`.
        on_cancelled: ``on_cancelled(request_id, reason)`` for every well-formed
            ``notifications/cancelled`` received (whether or not it matched a request in
            flight), on the callback thread.
        pool: run handlers on this pool instead (shared with other endpoints; the
            endpoint neither starts nor joins its threads, and ``max_workers`` is unused).
        inline_handlers: methods answered on the reader thread by library code that never
            blocks (``ping``); never user code.
        name: prefix of thread names.
        default_timeout: the ``timeout`` of a call that gives none (``None``: no timeout).
        admit: ``admit(request)``, called for every new inbound request in arrival order, on
            the thread that read it (library code that never blocks: never user code), before
            its handler is scheduled; an :class:`~mcp_sync.errors.McpError` it raises is the
            request's answer, sent at once (the handler never runs).
        shape_result: ``shape_result(request, result) -> result``, applied to every
            successful answer to an inbound request (the handler's, or one given to
            :meth:`respond`) just before it is encoded: the one place where a session adds
            what every result of its protocol revision carries.

    Call :meth:`start` to begin reading, :meth:`close` to end.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        request_handler: RequestHandler | None = None,
        notification_handler: NotificationHandler | None = None,
        max_workers: int = 8,
        max_queued_callbacks: int = MAX_QUEUED_CALLBACKS,
        on_cancelled: CancelObserver | None = None,
        inline_handlers: dict[str, Callable[[InboundRequest], Any]] | None = None,
        name: str = "mcp_sync",
        pool: WorkerPool | None = None,
        default_timeout: float | None = None,
        admit: Callable[[InboundRequest], Any] | None = None,
        shape_result: Callable[[InboundRequest, Any], Any] | None = None,
    ) -> None:
        self._transport = transport
        self._admit = admit
        self._shape_result = shape_result
        self._request_handler = request_handler
        self._notification_handler = notification_handler
        self._inline = dict(inline_handlers or {})
        self.name = name
        self._lock = threading.Lock()
        self._core = RequestRegistry(CancelToken)
        # (encoded message, what it is and the inbound request it relates to)
        self._outbox: deque[tuple[bytes, OutboundMeta]] = deque()
        self._write: Callable[[bytes, OutboundMeta], None] = lambda data, _meta: transport.write(
            data
        )
        self._inbound_cancelled: Callable[[RequestId], Any] | None = None
        self._caller_read: CallerReadTransport | None = as_caller_read(transport)
        routing = as_routing(transport)
        if routing is not None:  # routes by message (HTTP, batches)
            self._write = lambda data, meta: routing.send(data, meta)
            self._inbound_cancelled = routing.inbound_cancelled
            routing.bind_call_failure(self.fail_call)
        self._write_lock = threading.Lock()
        self._owns_pool = pool is None
        self._pool = pool if pool is not None else WorkerPool(max_workers, name)
        self._callbacks = CallbackThread(name, max_queued_callbacks)
        self.on_cancelled = on_cancelled
        """``on_cancelled(request_id, reason)`` for every ``notifications/cancelled`` received."""
        self.default_timeout = deadlines.check_timeout(default_timeout, "default_timeout")
        """The ``timeout`` of a call that gives none (``None``: no timeout)."""
        self._reader: threading.Thread | None = None
        self._closed = False
        # held until the connection is closed: waiting for the close is acquiring it (a
        # lock costs far less to make than an Event, and the HTTP app makes an endpoint
        # per 2026-07-28 request)
        self._open_gate = threading.Lock()
        self._open_gate.acquire()
        self._close_lock = threading.Lock()
        self._close_callbacks: list[Callable[[], Any]] = []
        self.dropped: Counter[str] = Counter()
        """How many inbound messages were ignored, by reason (diagnostics)."""
        self.withheld: Counter[str] = Counter()
        """How many notifications of ours were not written, by reason: those about an inbound
        request that was already cancelled or answered (diagnostics)."""
        self.drop_requests: str | None = None
        """When set (to a reason), every inbound request is dropped unanswered and counted in
        :attr:`dropped` under that reason: a client speaking 2026-07-28, where a server sends
        no requests, answers none."""

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> Endpoint:
        """Start the reader thread. Returns self."""
        if self._reader is not None:
            raise RuntimeError("endpoint already started")
        self._reader = threading.Thread(
            target=self._read_loop, name=f"{self.name}-reader", daemon=True
        )
        self._reader.start()
        return self

    @property
    def closed(self) -> bool:
        """True once the connection is closed (by either side)."""
        return self._closed

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Block until the connection is closed; returns :attr:`closed`. Sliced for Ctrl-C."""
        gate = functools.partial(_through_gate, self._open_gate)
        return wait_sliced(lambda: self._closed, gate, timeout)

    def add_close_callback(self, callback: Callable[[], Any]) -> None:
        """Run ``callback()`` once the connection is lost (at once if it already is)."""
        with self._close_lock:
            if not self._closed:
                self._close_callbacks.append(callback)
                return
        callback()

    def close(self, grace: float = 5.0, *, join: bool = True) -> list[threading.Thread]:
        """Close the connection and join the threads this endpoint started.

        Every inbound token is cancelled and every pending outbound call fails with
        :class:`~mcp_sync.errors.ConnectionClosed`. Handlers get ``grace`` seconds to notice
        their cancellation; the threads still running after that are returned (and logged).
        Handlers on a shared ``pool`` are cancelled but not waited for. ``join=False``
        waits for no thread at all (they finish on their own); calling ``close()`` again
        later joins them.
        """
        self._connection_lost(ConnectionClosed("connection closed locally"))
        self._drain_outbox(min(grace, 1.0))  # a cancellation queued just now still goes out
        self._transport.close()
        if not join:
            return []
        current = threading.current_thread()
        reader = self._reader
        if reader is not None and reader is not current:
            reader.join(grace)
        # a shared pool is not ours to join: this endpoint's handlers were cancelled above
        # and finish on their own (a queued one never starts)
        stuck = self._pool.shutdown(grace) if self._owns_pool else []
        callbacks = self._callbacks.join(grace)
        if callbacks is not None:
            stuck.append(callbacks)
        if reader is not None and reader.is_alive() and reader is not current:
            stuck.append(reader)
        if stuck:
            _log.warning(
                "%s: threads still running after close: %s", self.name, [t.name for t in stuck]
            )
        return stuck

    def __enter__(self) -> Endpoint:
        if self._reader is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- outbound ---------------------------------------------------------------------------
    def submit(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        related_request: RequestId | None = None,
        **options: Unpack[CallOptions],
    ) -> PendingCall:
        """Send a request and return its :class:`PendingCall` at once.

        Args:
            related_request: the id of the inbound request on whose behalf this request is
                made (transports such as Streamable HTTP send it on that request's stream).
            options: the :class:`~mcp_sync.call_options.CallOptions`; a ``timeout`` left out
                is :attr:`default_timeout`.
        """
        # the one place where the call options become the call's settings
        timeout = resolve_timeout(options.get("timeout", USE_CLIENT_DEFAULT), self.default_timeout)
        cancel_token = options.get("cancel_token")
        on_progress = options.get("on_progress")
        reset_timeout_on_progress = options.get("reset_timeout_on_progress", False)
        max_total_timeout = deadlines.check_timeout(
            options.get("max_total_timeout"), "max_total_timeout"
        )
        future = PendingCall(self, method)
        if cancel_token is not None and cancel_token.cancelled:
            future._conclude(cancelled=True, reason=cancel_token.reason)  # nothing was sent
            return future
        future._timeout = timeout
        future._reset_on_progress = reset_timeout_on_progress and timeout is not None
        future._on_progress = on_progress
        future._related = related_request
        caller_reads = self._caller_read is not None and take_caller_waits()
        if max_total_timeout is not None:
            future._hard_end = time.monotonic() + max_total_timeout
        with self._lock:
            request, actions = self._core.send_request(
                method,
                params,
                context=future,
                # resetting the timeout needs progress too, with or without a callback
                with_progress=on_progress is not None or future._reset_on_progress,
            )
            try:
                self._queue_sends(actions, related_request, caller_reads=caller_reads)
            except ValueError:  # params nested too deep to encode: nothing was queued
                self._core.abandon(request)
                raise
            future._request = request
            future._caller_reads = caller_reads
            delay = self._initial_delay(timeout, max_total_timeout)
            if delay is not None:
                future._deadline = deadlines.schedule(delay, future._on_deadline)
        if cancel_token is not None:
            future._cancel_token = cancel_token
            cancel_token.add_callback(future._on_token)
            # settled before we registered (a zero timeout, a fast reply): _settle may have
            # looked for the callback already. The state flips before _settle runs.
            if request.state is not OutboundState.PENDING:
                cancel_token.remove_callback(future._on_token)
        self._flush(block=True)
        return future

    @staticmethod
    def _initial_delay(timeout: float | None, max_total: float | None) -> float | None:
        if timeout is None:
            return max_total
        if max_total is None:
            return timeout
        return min(timeout, max_total)

    def request(
        self, method: str, params: dict[str, Any] | None = None, **options: Unpack[CallOptions]
    ) -> Any:
        """Send a request and block for its raw result (see :meth:`submit` and
        :meth:`PendingCall.result`). ``KeyboardInterrupt`` cancels it on the wire.

        Over a transport that allows it (Streamable HTTP at 2026-07-28) the answer is read
        on this thread: no other thread takes part in the call."""
        return send_and_wait(lambda: self.submit(method, params, **options))

    def _read_on_caller(self, call: PendingCall) -> None:
        """Let the transport read ``call``'s answer on this thread (see
        :class:`~mcp_sync.transports.base.CallerReadTransport`)."""
        transport, request = self._caller_read, call._request
        if transport is None or request is None:
            return

        def settled() -> bool:
            # the core's state, not done(): a canceller flips it under the registry lock,
            # before its notifications/cancelled is queued -- which another thread may write
            # (dropping the read) before the canceller settles the future
            return request.state is not OutboundState.PENDING

        transport.read_on_caller(request.id, self.receive_line, settled)

    def notify(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        related_request: RequestId | None = None,
    ) -> None:
        """Send a notification. Raises :class:`~mcp_sync.errors.ConnectionClosed` if closed.

        ``related_request``: the inbound request it belongs to (see :meth:`submit`).
        """
        if self._core.closed:
            raise ConnectionClosed("connection is closed")
        notification = Notification(method, params)
        if related_request is None:
            self._outbox.append((encode(notification), describe_outbound(notification, None)))
            self._flush(block=True)
            return
        with self._lock:
            request = self._core.inbound(related_request)
        if request is None:  # answered or cancelled already: nothing more is written for it
            self._count_withheld([Dropped(NOT_RUNNING, notification)])
            return
        self._notify_related(request, notification)

    def notify_about(
        self, request: InboundRequest, method: str, params: dict[str, Any] | None = None
    ) -> bool:
        """Send a notification about the inbound ``request`` (a log message its handler
        produced) while it is running; returns False, sending nothing, once it was
        cancelled or answered."""
        if self._core.closed:
            raise ConnectionClosed("connection is closed")
        return self._notify_related(request, Notification(method, params))

    def _notify_related(self, request: InboundRequest, notification: Notification) -> bool:
        """Write ``notification`` about ``request`` if the core lets it out (it is running)."""
        data, meta = encode(notification), describe_outbound(notification, request.id)
        with self._lock:
            actions = self._core.notify_related(request, notification)
            sent = any(isinstance(action, Send) for action in actions)
            if sent:
                self._outbox.append((data, meta))
        if sent:
            self._flush(block=True)
        else:
            self._count_withheld(actions)
        return sent

    def _count_withheld(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Dropped):
                with self._lock:
                    self.withheld[action.detail] += 1
                _log.debug("%s: not written (%s): %r", self.name, action.detail, action.message)

    def _cancel_outbound(
        self, request: OutboundRequest, reason: str | None, exception: BaseException | None = None
    ) -> bool:
        """Cancel (or time out) an outbound call; True if it ended, now or before, by a
        cancellation -- whichever thread's cancel won."""
        with self._lock:
            actions = self._core.cancel_outbound(request, reason, exception)
            future = request.context
            self._queue_sends(actions, future._related if isinstance(future, PendingCall) else None)
            cancelled = request.cancelled
        if actions:
            self._perform(actions)  # settle first: the caller never waits for the network
            self._flush(block=False)  # and never queues behind another thread's slow write
        return cancelled

    def fail_call(
        self, request_id: RequestId, exception: BaseException, *, cancel: bool = False
    ) -> bool:
        """Fail one pending outbound call with ``exception``, for a transport that knows
        better than to end the whole connection. With ``cancel=True`` the peer is also sent
        ``notifications/cancelled`` (the request may be running there); without, nothing is
        sent (the peer never got the request). False if the call was no longer pending."""
        with self._lock:
            request = self._core.outbound(request_id) if isinstance(request_id, int) else None
            if request is None:
                return False
            if cancel:
                actions = self._core.cancel_outbound(request, str(exception), exception)
                future = request.context
                self._queue_sends(
                    actions, future._related if isinstance(future, PendingCall) else None
                )
            else:
                actions = self._core.fail_outbound(request, exception)
        if actions:
            self._perform(actions)
            self._flush(block=False)
        return bool(actions)

    # -- inbound side, for handlers ---------------------------------------------------------
    def report_progress(
        self,
        request: InboundRequest,
        progress: float,
        total: float | None = None,
        message: str | None = None,
    ) -> bool:
        """Send ``notifications/progress`` for an inbound request that asked for it.

        Returns False (and sends nothing) when the request has no ``progressToken`` or is
        no longer running: progress stops when the request ends.
        """
        params: dict[str, Any] = {"progressToken": request.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        if request.progress_token is None:
            return False
        return self._notify_related(request, Notification(PROGRESS_METHOD, params))

    def respond(
        self, request: InboundRequest, result: Any = None, *, error: McpError | None = None
    ) -> bool:
        """Answer an inbound request now, from any thread (for example when a server-side
        deadline expires while the handler still runs).

        Returns False if the request was already answered or cancelled; the handler's own
        answer, when it comes, is then discarded.
        """
        if error is not None:
            reply = encode(ErrorResponse(request.id, error.code, error.message, error.data))
        else:
            reply = encode(Response(request.id, self._result_of(request, result)))
        with self._lock:
            sent = self._core.complete(request, reply)
            self._queue_sends(sent, request.id)
        if sent:
            self._flush(block=False)
        return bool(sent)

    def _result_of(self, request: InboundRequest, result: Any) -> Any:
        """What is sent as the ``result`` of ``request`` for a handler's ``result``."""
        value = result if result is not None else {}
        shape = self._shape_result
        return value if shape is None else shape(request, value)

    def run_callback(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the callback thread, after earlier callbacks (never on the
        reader thread, and never waiting for a free worker)."""
        self._callbacks.submit(fn, *args)

    # -- reading ----------------------------------------------------------------------------
    def _read_loop(self) -> None:
        reason: BaseException = ConnectionClosed("the peer closed the connection")
        try:
            while True:
                line = self._transport.read_line()
                if line is None:
                    break
                if not line.strip():
                    continue
                try:
                    self.receive_line(line)
                except BaseException:  # survive any single bad message (or a callback's SystemExit)
                    _log.exception("%s: failed to process a message", self.name)
        except ConnectionClosed as exc:  # it already says what ended the connection
            reason = exc
        except Exception as exc:
            reason = ConnectionClosed(f"transport failed: {exc}")
            reason.__cause__ = exc
        finally:
            self._connection_lost(reason)

    def receive_line(self, line: bytes | str) -> None:
        """Process one line from the peer (the reader thread calls this)."""
        self.receive_decoded(line, decode(line))

    def receive_decoded(self, line: bytes | str, message: Message | InvalidMessage) -> None:
        """Process one line from the peer that the caller has decoded already: ``message``
        must be what :func:`~mcp_sync.jsonrpc.decode` makes of ``line`` (the HTTP app
        parses each POST body once, for its own checks, and hands the result on)."""
        if _wire.isEnabledFor(logging.DEBUG):
            _trace(self.name, "<-", line)
        if self.drop_requests is not None and isinstance(message, Request):
            self._count_dropped(self.drop_requests, message)
            return
        inline = None
        if self._inline and isinstance(message, Request):
            inline = self._inline.get(message.method)
        with self._lock:
            actions = self._core.receive(message)
            self._queue_sends(actions)
        if self._outbox:  # whoever queues a message also flushes it: nothing is stranded
            self._flush(block=True)
        self._perform(actions, inline)
        if (
            self.on_cancelled is not None
            and isinstance(message, Notification)
            and message.method == CANCELLED_METHOD
        ):
            self._observe_cancel(self.on_cancelled, message.params or {})

    def _observe_cancel(self, observer: CancelObserver, params: dict[str, Any]) -> None:
        """Show a received cancellation to ``observer`` (after its token has fired)."""
        target = params.get("requestId")
        if is_valid_id(target):
            reason = params.get("reason")
            self._deliver(observer, target, reason if type(reason) is str else None)

    def _perform(
        self, actions: Iterable[Action], inline: Callable[[InboundRequest], Any] | None = None
    ) -> None:
        for action in actions:
            if isinstance(action, Settle):
                future = action.request.context
                if isinstance(future, PendingCall):
                    future._settle(action)
            elif isinstance(action, Dispatch):
                admit = self._admit
                if admit is not None and not self._admitted(admit, action.request):
                    continue
                if inline is not None:
                    self._run_inbound(action.request, inline)
                    continue
                try:
                    self._pool.submit(self._run_inbound, action.request, self._request_handler)
                except RuntimeError:  # shutting down: the request was cancelled by close()
                    pass
            elif isinstance(action, CancelInbound):
                action.request.token.cancel(action.reason or "cancelled by the peer")
                if self._inbound_cancelled is not None:
                    self._inbound_cancelled(action.request.id)
            elif isinstance(action, Progress):
                self._on_progress(action)
            elif isinstance(action, Deliver):
                notification_handler = self._notification_handler
                if notification_handler is not None:
                    self._deliver(notification_handler, action.notification)
            elif isinstance(action, Dropped):
                self._count_dropped(action.detail, action.message)

    def _admitted(self, admit: Callable[[InboundRequest], Any], request: InboundRequest) -> bool:
        """Run the ``admit`` hook for a new request; False when it refused the request, which
        is then answered with the error at once (its handler never runs)."""
        try:
            admit(request)
            return True
        except McpError as exc:
            self.respond(request, error=exc)
        except Exception as exc:
            _log.error("%s: admitting %s failed", self.name, request.method, exc_info=True)
            self.respond(request, error=McpError(INTERNAL_ERROR, str(exc) or type(exc).__name__))
        return False

    def _deliver(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue a callback for what the peer sent, waiting while the queue is full."""
        if not self._callbacks.submit(fn, *args, wait=True):
            self._count_dropped(CALLBACK_QUEUE_FULL, args)
            if self.dropped[CALLBACK_QUEUE_FULL] == 1:
                _log.warning(
                    "%s: callback queue full (%d) while a callback waits for a reply: dropping "
                    "notifications until it returns",
                    self.name,
                    self._callbacks.max_queued,
                )

    def _count_dropped(self, detail: str, message: Any) -> None:
        with self._lock:  # several threads feed an HTTP session
            self.dropped[detail] += 1
        _log.debug("%s: dropped (%s): %r", self.name, detail, message)

    def _on_progress(self, action: Progress) -> None:
        future = action.request.context
        if not isinstance(future, PendingCall):
            return
        if future._reset_on_progress and future._timeout is not None:
            with self._lock:
                # the core state, not done(): a canceller flips it under this lock but settles
                # (and pops the deadline) after releasing it
                if future._deadline is not None and action.request.state is OutboundState.PENDING:
                    delay = future._timeout
                    if future._hard_end is not None:
                        delay = min(delay, future._hard_end - time.monotonic())
                    old = future._deadline
                    future._deadline = deadlines.schedule(delay, future._on_deadline)
                    old.cancel()
        if future._on_progress is not None:
            params = action.params
            progress = params.get("progress")
            if isinstance(progress, (int, float)) and not isinstance(progress, bool):
                total = params.get("total")
                message = params.get("message")
                self._deliver(
                    future._on_progress,
                    progress,
                    total
                    if isinstance(total, (int, float)) and not isinstance(total, bool)
                    else None,
                    message if isinstance(message, str) else None,
                )

    def _run_inbound(self, request: InboundRequest, handler: RequestHandler | None) -> None:
        with self._lock:
            if not self._core.start(request):
                return  # cancelled while queued: never starts
        reply: bytes
        try:
            if handler is None:
                raise McpError(-32601, f"Method not found: {request.method}")
            result = handler(request)
            if result is ANSWER_LATER:
                return  # answered later through respond(); the worker is free now
            reply = encode(Response(request.id, self._result_of(request, result)))
        except McpError as exc:
            reply = encode(ErrorResponse(request.id, exc.code, exc.message, exc.data))
        except Cancelled as exc:
            reply = encode(
                ErrorResponse(request.id, INTERNAL_ERROR, f"request was cancelled: {exc}")
            )
        except Exception as exc:
            _log.debug("%s: handler for %s failed", self.name, request.method, exc_info=True)
            reply = encode(
                ErrorResponse(request.id, INTERNAL_ERROR, str(exc) or type(exc).__name__)
            )
        except (
            BaseException
        ) as exc:  # SystemExit, KeyboardInterrupt, ...: answered, and the worker lives on
            _log.error(
                "%s: handler for %s raised %s",
                self.name,
                request.method,
                type(exc).__name__,
                exc_info=True,
            )
            reply = encode(ErrorResponse(request.id, INTERNAL_ERROR, describe_base_exception(exc)))
        with self._lock:
            sent = self._core.complete(request, reply)
            self._queue_sends(sent, request.id)
        if sent:
            self._flush(block=True)

    # -- writing ----------------------------------------------------------------------------
    def _queue_sends(
        self, actions: list[Action], related: RequestId | None = None, *, caller_reads: bool = False
    ) -> None:
        """Append every Send to the outbox, in order. Called with the registry lock held.

        A response relates to the request it answers; anything else to ``related``.
        ``caller_reads``: the request sent is read by its caller
        (:attr:`~mcp_sync.transports.base.OutboundMeta.caller_reads`).
        """
        for action in actions:
            if isinstance(action, Send):
                message = action.message
                data = message if isinstance(message, bytes) else encode(message)
                meta = describe_outbound(message, related, caller_reads=caller_reads)
                self._outbox.append((data, meta))

    def _flush(self, block: bool) -> None:
        """Write the outbox. With ``block=False`` return at once if another thread is writing
        (that thread, or the next writer, writes what is queued)."""
        if block:
            self._write_lock.acquire()
        elif not self._write_lock.acquire(blocking=False):
            return
        failure: BaseException | None = None
        while True:
            try:
                while self._outbox:
                    data, meta = self._outbox.popleft()
                    if failure is None:
                        if _wire.isEnabledFor(logging.DEBUG):
                            _trace(self.name, "->", data)
                        try:
                            self._write(data, meta)
                        except (OSError, ValueError) as exc:
                            failure = exc
            finally:
                self._write_lock.release()
            # a message queued while we released must not be stranded
            if not self._outbox or not self._write_lock.acquire(blocking=False):
                break
        if failure is not None:
            if isinstance(failure, ConnectionClosed):
                lost: ConnectionClosed = failure  # it already says what ended the connection
            else:
                lost = ConnectionClosed(f"write failed: {failure}")
                lost.__cause__ = failure
            self._connection_lost(lost)

    def _drain_outbox(self, timeout: float) -> None:
        """Write what is queued, waiting at most ``timeout`` for another writer."""
        if not self._outbox or not self._write_lock.acquire(timeout=max(0.0, timeout)):
            return
        try:
            while self._outbox:
                data, meta = self._outbox.popleft()
                if _wire.isEnabledFor(logging.DEBUG):
                    _trace(self.name, "->", data)
                try:
                    self._write(data, meta)
                except (OSError, ValueError):
                    self._outbox.clear()
        finally:
            self._write_lock.release()

    def _connection_lost(self, exception: BaseException) -> None:
        self._callbacks.stop_waiting()  # a reader blocked on a full callback queue goes on
        with self._lock:
            actions = self._core.connection_lost(exception)
        self._perform(actions)
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._open_gate.release()
            callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                _log.exception("close callback failed")
        # a closed connection admits, dispatches, delivers and answers nothing more (a reply
        # a handler makes after this is dropped unshaped): let go of the owner's hooks, which
        # refer back to the owner of this endpoint (a session), so that both are freed as
        # soon as nobody holds them instead of by the garbage collector
        self._admit = self._shape_result = None
        self._request_handler = self._notification_handler = None
        if threading.current_thread() is self._reader:
            self._transport.close()

    # -- diagnostics ------------------------------------------------------------------------
    @property
    def pool(self) -> WorkerPool:
        """The pool that runs this endpoint's request handlers (perhaps shared)."""
        return self._pool

    def in_flight(self) -> tuple[int, int]:
        """Counts of in-flight (inbound, outbound) requests."""
        with self._lock:
            return self._core.in_flight()

    def stats(self) -> EndpointStats:
        """A snapshot of this connection's load: requests in flight, the callback queue and
        the messages dropped so far (see :class:`EndpointStats`)."""
        with self._lock:
            inbound, outbound = self._core.in_flight()
            queued, running = self._core.inbound_by_state()
            dropped = dict(self.dropped)
        return EndpointStats(
            inbound_in_flight=inbound,
            inbound_queued=queued,
            inbound_running=running,
            outbound_in_flight=outbound,
            callback_queue_depth=len(self._callbacks),
            callback_queue_limit=self._callbacks.max_queued,
            dropped=types.MappingProxyType(dropped),
            closed=self.closed,
        )


@dataclass(frozen=True)
class EndpointStats:
    """A snapshot of one connection (:meth:`Endpoint.stats`, :meth:`Client.stats <mcp_sync.client.Client.stats>`).

    Attributes:
        inbound_in_flight: requests from the peer not answered or cancelled yet
            (``inbound_queued + inbound_running``).
        inbound_queued: of those, waiting for a free worker.
        inbound_running: of those, running in a handler.
        outbound_in_flight: our requests waiting for the peer's response.
        callback_queue_depth: callbacks (notifications, progress, cancellation observers)
            waiting for the callback thread.
        callback_queue_limit: the bound of that queue (``max_queued_callbacks``); at the
            bound the reader waits.
        dropped: messages ignored on purpose so far, by reason (for example
            ``"late response after cancellation"`` or ``"nesting too deep: ..."``).
        closed: whether the connection has ended.
    """

    inbound_in_flight: int
    inbound_queued: int
    inbound_running: int
    outbound_in_flight: int
    callback_queue_depth: int
    callback_queue_limit: int
    dropped: Mapping[str, int]
    closed: bool
