"""The sans-IO core: in-flight registries and the request state machines.

Nothing here starts a thread, takes a lock or touches a transport. The threaded driver
(:mod:`mcp_sync.endpoint`) calls these methods under one registry lock and carries out the
returned *actions* after releasing it, in order. Every state transition of a request, in
either direction, happens in this module; the tests feed it events in chosen orders.

Inbound requests (the peer asked us)::

    QUEUED --start--> RUNNING --complete--> COMPLETED   (the response is emitted)
      |                  |
      +----cancel--------+------------------> CANCELLED   (no response, ever)

The response is emitted by the same transition that marks the request COMPLETED, so the
"responding" window of the design collapses into one atomic step: a cancellation that
arrives afterwards finds no request and is ignored.

Outbound requests (we asked the peer)::

    PENDING --response--> COMPLETED
       +----cancel/timeout----> CANCEL_REQUESTED   (notifications/cancelled emitted once;
       |                                              a later response is dropped quietly)
       +----connection lost---> FAILED
"""

from __future__ import annotations

import copy
import enum
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ConnectionClosed, PeerMisbehaved
from .jsonrpc import (
    INVALID_REQUEST,
    ErrorResponse,
    InvalidMessage,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    id_key,
    is_valid_id,
)

__all__ = [
    "InboundState",
    "OutboundState",
    "InboundRequest",
    "OutboundRequest",
    "Send",
    "Dispatch",
    "CancelInbound",
    "Settle",
    "Deliver",
    "Progress",
    "Dropped",
    "Action",
    "RequestRegistry",
    "UNCANCELLABLE_METHODS",
    "CANCELLED_METHOD",
    "PROGRESS_METHOD",
    "NOT_RUNNING",
]

CANCELLED_METHOD = "notifications/cancelled"
PROGRESS_METHOD = "notifications/progress"
UNCANCELLABLE_METHODS = frozenset({"initialize"})
"""Requests that are never cancelled on the wire and whose cancellation is ignored."""

NOT_RUNNING = "notification for a request that is not running"
"""The :class:`Dropped` detail of a notification about an inbound request that was already
cancelled or answered (see :meth:`RequestRegistry.notify_related`)."""

_RECENT_CANCELS = 4096


class InboundState(enum.Enum):
    """States of a request the peer sent us."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class OutboundState(enum.Enum):
    """States of a request we sent the peer."""

    PENDING = "pending"
    COMPLETED = "completed"
    CANCEL_REQUESTED = "cancel_requested"
    FAILED = "failed"


class InboundRequest:
    """A request the peer sent us, with its cancellation token."""

    __slots__ = (
        "id",
        "method",
        "params",
        "token",
        "state",
        "cancel_reason",
        "context",
        "__weakref__",
    )

    def __init__(self, request: Request, token: Any) -> None:
        self.id: RequestId = request.id
        self.method = request.method
        self.params: dict[str, Any] = request.params if request.params is not None else {}
        self.token = token
        self.state = InboundState.QUEUED
        self.cancel_reason: str | None = None
        self.context: Any = None
        """The application's own object for this request (a server keeps its
        :class:`~mcp_sync.server.RequestScope` here); the core never reads it."""

    @property
    def progress_token(self) -> str | int | None:
        """The ``_meta.progressToken`` the peer supplied, if any."""
        meta = self.params.get("_meta")
        if type(meta) is dict:
            token = meta.get("progressToken")
            if is_valid_id(token):
                return token
        return None

    def __repr__(self) -> str:
        return f"<InboundRequest {self.method} id={self.id!r} {self.state.value}>"


class OutboundRequest:
    """A request we sent the peer. ``context`` is the driver's own object (its future)."""

    __slots__ = ("id", "method", "state", "progress_token", "context", "cancelled", "__weakref__")

    def __init__(self, request_id: int, method: str, context: Any) -> None:
        self.id = request_id
        self.method = method
        self.state = OutboundState.PENDING
        self.progress_token: int | None = None
        self.context = context
        self.cancelled = False
        """True when the call ended by a cancellation (not a timeout or a failure)."""

    def __repr__(self) -> str:
        return f"<OutboundRequest {self.method} id={self.id!r} {self.state.value}>"


# -- actions ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Send:
    """Write this to the peer. ``message`` is a message object or pre-encoded bytes."""

    message: Message | bytes


@dataclass(frozen=True)
class Dispatch:
    """Schedule the handler for this newly registered inbound request."""

    request: InboundRequest


@dataclass(frozen=True)
class CancelInbound:
    """Fire the token of this inbound request: its cancellation won."""

    request: InboundRequest
    reason: str | None


@dataclass(frozen=True)
class Settle:
    """An outbound request has its outcome.

    Exactly one of: ``response`` (a :class:`Response` or :class:`ErrorResponse` from the peer),
    ``exception`` (a local failure such as a timeout or a closed connection), or
    ``cancelled=True``.
    """

    request: OutboundRequest
    response: Response | ErrorResponse | None = None
    exception: BaseException | None = None
    cancelled: bool = False
    reason: str | None = None


@dataclass(frozen=True)
class Deliver:
    """Hand this notification to the application."""

    notification: Notification


@dataclass(frozen=True)
class Progress:
    """A progress notification for a pending outbound request."""

    request: OutboundRequest
    params: dict[str, Any]


@dataclass(frozen=True)
class Dropped:
    """Input that was ignored on purpose (for logs and diagnostics; nothing is sent)."""

    detail: str
    message: Any = None


Action = Send | Dispatch | CancelInbound | Settle | Deliver | Progress | Dropped


def _our_id(response_id: RequestId) -> int | None:
    """The integer id of ours a response names; our ids are integers, and a peer that echoes
    ``7`` as ``"7"`` is tolerated."""
    if isinstance(response_id, str):
        return int(response_id) if response_id.isascii() and response_id.isdigit() else None
    return response_id


class RequestRegistry:
    """The requests in flight on one JSON-RPC connection, both directions, without I/O.

    ``token_factory`` makes the cancellation handle of each inbound request at registration
    (the driver passes :class:`~mcp_sync.cancel.CancelToken`).

    Not thread-safe by itself: the driver serialises calls with its registry lock.
    """

    def __init__(self, token_factory: Callable[[], Any]) -> None:
        self._token_factory = token_factory
        self._inbound: dict[tuple[type, RequestId], InboundRequest] = {}
        self._outbound: dict[int, OutboundRequest] = {}
        self._progress: dict[tuple[type, RequestId], OutboundRequest] = {}
        self._ids = itertools.count(1)
        self._recent_cancels: deque[int] = deque(maxlen=_RECENT_CANCELS)
        self._recent_cancel_set: set[int] = set()
        self._closed: BaseException | None = None

    # -- introspection -----------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True after :meth:`connection_lost`."""
        return self._closed is not None

    def inbound(self, request_id: RequestId) -> InboundRequest | None:
        """The in-flight inbound request with exactly this id (type included), if any."""
        return self._inbound.get(id_key(request_id))

    def outbound(self, request_id: int) -> OutboundRequest | None:
        """The pending outbound request with this id, if any."""
        return self._outbound.get(request_id)

    def in_flight(self) -> tuple[int, int]:
        """Counts of in-flight (inbound, outbound) requests."""
        return len(self._inbound), len(self._outbound)

    def inbound_by_state(self) -> tuple[int, int]:
        """Counts of in-flight inbound requests (queued, running)."""
        running = sum(
            1 for request in self._inbound.values() if request.state is InboundState.RUNNING
        )
        return len(self._inbound) - running, running

    # -- input from the peer -----------------------------------------------------------------
    def receive(self, message: Message | InvalidMessage) -> list[Action]:
        """Process one decoded message from the peer."""
        if self._closed is not None:
            return [Dropped("connection closed", message)]
        if isinstance(message, Request):
            return self._receive_request(message)
        if isinstance(message, Notification):
            if message.method == CANCELLED_METHOD:
                return self._receive_cancel(message)
            if message.method == PROGRESS_METHOD:
                return self._receive_progress(message)
            return [Deliver(message)]
        if isinstance(message, (Response, ErrorResponse)):
            return self._receive_response(message)
        actions: list[Action] = [Dropped(message.detail, message.raw)]
        if message.reply is not None:
            actions.insert(0, Send(message.reply))
        if message.response_id is not None:
            actions[:0] = self._receive_invalid_response(message.response_id, message.detail)
        return actions

    def _receive_invalid_response(self, response_id: RequestId, detail: str) -> list[Action]:
        """An invalid response whose id names a pending call: that call fails at once."""
        request = self._match_outbound(response_id)
        if request is None:
            return []
        failure = PeerMisbehaved(
            f"{request.method}: the peer sent an invalid response ({detail})", detail
        )
        return self.fail_outbound(request, failure)

    def _match_outbound(self, response_id: RequestId) -> OutboundRequest | None:
        """The pending outbound request a response id names (``"7"`` matches our ``7``)."""
        our_id = _our_id(response_id)
        return None if our_id is None else self._outbound.get(our_id)

    def _receive_request(self, message: Request) -> list[Action]:
        key = id_key(message.id)
        if key in self._inbound:
            reply = ErrorResponse(message.id, INVALID_REQUEST, "request id is already in use")
            return [Send(reply), Dropped("duplicate request id", message)]
        request = InboundRequest(message, self._token_factory())
        self._inbound[key] = request
        return [Dispatch(request)]

    def _receive_cancel(self, message: Notification) -> list[Action]:
        params = message.params or {}
        target = params.get("requestId")
        if not is_valid_id(target):
            return [Dropped("malformed cancellation", message)]
        request = self._inbound.get(id_key(target))
        if request is None:
            return [Dropped("cancellation of an unknown or finished request", message)]
        if request.method in UNCANCELLABLE_METHODS:
            return [Dropped(f"{request.method} cannot be cancelled", message)]
        reason = params.get("reason")
        return self._cancel_inbound(request, reason if type(reason) is str else None)

    def _cancel_inbound(self, request: InboundRequest, reason: str | None) -> list[Action]:
        # only QUEUED/RUNNING requests are registered
        request.state = InboundState.CANCELLED
        request.cancel_reason = reason
        del self._inbound[id_key(request.id)]
        return [CancelInbound(request, reason)]

    def _receive_progress(self, message: Notification) -> list[Action]:
        params = message.params or {}
        token = params.get("progressToken")
        if not is_valid_id(token):
            return [Dropped("malformed progress notification", message)]
        request = self._progress.get(id_key(token))
        if request is None:
            return [Dropped("progress for an unknown or finished request", message)]
        return [Progress(request, params)]

    def _receive_response(self, message: Response | ErrorResponse) -> list[Action]:
        if message.id is None:
            return [Dropped("the peer reported an error without an id", message)]
        request = self._match_outbound(message.id)
        if request is None:
            if _our_id(message.id) in self._recent_cancel_set:
                return [Dropped("late response after cancellation", message)]
            return [Dropped("response to an unknown id", message)]
        self._forget_outbound(request)
        request.state = OutboundState.COMPLETED
        return [Settle(request, response=message)]

    # -- inbound requests, our side ----------------------------------------------------------
    def start(self, request: InboundRequest) -> bool:
        """QUEUED -> RUNNING. False if the request was cancelled while queued."""
        if request.state is not InboundState.QUEUED:
            return False
        request.state = InboundState.RUNNING
        return True

    def complete(
        self, request: InboundRequest, reply: Response | ErrorResponse | bytes
    ) -> list[Action]:
        """The handler finished: emit ``reply`` unless the cancellation won."""
        if request.state not in (InboundState.RUNNING, InboundState.QUEUED):
            return []
        request.state = InboundState.COMPLETED
        del self._inbound[id_key(request.id)]
        return [Send(reply)]

    def may_report_progress(self, request: InboundRequest) -> bool:
        """True while a progress notification for ``request`` may still be sent."""
        return request.state is InboundState.RUNNING and request.progress_token is not None

    def notify_related(self, request: InboundRequest, message: Notification) -> list[Action]:
        """A notification about the inbound ``request`` (its progress, a log message it
        produced): emitted only while the request is RUNNING.

        Once the request is cancelled or answered -- or before it started -- nothing more is
        written for it: the notification is :class:`Dropped` (:data:`NOT_RUNNING`). The same
        transition that ends the request decides, so a notification and a cancellation
        cannot both win.
        """
        if self._closed is not None:
            return [Dropped("connection closed", message)]
        if request.state is not InboundState.RUNNING:
            return [Dropped(NOT_RUNNING, message)]
        return [Send(message)]

    # -- outbound requests -------------------------------------------------------------------
    def send_request(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        context: Any = None,
        with_progress: bool = False,
    ) -> tuple[OutboundRequest, list[Action]]:
        """Register a new outbound request and emit it.

        With ``with_progress`` a ``_meta.progressToken`` (equal to the request id) is added.
        Raises :class:`ConnectionClosed` after :meth:`connection_lost`.
        """
        if self._closed is not None:
            raise ConnectionClosed(f"connection is closed: {self._closed}")
        request = OutboundRequest(next(self._ids), method, context)
        if with_progress:
            params = dict(params or {})
            meta = dict(params.get("_meta") or {})
            meta["progressToken"] = request.id
            params["_meta"] = meta
            request.progress_token = request.id
            self._progress[id_key(request.id)] = request
        self._outbound[request.id] = request
        return request, [Send(Request(request.id, method, params))]

    def cancel_outbound(
        self,
        request: OutboundRequest,
        reason: str | None = None,
        exception: BaseException | None = None,
    ) -> list[Action]:
        """PENDING -> CANCEL_REQUESTED. Emits ``notifications/cancelled`` (never for
        ``initialize``) and settles the call: as cancelled, or with ``exception`` (a timeout).

        Returns no actions if the request was no longer pending: the caller lost the race.
        """
        if request.state is not OutboundState.PENDING:
            return []
        self._forget_outbound(request)
        request.state = OutboundState.CANCEL_REQUESTED
        request.cancelled = exception is None
        self._recent_cancels.append(request.id)
        if len(self._recent_cancel_set) >= _RECENT_CANCELS:
            self._recent_cancel_set = set(self._recent_cancels)
        self._recent_cancel_set.add(request.id)
        actions: list[Action] = []
        if self._closed is None and request.method not in UNCANCELLABLE_METHODS:
            params: dict[str, Any] = {"requestId": request.id}
            if reason is not None:
                params["reason"] = reason
            actions.append(Send(Notification(CANCELLED_METHOD, params)))
        if exception is not None:
            actions.append(Settle(request, exception=exception, reason=reason))
        else:
            actions.append(Settle(request, cancelled=True, reason=reason))
        return actions

    def fail_outbound(self, request: OutboundRequest, exception: BaseException) -> list[Action]:
        """PENDING -> FAILED: settle the call with ``exception`` and send nothing (the
        transport knows the peer never got the request, or the call's answer cannot be
        read). No actions if the request was no longer pending.

        A response that arrives later anyway is dropped quietly, like one after a cancel.
        """
        if request.state is not OutboundState.PENDING:
            return []
        self._forget_outbound(request)
        request.state = OutboundState.FAILED
        self._recent_cancels.append(request.id)
        if len(self._recent_cancel_set) >= _RECENT_CANCELS:
            self._recent_cancel_set = set(self._recent_cancels)
        self._recent_cancel_set.add(request.id)
        return [Settle(request, exception=exception)]

    def abandon(self, request: OutboundRequest) -> None:
        """Forget a request whose emitted message could not be encoded (it was never sent)."""
        if request.state is OutboundState.PENDING:
            self._forget_outbound(request)
            request.state = OutboundState.FAILED

    def _forget_outbound(self, request: OutboundRequest) -> None:
        del self._outbound[request.id]
        if request.progress_token is not None:
            self._progress.pop(id_key(request.progress_token), None)

    # -- the end -----------------------------------------------------------------------------
    def connection_lost(self, exception: BaseException | None = None) -> list[Action]:
        """Fail every pending outbound call and cancel every inbound request. Idempotent."""
        if self._closed is not None:
            return []
        exc = exception if exception is not None else ConnectionClosed("connection closed")
        self._closed = exc
        actions: list[Action] = []
        for request in list(self._inbound.values()):
            actions.extend(self._cancel_inbound(request, "connection closed"))
        for out in list(self._outbound.values()):
            self._forget_outbound(out)
            out.state = OutboundState.FAILED
            # one exception object per call: each is raised in its own thread. A
            # ConnectionClosed subclass (a session that ended, an HTTP refusal) keeps its type.
            failure = (
                copy.copy(exc) if isinstance(exc, ConnectionClosed) else ConnectionClosed(str(exc))
            )
            failure.__cause__ = exc.__cause__ if isinstance(exc, ConnectionClosed) else exc
            actions.append(Settle(out, exception=failure))
        return actions
