"""The client side of ``subscriptions/listen`` (protocol 2026-07-28).

:meth:`Client.listen <mcp_sync.client.Client.listen>` sends the listen request, blocks until
the server's ``notifications/subscriptions/acknowledged`` arrives and returns a
:class:`Subscription`. Its notifications reach the caller either through a callback
(``on_notification``, on the client's callback thread, in arrival order) or by iterating the
subscription (a bounded queue). Several subscriptions may be open on one connection: the
:class:`ListenRouter` of the connection hands every notification tagged with
``_meta["io.modelcontextprotocol/subscriptionId"]`` to the subscription of that id.

:meth:`Subscription.close` (idempotent) cancels the listen request, which sends
``notifications/cancelled`` naming its id. The server may end a subscription itself
(shutdown) by answering the listen request: the subscription then ends *gracefully*
(:attr:`Subscription.ended_gracefully`). When the connection ends, iteration raises
:class:`~mcp_sync.errors.ConnectionClosed`.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from typing_extensions import Self

from ._waiting import wait_for_condition
from .errors import Cancelled, ConnectionClosed, McpError, RequestTimeout, WaitTimeout
from .jsonrpc import Notification, RequestId
from .lifecycle import ACKNOWLEDGED_METHOD, LISTEN_METHOD, SUBSCRIPTION_ID_KEY

if TYPE_CHECKING:  # pragma: no cover
    from .endpoint import Endpoint, PendingCall

__all__ = [
    "DEFAULT_MAX_PENDING",
    "ListenEvent",
    "Subscription",
    "ListenRouter",
    "listen_params",
]


DEFAULT_MAX_PENDING = 1024
"""Default bound of the notifications an iterated :class:`Subscription` keeps unread; when
it is full the oldest is dropped (counted in :attr:`Subscription.dropped`)."""

_END = object()


@dataclass(frozen=True)
class ListenEvent:
    """One notification delivered on a subscription.

    Attributes:
        method: e.g. ``"notifications/tools/list_changed"`` or
            ``"notifications/resources/updated"``.
        params: its params, ``_meta`` included.
    """

    method: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def uri(self) -> str | None:
        """The updated resource's URI (``notifications/resources/updated``), else ``None``."""
        uri = self.params.get("uri")
        return uri if isinstance(uri, str) else None


def listen_params(
    *,
    tools: bool = False,
    prompts: bool = False,
    resources_list: bool = False,
    resources: Sequence[str] = (),
    tasks: Sequence[str] = (),
) -> dict[str, Any]:
    """The params of a listen request (before its envelope): the ``notifications`` filter
    (``tasks``: the ids of tasks whose ``notifications/tasks`` are wanted, tasks extension)."""
    if isinstance(resources, str) or isinstance(tasks, str):
        raise TypeError("resources= and tasks= take sequences, not one string")
    wanted: dict[str, Any] = {}
    if tools:
        wanted["toolsListChanged"] = True
    if prompts:
        wanted["promptsListChanged"] = True
    if resources_list:
        wanted["resourcesListChanged"] = True
    if resources:
        wanted["resourceSubscriptions"] = list(dict.fromkeys(resources))
    if tasks:
        wanted["taskIds"] = list(dict.fromkeys(tasks))
    return {"notifications": wanted}


class Subscription:
    """One open ``subscriptions/listen`` stream (made by :meth:`Client.listen
    <mcp_sync.client.Client.listen>`).

    Iterate it (``for event in sub``) to receive :class:`ListenEvent` objects, or give
    ``on_notification`` to ``listen()``; iteration ends when the subscription ends (closed
    here or by the server) and raises :class:`~mcp_sync.errors.ConnectionClosed` when the
    connection was lost. Usable as a context manager (closed on exit).

    Attributes:
        id: the subscription id (the listen request's JSON-RPC id).
        requested: the filter sent (the ``notifications`` object).
        acknowledged: the subset the server agreed to deliver (``None`` until acknowledged).
    """

    def __init__(
        self,
        router: ListenRouter,
        requested: dict[str, Any],
        on_notification: Callable[[ListenEvent], Any] | None,
        max_pending: int,
    ) -> None:
        self._router = router
        self.requested = requested
        self.acknowledged: dict[str, Any] | None = None
        self._on_notification = on_notification
        self._call: PendingCall | None = None
        self._cond = threading.Condition()
        self._events: collections.deque[Any] = collections.deque()
        self._max_pending = max_pending
        self._closed = False
        self._ended: BaseException | None = None  # why the stream ended, once it did
        self._graceful = False
        self.dropped = 0
        """Notifications lost because the unread queue was full (iteration only)."""

    @property
    def id(self) -> RequestId:
        """The subscription id (the listen request's JSON-RPC id)."""
        assert self._call is not None and self._call.request_id is not None
        return self._call.request_id

    @property
    def active(self) -> bool:
        """True from the acknowledgement until the subscription ends."""
        with self._cond:
            return self.acknowledged is not None and self._ended is None

    @property
    def ended_gracefully(self) -> bool:
        """True when the server ended the subscription with its closing result."""
        return self._graceful

    # -- fed by the router (on the client's callback thread, in arrival order) --------------
    def _acknowledge(self, params: Mapping[str, Any]) -> None:
        wanted = params.get("notifications")
        with self._cond:
            self.acknowledged = dict(wanted) if isinstance(wanted, Mapping) else {}
            self._cond.notify_all()

    def _deliver(self, event: ListenEvent) -> None:
        with self._cond:
            if self._ended is not None or self.acknowledged is None:
                return  # nothing counts before the acknowledgement or after the end
            if self._on_notification is None:
                if len(self._events) >= self._max_pending:
                    self._events.popleft()
                    self.dropped += 1
                self._events.append(event)
                self._cond.notify_all()
                return
        self._on_notification(event)

    def _end(self, reason: BaseException, graceful: bool = False) -> None:
        with self._cond:
            if self._ended is not None:
                return
            self._ended = reason
            self._graceful = graceful
            self._events.append(_END)
            self._cond.notify_all()
        self._router._forget(self)

    # -- the caller's side ------------------------------------------------------------------
    def _wait_acknowledged(self, timeout: float | None) -> None:
        def acked_or_ended() -> bool:
            return self.acknowledged is not None or self._ended is not None

        if not wait_for_condition(self._cond, acked_or_ended, timeout):
            self.close()
            raise RequestTimeout(f"subscriptions/listen: not acknowledged within {timeout} s")
        ended = self._ended
        if self.acknowledged is None and ended is not None and not isinstance(ended, StopIteration):
            raise ended

    def next(self, timeout: float | None = None) -> ListenEvent:
        """The next notification, waiting up to ``timeout`` seconds (``None``: no limit).

        Raises:
            StopIteration: the subscription ended (closed, or ended by the server).
            ConnectionClosed: the connection was lost.
            McpError: the server answered the listen request with an error.
            TimeoutError: nothing arrived within ``timeout``
                (:class:`~mcp_sync.errors.WaitTimeout`).
        """
        if self._on_notification is not None:
            raise RuntimeError("this subscription delivers to its on_notification callback")

        if not wait_for_condition(self._cond, lambda: bool(self._events), timeout):
            raise WaitTimeout()
        with self._cond:
            item = self._events[0]
            if item is _END:  # stays queued: every later call sees the end too
                ended = self._ended
                if isinstance(ended, (ConnectionClosed, McpError)):
                    raise ended
                raise StopIteration
            self._events.popleft()
            assert isinstance(item, ListenEvent)
            return item

    def __iter__(self) -> Iterator[ListenEvent]:
        while True:
            try:
                yield self.next()
            except StopIteration:
                return

    def close(self) -> None:
        """End the subscription: the listen request is cancelled (``notifications/cancelled``
        naming its id is sent once). Idempotent; never waits for the server."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
        if self._call is not None:
            self._call.cancel("subscription closed")
        self._end(Cancelled("subscription closed"))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        ident = self._call.request_id if self._call is not None else None
        return f"<Subscription {ident!r} {'active' if self.active else 'ended'}>"


class ListenRouter:
    """The open subscriptions of one connection: hands each tagged notification to its
    subscription (``subscriptionId`` = the listen request's id)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        # held while a listen request is sent and its id recorded, and while a tagged
        # notification is routed: an acknowledgement cannot overtake its own registration
        self._lock = threading.Lock()
        self._open: dict[RequestId, Subscription] = {}
        self.unrouted = 0
        """Tagged notifications whose subscription is not open here (late or unknown)."""

    def open(
        self,
        params: dict[str, Any],
        *,
        on_notification: Callable[[ListenEvent], Any] | None = None,
        ack_timeout: float | None = 30.0,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> Subscription:
        """Send a listen request (``params`` already carry the envelope) and return its
        subscription once acknowledged.

        Raises:
            McpError: the server refused the listen request.
            RequestTimeout: no acknowledgement within ``ack_timeout`` (the request is
                cancelled).
            ConnectionClosed: the connection ended first.
        """
        notifications = params.get("notifications")
        sub = Subscription(
            self,
            dict(notifications) if isinstance(notifications, Mapping) else {},
            on_notification,
            max_pending,
        )
        with self._lock:
            call = self._endpoint.submit(LISTEN_METHOD, params, timeout=None)
            sub._call = call
            if call.request_id is not None and not call.done():
                self._open[call.request_id] = sub
        call.add_done_callback(lambda done: self._settled(sub, done))
        sub._wait_acknowledged(ack_timeout)
        return sub

    def _settled(self, sub: Subscription, call: concurrent.futures.Future[Any]) -> None:
        """The listen request ended: queued behind the notifications that came before."""
        self._endpoint.run_callback(self._finish, sub, call)

    @staticmethod
    def _finish(sub: Subscription, call: concurrent.futures.Future[Any]) -> None:
        try:
            call.result(0)
        except BaseException as exc:  # refused, cancelled here, or the connection ended
            sub._end(exc)
        else:
            sub._end(StopIteration(), graceful=True)

    def _forget(self, sub: Subscription) -> None:
        with self._lock:
            for key, value in list(self._open.items()):
                if value is sub:
                    del self._open[key]

    def route(self, notification: Notification) -> bool:
        """Hand ``notification`` to its subscription; False if it carries no subscription
        id (an ordinary notification)."""
        params = notification.params or {}
        meta = params.get("_meta")
        if not isinstance(meta, Mapping) or SUBSCRIPTION_ID_KEY not in meta:
            return False
        with self._lock:
            sub = self._lookup(meta[SUBSCRIPTION_ID_KEY])
            if sub is None:
                self.unrouted += 1
                return True
        if notification.method == ACKNOWLEDGED_METHOD:
            sub._acknowledge(params)
        else:
            sub._deliver(ListenEvent(notification.method, params))
        return True

    def _lookup(self, key: Any) -> Subscription | None:
        sub = (
            self._open.get(key)
            if isinstance(key, (int, str)) and not isinstance(key, bool)
            else None
        )
        if sub is None and isinstance(key, str) and key.isdigit():  # a peer echoing "7" for 7
            sub = self._open.get(int(key))
        return sub

    def subscriptions(self) -> list[Subscription]:
        """The open subscriptions."""
        with self._lock:
            return list(self._open.values())
