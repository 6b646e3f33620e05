"""``subscriptions/listen`` (protocol 2026-07-28): long-lived notification streams.

A client opens a stream with a ``subscriptions/listen`` request whose ``notifications``
filter names what it wants (``toolsListChanged``, ``promptsListChanged``,
``resourcesListChanged``, ``resourceSubscriptions``). The server:

* answers first with ``notifications/subscriptions/acknowledged`` carrying the subset of the
  filter it honours (what its capabilities support);
* then sends, on that stream only, the notifications the filter asked for, each tagged with
  ``_meta["io.modelcontextprotocol/subscriptionId"]`` = the listen request's id (never a
  progress or log message);
* keeps the request open until the client cancels it (``notifications/cancelled`` naming the
  listen id; nothing more is sent for it afterwards), the connection ends, or the server
  ends it itself (:meth:`ServerSession.close <mcp_sync.server.ServerSession.close>`, for
  example at shutdown) with the graceful result
  ``{"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": id}}``.

The server ends a stream with that result only, never with a ``notifications/cancelled`` of
its own: the result is the JSON-RPC answer that ends the request, and the subscriptions page
of the specification asks for it; a cancellation sent after it would name a request that is
already answered.

Threads: an open subscription holds **no thread**. The listen handler registers it and
returns :data:`~mcp_sync.endpoint.ANSWER_LATER` (the worker is free at once); notifications
are written by the thread that delivers the change: the bus's one delivery thread (see
:mod:`mcp_sync.server.bus`). The bus is subscribed while at least one stream is open in this
process and closed with the last one.

Changes travel over the server's :class:`~mcp_sync.server.bus.MessageBus` (``Server(bus=)``,
an :class:`~mcp_sync.server.bus.InProcessBus` by default), so a change raised in one process
reaches the streams of every process sharing the bus (:class:`~mcp_sync.server.bus.RedisBus`).

Bounds: at most ``max_per_connection`` open streams per connection and ``max_total`` per
server (``Server(max_subscriptions_per_connection=, max_subscriptions=)``); a listen beyond
either is refused with a JSON-RPC error (-32603, ``data.limit``) and holds nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..cancel import CancelToken
from ..endpoint import ANSWER_LATER
from ..errors import McpError
from ..jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, RequestId
from ..lifecycle import ACKNOWLEDGED_METHOD, SUBSCRIPTION_ID_KEY, TASKS_EXTENSION
from ..protocol import InboundRequest
from .bus import BusMessage, MessageBus, Subscription

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession

__all__ = [
    "DEFAULT_MAX_PER_CONNECTION",
    "DEFAULT_MAX_TOTAL",
    "ListenFilter",
    "ListenStream",
    "ListenHub",
    "TASK_NOTIFICATION",
    "task_event",
]

_log = logging.getLogger("mcp_sync.server")


DEFAULT_MAX_PER_CONNECTION = 16
"""Default bound of open ``subscriptions/listen`` streams on one connection."""

DEFAULT_MAX_TOTAL = 1024
"""Default bound of open ``subscriptions/listen`` streams of one server (one process)."""

_LIST_FLAGS = {
    "tools": "toolsListChanged",
    "prompts": "promptsListChanged",
    "resources": "resourcesListChanged",
}
"""List kind -> the filter flag asking for its ``notifications/<kind>/list_changed``."""


@dataclass(frozen=True)
class ListenFilter:
    """What a stream delivers: the ``notifications`` member of a listen request.

    Attributes:
        lists: the list kinds (``"tools"``, ``"prompts"``, ``"resources"``) whose
            ``list_changed`` notifications are wanted.
        resource_uris: the URIs whose ``notifications/resources/updated`` are wanted (exact
            match), in the order the client gave them.
    """

    lists: frozenset[str] = frozenset()
    resource_uris: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()
    """(tasks extension) The tasks whose ``notifications/tasks`` are wanted."""

    @classmethod
    def from_wire(cls, value: object) -> ListenFilter:
        """Read a ``SubscriptionFilter``; :class:`~mcp_sync.errors.McpError` (-32602) when it
        is malformed. Unknown members are ignored (extensions may add some)."""
        if not isinstance(value, Mapping):
            raise McpError(
                INVALID_PARAMS, "subscriptions/listen: params.notifications must be an object"
            )
        lists = set()
        for kind, flag in _LIST_FLAGS.items():
            wanted = value.get(flag)
            if wanted is not None and not isinstance(wanted, bool):
                raise McpError(
                    INVALID_PARAMS, f"subscriptions/listen: notifications.{flag} must be a boolean"
                )
            if wanted:
                lists.add(kind)
        uris = value.get("resourceSubscriptions")
        if uris is None:
            uris = []
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
            raise McpError(
                INVALID_PARAMS,
                "subscriptions/listen: notifications.resourceSubscriptions must be an array of strings",
            )
        task_ids = value.get("taskIds") or []
        if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
            raise McpError(
                INVALID_PARAMS,
                "subscriptions/listen: notifications.taskIds must be an array of strings",
            )
        return cls(frozenset(lists), tuple(dict.fromkeys(uris)), tuple(dict.fromkeys(task_ids)))

    def honoured(self, capabilities: Mapping[str, Any]) -> ListenFilter:
        """The subset a server with these ``capabilities`` can deliver."""
        lists = frozenset(
            kind
            for kind in self.lists
            if isinstance(capabilities.get(kind), Mapping) and capabilities[kind].get("listChanged")
        )
        resources = capabilities.get("resources")
        subscribable = isinstance(resources, Mapping) and bool(resources.get("subscribe"))
        extensions = capabilities.get("extensions")
        tasks = isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions
        return ListenFilter(
            lists, self.resource_uris if subscribable else (), self.task_ids if tasks else ()
        )

    def to_wire(self) -> dict[str, Any]:
        """The ``SubscriptionFilter`` object (only what is asked for)."""
        wire: dict[str, Any] = {
            flag: True for kind, flag in _LIST_FLAGS.items() if kind in self.lists
        }
        if self.resource_uris:
            wire["resourceSubscriptions"] = list(self.resource_uris)
        if self.task_ids:
            wire["taskIds"] = list(self.task_ids)
        return wire

    def wants(self, event: Mapping[str, Any]) -> str | None:
        """The notification method this filter delivers for a bus ``event``, or ``None``."""
        kind = event.get("list")
        if isinstance(kind, str):
            return f"notifications/{kind}/list_changed" if kind in self.lists else None
        uri = event.get("uri")
        if isinstance(uri, str) and uri in self.resource_uris:
            return "notifications/resources/updated"
        task_id = event.get("taskId")
        if isinstance(task_id, str) and task_id in self.task_ids:
            return TASK_NOTIFICATION
        return None


def list_changed_event(kind: str) -> dict[str, Any]:
    """The bus event for "the ``kind`` list changed"."""
    return {"list": kind}


def resource_updated_event(uri: str) -> dict[str, Any]:
    """The bus event for "the resource ``uri`` was updated"."""
    return {"uri": uri}


TASK_NOTIFICATION = "notifications/tasks"
"""(tasks extension) The notification carrying a task's detailed state."""


def task_event(task_id: str, detailed: Mapping[str, Any]) -> dict[str, Any]:
    """The bus event for "task ``task_id`` changed" (``detailed``: its ``DetailedTask``)."""
    return {"taskId": task_id, "task": dict(detailed)}


class ListenStream:
    """One open ``subscriptions/listen`` stream of one connection (made by :class:`ListenHub`).

    Attributes:
        session: the connection.
        request: the listen request, kept open until the stream ends.
        filter: what the server agreed to deliver (the acknowledged subset).
    """

    def __init__(
        self,
        hub: ListenHub,
        session: ServerSession,
        request: InboundRequest,
        honoured: ListenFilter,
    ) -> None:
        self._hub = hub
        self.session = session
        self.request = request
        self.filter = honoured
        # held while a frame is written and while the stream ends: after end() returns,
        # nothing more is written for the stream
        self._lock = threading.Lock()
        self._open = True
        self._acknowledged = False

    @property
    def id(self) -> RequestId:
        """The subscription id: the listen request's JSON-RPC id."""
        return self.request.id

    @property
    def open(self) -> bool:
        """True until the stream ended (by either side, or with the connection)."""
        return self._open

    def _meta(self) -> dict[str, Any]:
        return {SUBSCRIPTION_ID_KEY: self.request.id}

    def _send(self, method: str, params: dict[str, Any]) -> bool:
        """Write one tagged frame if the stream is acknowledged and still open."""
        with self._lock:
            # the token fires before the stream is ended: a cancel read meanwhile stops it too
            if not (self._open and self._acknowledged) or self.request.token.cancelled:
                return False
            return self._write(method, params)

    def _write(self, method: str, params: dict[str, Any]) -> bool:
        try:
            self.session.send_notification(
                method, {**params, "_meta": self._meta()}, related_request=self.request.id
            )
        except Exception:
            _log.debug("listen %r: %s not delivered", self.request.id, method, exc_info=True)
            return False
        return True

    def acknowledge(self) -> bool:
        """Send ``notifications/subscriptions/acknowledged``, the stream's first frame (a
        change delivered meanwhile waits for it; one raised before it is not delivered)."""
        with self._lock:
            if not self._open or self._acknowledged or self.request.token.cancelled:
                return False
            self._acknowledged = True
            return self._write(ACKNOWLEDGED_METHOD, {"notifications": self.filter.to_wire()})

    def offer(self, event: Mapping[str, Any]) -> bool:
        """Deliver a bus ``event`` if the filter asks for it; True if a frame was written."""
        method = self.filter.wants(event)
        if method is None:
            return False
        params: dict[str, Any] = {}
        uri = event.get("uri")
        if method == "notifications/resources/updated" and isinstance(uri, str):
            params["uri"] = uri
        task = event.get("task")
        if method == TASK_NOTIFICATION and isinstance(task, Mapping):
            params.update(task)
        return self._send(method, params)

    def end(self, *, graceful: bool) -> bool:
        """End the stream; with ``graceful`` answer the listen request with the completion
        result (the server's own end of the stream). True if this call ended it."""
        with self._lock:
            if not self._open:
                return False
            self._open = False
            if graceful:
                result = {"resultType": "complete", "_meta": self._meta()}
                try:
                    self.session.endpoint.respond(self.request, result)
                except Exception:
                    _log.debug(
                        "listen %r: closing result not delivered", self.request.id, exc_info=True
                    )
        self._hub._forget(self)
        return True

    def _on_cancelled(self, _token: CancelToken) -> None:
        self.end(graceful=False)

    def __repr__(self) -> str:
        return f"<ListenStream {self.request.id!r} {'open' if self._open else 'ended'}>"


class ListenHub:
    """The open ``subscriptions/listen`` streams of one :class:`~mcp_sync.server.Server`, and
    their feed from the server's bus.

    Args:
        bus: where changes arrive (any process of the deployment may publish them).
        topic: the bus topic of this server's changes.
        max_per_connection: bound of open streams per connection.
        max_total: bound of open streams of this hub.
    """

    def __init__(
        self,
        bus: MessageBus,
        topic: str,
        *,
        max_per_connection: int = DEFAULT_MAX_PER_CONNECTION,
        max_total: int = DEFAULT_MAX_TOTAL,
    ) -> None:
        if max_per_connection < 1 or max_total < 1:
            raise ValueError("subscription bounds must be at least 1")
        self.bus = bus
        self.topic = topic
        self.max_per_connection = max_per_connection
        self.max_total = max_total
        self._lock = threading.Lock()
        self._streams: dict[int, ListenStream] = {}  # id(stream) -> stream, in opening order
        self._feed: Subscription | None = None
        self._feed_lock = threading.Lock()  # serialises opening and closing the bus feed

    # -- publishing -------------------------------------------------------------------------
    def publish(self, event: Mapping[str, Any]) -> None:
        """Publish a change on the bus (errors are logged: a change is advisory)."""
        try:
            self.bus.publish(self.topic, event)
        except Exception:
            _log.warning("change not published on the bus: %r", dict(event), exc_info=True)

    # -- streams ----------------------------------------------------------------------------
    def streams(self, session: ServerSession | None = None) -> list[ListenStream]:
        """The open streams (of ``session`` only, if given), in opening order."""
        with self._lock:
            return [s for s in self._streams.values() if session is None or s.session is session]

    def open(
        self, session: ServerSession, request: InboundRequest, capabilities: Mapping[str, Any]
    ) -> Any:
        """Serve a listen request: acknowledge it and keep it open. Returns
        :data:`~mcp_sync.endpoint.ANSWER_LATER` (the request is answered when the stream ends).

        Raises:
            McpError: -32602 for a malformed filter; -32603 when a bound is reached.
        """
        params = request.params if isinstance(request.params, Mapping) else {}
        honoured = ListenFilter.from_wire(params.get("notifications")).honoured(capabilities)
        stream = ListenStream(self, session, request, honoured)
        with self._lock:
            mine = sum(1 for s in self._streams.values() if s.session is session)
            if mine >= self.max_per_connection:
                raise McpError(
                    INTERNAL_ERROR,
                    f"subscriptions/listen: at most {self.max_per_connection} open subscriptions per connection",
                    {"limit": self.max_per_connection, "scope": "connection"},
                )
            if len(self._streams) >= self.max_total:
                raise McpError(
                    INTERNAL_ERROR,
                    f"subscriptions/listen: at most {self.max_total} open subscriptions on this server",
                    {"limit": self.max_total, "scope": "server"},
                )
            self._streams[id(stream)] = stream
        try:
            self._ensure_feed()
        except BaseException:
            self._forget(stream)
            raise
        stream.acknowledge()
        # after the ack (the callback runs at once if the token fired meanwhile)
        request.token.add_callback(stream._on_cancelled)
        return ANSWER_LATER

    def end_session(self, session: ServerSession) -> int:
        """End every stream of ``session`` gracefully (the closing result); the count."""
        return sum(1 for stream in self.streams(session) if stream.end(graceful=True))

    def end_all(self) -> int:
        """End every open stream gracefully; the count."""
        return sum(1 for stream in self.streams() if stream.end(graceful=True))

    # -- the bus feed -----------------------------------------------------------------------
    def _ensure_feed(self) -> None:
        with self._feed_lock:
            if self._feed is None or self._feed.closed:
                self._feed = self.bus.subscribe(self.topic, self._deliver)

    def _forget(self, stream: ListenStream) -> None:
        with self._lock:
            self._streams.pop(id(stream), None)
            idle = not self._streams
        if idle:
            self._release_feed()

    def _release_feed(self) -> None:
        with self._feed_lock:
            with self._lock:
                if self._streams:
                    return
            feed, self._feed = self._feed, None
        if feed is not None:
            feed.close()

    def _deliver(self, message: BusMessage) -> None:
        """The bus callback: hand the change to every stream that asked for it."""
        for stream in self.streams():
            stream.offer(message.event)
