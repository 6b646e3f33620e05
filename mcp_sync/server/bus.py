"""A message bus for server-side notifications that must reach every process of a deployment.

A change raised in one process (a tool list changed, a resource was updated) must reach the
listeners held by every process serving the same endpoint, for example every worker of
``gunicorn -w 4``. A :class:`MessageBus` carries such events by *topic*:

* :meth:`MessageBus.publish` sends one event (a JSON object) on one topic;
* :meth:`MessageBus.subscribe` calls a callback with a :class:`BusMessage` for every event
  published on the given topics after it returned, and gives back a :class:`Subscription`
  whose :meth:`~Subscription.close` ends it.

Two implementations:

* :class:`InProcessBus` (the default): one process; ``publish`` hands the event to the
  subscribers of this bus object only.
* :class:`RedisBus`: Redis pub/sub (``pip install 'mcp-sync-threaded[redis]'``); every bus
  connected to the same Redis server and channel prefix receives every event, whichever
  process published it, its own included.

Threads and bounds (both implementations):

* Callbacks run on **one delivery thread per bus**, in publish order (Redis: in the order the
  server relayed them); for one event, subscribers are called in the order they subscribed.
  A callback that raises is logged (logger ``mcp_sync.server.bus``) and counted; delivery goes
  on. Callbacks should be quick (hand the event to the listener's own queue): a slow callback
  delays every later event of that bus.
* Events wait for the delivery thread in a **bounded** queue (``queue_size`` events). When it
  is full, the **oldest** waiting event is dropped and counted in ``BusStats.dropped``
  (one per subscriber that would have received it); ``publish`` never blocks on a slow
  subscriber.
* The threads exist only while the bus has at least one open subscription: the first
  subscription starts them, closing the last one (or the bus) stops and joins them.
  :class:`RedisBus` runs two: a listener that reads from Redis and the delivery thread. No
  thread is started per subscriber or per event.

Events are JSON objects; both implementations encode them to JSON (so an event that works
in-process works over Redis, and a subscriber never sees the publisher's own dict). The
encoded form carries a schema version (:data:`SCHEMA_VERSION`) and the publishing process's
identity (:func:`process_id`), so a subscriber can tell its own process's events
(:attr:`BusMessage.from_this_process`).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from typing_extensions import Self

from .._redis_listener import run_pubsub_listener
from .._waiting import WAIT_SLICE, wait_sliced
from ..errors import BusUnavailable

if TYPE_CHECKING:  # pragma: no cover - typing only; redis is an optional extra
    import redis as redis_module

__all__ = [
    "SCHEMA_VERSION",
    "DEFAULT_QUEUE_SIZE",
    "BusCallback",
    "BusMessage",
    "BusStats",
    "MessageBus",
    "Subscription",
    "InProcessBus",
    "RedisBus",
    "process_id",
    "encode_event",
    "decode_event",
]

log = logging.getLogger(__name__)

#: Version of the encoded event (the ``"v"`` member); an event of another version is
#: rejected by the receiving bus (counted in ``BusStats.rejected``).
SCHEMA_VERSION = 1

#: Default bound of the delivery queue, in events.
DEFAULT_QUEUE_SIZE = 1024


@dataclass(frozen=True)
class BusMessage:
    """One event as a subscriber receives it.

    Attributes:
        topic: the topic it was published on.
        event: the event (a JSON object, decoded afresh for this bus; treat it as read-only,
            since every subscriber of the bus receives the same dict).
        origin: :func:`process_id` of the process that published it.
    """

    topic: str
    event: dict[str, Any]
    origin: str

    @property
    def from_this_process(self) -> bool:
        """True when this process published the event."""
        return self.origin == process_id()


#: The callback of a subscription, called on the bus's delivery thread with each event.
BusCallback = Callable[[BusMessage], None]


@dataclass(frozen=True)
class BusStats:
    """Counters of one bus since it was created.

    Attributes:
        published: events this bus object published.
        delivered: callback calls made (one per subscriber per event), raising ones included.
        dropped: callback calls lost because the delivery queue was full (drop-oldest).
        callback_errors: callback calls that raised.
        rejected: received events that could not be decoded or have another schema version.
        reconnects: times the bus connected again after losing its broker (Redis only).
    """

    published: int = 0
    delivered: int = 0
    dropped: int = 0
    callback_errors: int = 0
    rejected: int = 0
    reconnects: int = 0


@runtime_checkable
class MessageBus(Protocol):
    """What the server needs from a bus (see the module docs for the guarantees)."""

    def publish(self, topic: str, event: Mapping[str, Any]) -> None:
        """Send ``event`` to every subscriber of ``topic``; never waits for the subscribers.

        Raises:
            TypeError: the event is not a JSON-encodable object.
            BusUnavailable: the broker could not be reached (the event is lost).
        """
        ...

    def subscribe(self, topics: str | Iterable[str], callback: BusCallback) -> Subscription:
        """Call ``callback`` with every event published on ``topics`` from now on.

        Raises:
            BusUnavailable: the subscription could not be made active in time.
            RuntimeError: the bus is closed.
        """
        ...

    def stats(self) -> BusStats:
        """The bus's counters."""
        ...

    def close(self) -> None:
        """Close every subscription and stop the bus's threads; idempotent."""
        ...


# -- process identity -------------------------------------------------------------------------

_identity: tuple[int, str] | None = None
_identity_lock = threading.Lock()


def _reset_identity_lock() -> None:
    global _identity_lock
    _identity_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_identity_lock)


def process_id() -> str:
    """This process's identity on a bus: ``host/pid/random``, new in every forked child."""
    global _identity
    pid = os.getpid()
    current = _identity
    if current is not None and current[0] == pid:
        return current[1]
    with _identity_lock:
        if _identity is None or _identity[0] != pid:
            _identity = (pid, f"{socket.gethostname()}/{pid}/{uuid.uuid4().hex[:12]}")
        return _identity[1]


# -- the encoded form -------------------------------------------------------------------------


def encode_event(topic: str, event: Mapping[str, Any]) -> str:
    """The JSON text a bus sends for ``event`` on ``topic``."""
    _check_topic(topic)
    if not isinstance(event, Mapping):
        raise TypeError(f"a bus event must be a JSON object, not {type(event).__name__}")
    try:
        return json.dumps(
            {"v": SCHEMA_VERSION, "origin": process_id(), "topic": topic, "event": dict(event)},
            separators=(",", ":"),
            allow_nan=False,
        )
    except (TypeError, ValueError) as exc:
        raise TypeError(f"a bus event must be JSON-encodable: {exc}") from None


def decode_event(data: str | bytes) -> BusMessage | None:
    """The :class:`BusMessage` encoded in ``data``, or ``None`` when it is not one."""
    try:
        obj = json.loads(data)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("v") != SCHEMA_VERSION:
        return None
    topic, event, origin = obj.get("topic"), obj.get("event"), obj.get("origin")
    if not isinstance(topic, str) or not isinstance(event, dict) or not isinstance(origin, str):
        return None
    return BusMessage(topic=topic, event=event, origin=origin)


def _check_topic(topic: str) -> None:
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"a bus topic must be a non-empty string, not {topic!r}")


def _topic_set(topics: str | Iterable[str]) -> frozenset[str]:
    names = frozenset([topics] if isinstance(topics, str) else topics)
    if not names:
        raise ValueError("subscribe to at least one topic")
    for name in names:
        _check_topic(name)
    return names


# -- subscriptions and the delivery thread ----------------------------------------------------


class _ClosedOnExit:
    """Context-manager support for anything with ``close()``."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Subscription(_ClosedOnExit):
    """One subscriber's registration on a bus; made by :meth:`MessageBus.subscribe`.

    Usable as a context manager (closed on exit).
    """

    def __init__(
        self, dispatcher: _Dispatcher, topics: frozenset[str], callback: BusCallback
    ) -> None:
        self._dispatcher = dispatcher
        self._callback = callback
        self._closed = False
        self.topics: frozenset[str] = topics
        """The topics this subscription receives."""

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (or the bus was closed)."""
        return self._closed

    def close(self) -> None:
        """End the subscription; idempotent.

        When it returns, the callback is not running and will not be called again, unless
        ``close()`` was called from inside the callback itself (then the running call
        finishes normally). Do not call it while holding a lock that the callback takes.
        """
        self._dispatcher.remove(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Subscription {sorted(self.topics)} {state}>"


class _Dispatcher:
    """The subscriber table, the bounded queue and the delivery thread shared by both buses."""

    def __init__(
        self, name: str, queue_size: int, on_idle: Callable[[], None] | None = None
    ) -> None:
        if queue_size < 1:
            raise ValueError(f"queue_size must be at least 1, not {queue_size}")
        self._name = name
        self._queue_size = queue_size
        self._on_idle = on_idle
        self._cond = threading.Condition()
        self._subscriptions: list[Subscription] = []  # in subscription order
        self._queue: collections.deque[tuple[BusMessage, tuple[Subscription, ...]]] = (
            collections.deque()
        )
        self._thread: threading.Thread | None = None
        self._calling: dict[threading.Thread, Subscription] = {}
        self._closed = False
        self.delivered = 0
        self.dropped = 0
        self.callback_errors = 0
        self.rejected = 0

    @property
    def closed(self) -> bool:
        return self._closed

    def subscription_count(self) -> int:
        with self._cond:
            return len(self._subscriptions)

    def add(self, topics: frozenset[str], callback: BusCallback) -> Subscription:
        if not callable(callback):
            raise TypeError("the callback must be callable")
        with self._cond:
            if self._closed:
                raise RuntimeError("the bus is closed")
            sub = Subscription(self, topics, callback)
            self._subscriptions.append(sub)
            if self._thread is None:
                thread = threading.Thread(
                    target=self._run, name=f"{self._name}-delivery", daemon=True
                )
                self._thread = thread
                thread.start()
        return sub

    def remove(self, sub: Subscription) -> None:
        me = threading.current_thread()
        stopped: threading.Thread | None = None
        with self._cond:
            if not sub._closed:
                sub._closed = True
                self._subscriptions.remove(sub)
                if not self._subscriptions:
                    stopped, self._thread = self._thread, None
                    self._queue.clear()
                    self._cond.notify_all()
            # A call of this subscriber that already started on another thread ends first.
            while any(s is sub and t is not me for t, s in self._calling.items()):
                self._cond.wait(WAIT_SLICE)
        if stopped is not None:
            if stopped is not me:
                stopped.join()
            if self._on_idle is not None:
                self._on_idle()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            subs = list(self._subscriptions)
        for sub in subs:
            sub.close()

    def dispatch(self, message: BusMessage) -> None:
        with self._cond:
            targets = tuple(s for s in self._subscriptions if message.topic in s.topics)
            if not targets:
                return
            if len(self._queue) >= self._queue_size:
                _, lost = self._queue.popleft()
                self.dropped += sum(1 for s in lost if not s._closed)
            self._queue.append((message, targets))
            self._cond.notify_all()

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                while not self._queue and self._thread is me:
                    self._cond.wait()
                if self._thread is not me:
                    return
                message, targets = self._queue.popleft()
            for sub in targets:
                with self._cond:
                    if sub._closed:
                        continue
                    self._calling[me] = sub
                    self.delivered += 1
                try:
                    sub._callback(message)
                except BaseException:  # SystemExit too: one subscriber never ends delivery
                    with self._cond:
                        self.callback_errors += 1
                    log.exception("bus subscriber %r failed on topic %r", sub, message.topic)
                finally:
                    with self._cond:
                        del self._calling[me]
                        self._cond.notify_all()


# -- the in-process bus -----------------------------------------------------------------------


class InProcessBus(_ClosedOnExit):
    """A bus for one process: events reach the subscribers of this bus object only.

    Args:
        queue_size: bound of the delivery queue, in events (drop-oldest when full).
    """

    def __init__(self, *, queue_size: int = DEFAULT_QUEUE_SIZE) -> None:
        self._dispatcher = _Dispatcher("mcp_sync-bus", queue_size)
        self._lock = threading.Lock()
        self._published = 0

    def publish(self, topic: str, event: Mapping[str, Any]) -> None:
        """Queue ``event`` for the subscribers of ``topic``; returns at once."""
        if self._dispatcher.closed:
            raise RuntimeError("the bus is closed")
        message = decode_event(encode_event(topic, event))
        assert message is not None
        with self._lock:
            self._published += 1
        self._dispatcher.dispatch(message)

    def subscribe(self, topics: str | Iterable[str], callback: BusCallback) -> Subscription:
        """Call ``callback`` on the delivery thread with every event later published on
        ``topics`` (one topic or several)."""
        return self._dispatcher.add(_topic_set(topics), callback)

    def stats(self) -> BusStats:
        """The bus's counters."""
        with self._lock:
            published = self._published
        return _stats(self._dispatcher, published=published)

    def close(self) -> None:
        """Close every subscription and join the delivery thread; idempotent."""
        self._dispatcher.close()


def _stats(dispatcher: _Dispatcher, *, published: int, reconnects: int = 0) -> BusStats:
    with dispatcher._cond:
        return BusStats(
            published=published,
            delivered=dispatcher.delivered,
            dropped=dispatcher.dropped,
            callback_errors=dispatcher.callback_errors,
            rejected=dispatcher.rejected,
            reconnects=reconnects,
        )


# -- the Redis bus ----------------------------------------------------------------------------


class RedisBus(_ClosedOnExit):
    """A bus over Redis pub/sub: events reach every bus on the same server and prefix.

    Topic ``T`` is the Redis channel ``prefix + T``. The listener subscribes once to the
    pattern ``prefix*`` and picks the subscribed topics locally, so subscribing and closing a
    subscription send nothing to Redis; each process receives every event under the prefix.

    Failure behaviour: Redis pub/sub keeps nothing, so events published while a listener is
    disconnected never reach it. A lost connection is retried with exponential backoff from
    ``backoff_initial`` to ``backoff_max`` seconds (counted in ``BusStats.reconnects``
    once connected again); subscriptions stay open meanwhile. :meth:`publish` raises
    :class:`~mcp_sync.errors.BusUnavailable` when Redis cannot be reached within
    ``socket_timeout``; :meth:`subscribe` waits up to ``subscribe_timeout`` for the listener
    to be subscribed and raises it otherwise.

    Args:
        url: a Redis URL (``redis://host:port/db``); see ``redis.Redis.from_url``.
        prefix: the channel prefix shared by every bus of one deployment.
        queue_size: bound of the delivery queue, in events (drop-oldest when full).
        socket_timeout: limit of one Redis command (publish) and of connecting, in seconds.
        subscribe_timeout: how long :meth:`subscribe` waits for the listener to be active.
        backoff_initial: first wait before reconnecting, in seconds.
        backoff_max: longest wait between reconnection attempts, in seconds.
        health_check_interval: the listener pings Redis when it has heard nothing for this
            many seconds, so a connection that died silently is noticed (within about
            ``health_check_interval + socket_timeout``).
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        prefix: str = "mcp_sync:",
        queue_size: int = DEFAULT_QUEUE_SIZE,
        socket_timeout: float = 5.0,
        subscribe_timeout: float = 5.0,
        backoff_initial: float = 0.05,
        backoff_max: float = 2.0,
        health_check_interval: float = 30.0,
    ) -> None:
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError(
                "RedisBus needs the redis package: pip install 'mcp-sync-threaded[redis]'"
            ) from exc
        if not 0 < backoff_initial <= backoff_max:
            raise ValueError("need 0 < backoff_initial <= backoff_max")
        self._redis: Any = redis
        self._url = url
        self._prefix = prefix
        self._socket_timeout = socket_timeout
        self._subscribe_timeout = subscribe_timeout
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._health_check_interval = health_check_interval
        self._publisher: redis_module.Redis = self._client()
        self._dispatcher = _Dispatcher("mcp_sync-redis-bus", queue_size, self._on_idle)
        self._lock = threading.Lock()  # the listener's start and stop
        self._counters = threading.Lock()  # never held while waiting for a thread
        self._published = 0
        self._reconnects = 0
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()

    def _client(self, health_check_interval: float = 0) -> redis_module.Redis:
        redis = self._redis
        return redis.Redis.from_url(  # type: ignore[no-any-return]
            self._url,
            socket_timeout=self._socket_timeout,
            socket_connect_timeout=self._socket_timeout,
            retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0),
            health_check_interval=health_check_interval,
        )

    @property
    def connected(self) -> bool:
        """True while the listener is connected and subscribed."""
        return self._ready.is_set()

    def publish(self, topic: str, event: Mapping[str, Any]) -> None:
        """Publish ``event`` on Redis; returns once Redis accepted it.

        Raises:
            BusUnavailable: Redis could not be reached; the event is lost.
        """
        if self._dispatcher.closed:
            raise RuntimeError("the bus is closed")
        payload = encode_event(topic, event)
        try:
            self._publisher.publish(self._prefix + topic, payload)
        except self._redis.RedisError as exc:
            raise BusUnavailable(f"could not publish on Redis: {exc}") from exc
        with self._counters:
            self._published += 1

    def subscribe(self, topics: str | Iterable[str], callback: BusCallback) -> Subscription:
        """Call ``callback`` on the delivery thread with every event later published on
        ``topics`` by any bus on the same Redis server and prefix.

        Raises:
            BusUnavailable: the listener was not subscribed within ``subscribe_timeout``.
        """
        sub = self._dispatcher.add(_topic_set(topics), callback)
        with self._lock:
            if self._listener is None and not sub.closed:
                self._stop = threading.Event()
                self._ready = threading.Event()
                self._listener = threading.Thread(
                    target=self._listen,
                    args=(self._stop, self._ready),
                    name="mcp_sync-redis-bus-listener",
                    daemon=True,
                )
                self._listener.start()
            ready = self._ready
        if sub.closed:  # the bus was closed meanwhile
            return sub
        if not wait_sliced(ready.is_set, ready.wait, self._subscribe_timeout):
            sub.close()
            raise BusUnavailable(
                f"the Redis listener was not subscribed within {self._subscribe_timeout} s"
            )
        return sub

    def stats(self) -> BusStats:
        """The bus's counters."""
        with self._counters:
            published, reconnects = self._published, self._reconnects
        return _stats(self._dispatcher, published=published, reconnects=reconnects)

    def close(self) -> None:
        """Close every subscription, stop and join both threads, release the connections;
        idempotent."""
        self._dispatcher.close()
        self._on_idle()
        _quietly(self._publisher.close)

    def _on_idle(self) -> None:
        """Stop the listener once no subscription is left."""
        with self._lock:
            if self._dispatcher.subscription_count() or self._listener is None:
                return
            listener, self._listener = self._listener, None
            self._stop.set()
            self._ready.clear()
            if listener is not threading.current_thread():
                listener.join()

    def _listen(self, stop: threading.Event, ready: threading.Event) -> None:
        run_pubsub_listener(
            connect=lambda: self._client(self._health_check_interval),
            subscribe=lambda pubsub: pubsub.psubscribe(self._prefix + "*"),
            subscribed_type="psubscribe",
            message_type="pmessage",
            on_subscribed=self._subscribed,
            on_message=self._received,
            stop=stop,
            ready=ready,
            backoff_initial=self._backoff_initial,
            backoff_max=self._backoff_max,
            errors=(self._redis.RedisError, OSError),
            log=log,
            what="bus",
        )

    def _subscribed(self, reconnected: bool) -> None:
        if reconnected:
            with self._counters:
                self._reconnects += 1
            log.info("bus: connected to Redis again")

    def _received(self, data: str | bytes) -> None:
        message = decode_event(data)
        if message is None:
            with self._dispatcher._cond:
                self._dispatcher.rejected += 1
            return
        self._dispatcher.dispatch(message)


def _quietly(action: Callable[[], object]) -> None:
    try:
        action()
    except Exception:  # pragma: no cover - closing a broken connection
        log.debug("bus: error while closing a Redis connection", exc_info=True)
