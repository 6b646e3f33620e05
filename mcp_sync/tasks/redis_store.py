"""A task store on a Redis server, shared by every worker process that names it.

Each task is one key holding its record as JSON, with a Redis TTL (the task's lifetime);
each owner has a sorted set of its task ids by creation order (``list``), one sorted set
orders every task by the end of its TTL (``purge_expired``, and the count of ``max_tasks``),
and one holds the ended tasks by creation time (the first to drop when the store is full).
A creation is one Lua script (``_redis_insert``): the bound is checked and the task
written in one atomic step, whichever processes create at once. Every transition is optimistic:
``WATCH`` the task's key, read it, apply the rule, and write it back in ``MULTI``/``EXEC``
together with a ``PUBLISH`` of the new record, retried when another client changed the key
meanwhile, so it is a compare-and-set against every process using the server.

:meth:`watch` callbacks hear every process's changes through pub/sub: one listener thread
per store, subscribed to the store's channel while something is watched, reconnecting with
backoff when the connection is lost (and then re-reading every watched task, so a change
published while it was away is still reported).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .._redis_listener import run_pubsub_listener
from .._waiting import wait_sliced
from ..errors import BusUnavailable
from ._common import (
    DEFAULT_MAX_TASKS,
    Clock,
    StoreBase,
    TaskStoreFull,
    Transition,
    expires_at,
    is_expired,
    record_from_json,
    record_to_json,
)
from ._redis_insert import FULL, INSERT_SCRIPT
from .store import TaskRecord

if TYPE_CHECKING:
    import redis as redis_module

__all__ = ["RedisTaskStore", "DEFAULT_MAX_CONNECTIONS", "MAX_CAS_ATTEMPTS", "PURGE_BATCH"]

_log = logging.getLogger("mcp_sync.tasks")

DEFAULT_MAX_CONNECTIONS = 32
"""The most Redis connections one store opens for commands (threads wait for a free one);
the listener has one more of its own."""

MAX_CAS_ATTEMPTS = 1000
"""How often one transition is retried when other clients keep changing the task."""

PURGE_BATCH = 1000
"""The most expired tasks one :meth:`RedisTaskStore.purge_expired` deletes."""


class RedisTaskStore(StoreBase):
    """Tasks on the Redis server at ``url``, shared by every process using the same server,
    database and ``prefix``.

    At most ``max_tasks`` tasks are kept (every owner's, ended ones included), counted over
    every process using the server and prefix: when a new one would pass that, expired tasks
    are deleted, then the oldest ended one, and :class:`~mcp_sync.tasks.TaskStoreFull` is
    raised only when every task still runs -- the memory and SQLite stores' rule, checked in
    the same atomic script that writes the task.

    A Redis error (the server cannot be reached, a command timed out) is raised as
    :class:`~mcp_sync.errors.BusUnavailable`.

    Args:
        url: a Redis URL (``redis://host:port/db``); see ``redis.Redis.from_url``.
        prefix: the start of every key and of the change channel.
        max_tasks: the most tasks the stores sharing ``url`` and ``prefix`` hold (give each
            of them the same number: each checks its own against the shared count).
        max_connections: the bound of the command connection pool.
        socket_timeout: limit of one Redis command and of connecting, in seconds.
        subscribe_timeout: how long :meth:`watch` waits for the listener to be subscribed.
        backoff_initial: first wait before the listener reconnects, in seconds.
        backoff_max: longest wait between its reconnection attempts, in seconds.
        clock: seconds since the epoch (default :func:`time.time`), for tests.
    """

    _wait_poll = 1.0  # changes arrive by pub/sub; the re-read only notices a dead lease

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        prefix: str = "mcp_sync:tasks:",
        max_tasks: int = DEFAULT_MAX_TASKS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        socket_timeout: float = 5.0,
        subscribe_timeout: float = 5.0,
        backoff_initial: float = 0.05,
        backoff_max: float = 2.0,
        clock: Clock | None = None,
    ) -> None:
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError(
                "RedisTaskStore needs the redis package: pip install 'mcp-sync-threaded[redis]'"
            ) from exc
        if not 0 < backoff_initial <= backoff_max:
            raise ValueError("need 0 < backoff_initial <= backoff_max")
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        super().__init__(clock=clock)
        self.max_tasks = max_tasks
        self._redis_module: Any = redis
        self.url = url
        self.prefix = prefix
        self._socket_timeout = socket_timeout
        self._subscribe_timeout = subscribe_timeout
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._pool = redis.BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=socket_timeout,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
        )
        self._client: redis_module.Redis = redis.Redis(connection_pool=self._pool)
        self._channel = prefix + "changes"
        self._seq_key = prefix + "seq"
        self._expiry_key = prefix + "expiry"
        self._ended_key = prefix + "ended"
        self._insert_script: Any = self._client.register_script(INSERT_SCRIPT)
        self._listener_lock = threading.Lock()
        self._listener: threading.Thread | None = None
        self._ending: list[threading.Thread] = []  # listeners told to end, not yet joined
        self._stop = threading.Event()
        self._ready = threading.Event()

    def _task_key(self, task_id: str) -> str:
        return f"{self.prefix}task:{task_id}"

    def _owner_key(self, owner: str) -> str:
        return f"{self.prefix}owner:{owner}"

    @contextmanager
    def _reaching(self) -> Iterator[None]:
        self._check_open()
        try:
            yield
        except self._redis_module.RedisError as exc:
            raise BusUnavailable(
                f"the task store could not use Redis at {self.url}: {exc}"
            ) from exc

    # -- the storage primitives -------------------------------------------------------------

    def _insert(self, record: TaskRecord) -> None:
        end = expires_at(record)
        px = _ms_left(end, record.created_at)
        with self._reaching():
            position = self._insert_script(
                keys=[
                    self._expiry_key,
                    self._ended_key,
                    self._seq_key,
                    self._task_key(record.task_id),
                    self._owner_key(record.owner),
                ],
                args=[
                    self.max_tasks,
                    repr(self._clock()),
                    self.prefix,
                    PURGE_BATCH,
                    record_to_json(record),
                    _index_member(record),
                    "" if px is None else px,
                    record.task_id,
                    "+inf" if end is None else repr(end),
                    int(record.terminal),
                    repr(record.created_at),
                ],
            )
        if int(position) == FULL:
            raise TaskStoreFull(f"the task store holds {self.max_tasks} running tasks")

    def _read(self, task_id: str) -> TaskRecord | None:
        with self._reaching():
            raw = self._client.get(self._task_key(task_id))
        return None if raw is None else record_from_json(raw)

    def _apply(
        self, task_id: str, transition: Transition
    ) -> tuple[TaskRecord | None, TaskRecord | None]:
        key = self._task_key(task_id)
        watch_error = self._redis_module.WatchError
        with self._reaching(), self._client.pipeline(transaction=True) as pipeline:
            pipe: Any = pipeline
            for _ in range(MAX_CAS_ATTEMPTS):
                try:
                    pipe.watch(key)
                    raw = pipe.get(key)
                    if raw is None:
                        pipe.unwatch()
                        return None, None
                    record = record_from_json(raw)
                    now = self._clock()
                    if is_expired(record, now):
                        pipe.multi()
                        self._unindex(pipe, record.owner, record.task_id, _index_member(record))
                        pipe.execute()
                        return None, None
                    changed = transition(record, now)
                    if changed is None:
                        pipe.unwatch()
                        return record, None
                    text = record_to_json(changed)
                    pipe.multi()
                    pipe.set(key, text, keepttl=True)
                    if changed.terminal and not record.terminal:  # the oldest ended goes first
                        pipe.zadd(self._ended_key, {_index_member(record): record.created_at})
                    pipe.publish(self._channel, text)
                    pipe.execute()
                    return changed, changed
                except watch_error:
                    continue
        raise BusUnavailable(f"task {task_id}: gave up after {MAX_CAS_ATTEMPTS} conflicting writes")

    def _unindex(self, pipe: Any, owner: str, task_id: str, member: Any) -> None:
        """Queue the deletion of a task and its index entries on ``pipe`` (``member``: its
        entry in the ``expiry`` and ``ended`` sets), the ``expiry`` removal first."""
        pipe.zrem(self._expiry_key, member)
        pipe.delete(self._task_key(task_id))
        pipe.zrem(self._owner_key(owner), task_id)
        pipe.zrem(self._ended_key, member)

    def _page(self, owner: str, before: int | None, limit: int) -> tuple[list[str], int | None]:
        with self._reaching():
            rows: list[Any] = self._client.zrevrangebyscore(
                self._owner_key(owner),
                "+inf" if before is None else f"({before}",
                "-inf",
                start=0,
                num=limit + 1,
                withscores=True,
            )
        more = len(rows) > limit
        rows = rows[:limit]
        ids = [m.decode() if isinstance(m, bytes) else str(m) for m, _ in rows]
        return ids, (int(rows[-1][1]) if more else None)

    def _delete_expired(self, now: float) -> int:
        """Delete up to :data:`PURGE_BATCH` expired tasks (the next call takes the rest) in
        one transaction."""
        with self._reaching():
            members: list[Any] = self._client.zrangebyscore(
                self._expiry_key, "-inf", now, start=0, num=PURGE_BATCH
            )
            if not members:
                return 0
            pipe = self._client.pipeline(transaction=True)
            for member in members:
                owner, task_id = json.loads(member)
                self._unindex(pipe, owner, task_id, member)
            replies = pipe.execute()
        return sum(int(removed) for removed in replies[::4])  # the expiry removals

    def _close(self) -> None:
        self._stop_listener(force=True)
        self._pool.disconnect()

    # -- watches through pub/sub ---------------------------------------------------------

    def watch(self, task_id: str, callback: Callable[[TaskRecord], None]) -> Callable[[], None]:
        """Watch the task from any process's changes. Raises
        :class:`~mcp_sync.errors.BusUnavailable` when the listener could not subscribe
        within ``subscribe_timeout``."""
        stop_watch = super().watch(task_id, callback)
        with self._listener_lock:
            if self._listener is None:
                self._stop = threading.Event()
                self._ready = threading.Event()
                self._listener = threading.Thread(
                    target=self._listen,
                    args=(self._stop, self._ready),
                    name="mcp-sync-redis-tasks-listener",
                    daemon=True,
                )
                self._listener.start()
            ready = self._ready
        if not wait_sliced(ready.is_set, ready.wait, self._subscribe_timeout):
            stop_watch()
            raise BusUnavailable(
                f"the task store's Redis listener was not subscribed within"
                f" {self._subscribe_timeout} s"
            )

        def stop() -> None:
            stop_watch()
            self._stop_listener(force=False)

        return stop

    def _stop_listener(self, *, force: bool) -> None:
        """Stop the listener once nothing is watched (it ends within a wait slice), or at
        once when ``force`` (closing), which also joins it and every earlier listener still
        ending."""
        with self._listener_lock:
            if self._listener is not None and (force or not self._watchers.task_ids()):
                self._ending.append(self._listener)
                self._listener = None
                self._stop.set()
            self._ending = [t for t in self._ending if t.is_alive()]
            ending = list(self._ending) if force else []
        for thread in ending:  # closing: every listener still ending, not only the last
            if thread is not threading.current_thread():
                thread.join()

    def _listen(self, stop: threading.Event, ready: threading.Event) -> None:
        run_pubsub_listener(
            connect=lambda: self._redis_module.Redis.from_url(
                self.url,
                socket_timeout=self._socket_timeout,
                socket_connect_timeout=self._socket_timeout,
                health_check_interval=max(1.0, self._socket_timeout),
            ),
            subscribe=lambda pubsub: pubsub.subscribe(self._channel),
            subscribed_type="subscribe",
            message_type="message",
            on_subscribed=lambda _reconnected: self._catch_up(),
            on_message=self._received,
            stop=stop,
            ready=ready,
            backoff_initial=self._backoff_initial,
            backoff_max=self._backoff_max,
            errors=(self._redis_module.RedisError, OSError),
            log=_log,
            what="tasks",
        )

    def _catch_up(self) -> None:
        """Report what changed while the listener was not subscribed."""
        for task_id in self._watchers.task_ids():
            try:
                record = self._read(task_id)
            except (BusUnavailable, RuntimeError):
                return
            if record is not None:
                self._watchers.notify(record)

    def _received(self, data: bytes | str) -> None:
        try:
            record = record_from_json(data)
        except (ValueError, TypeError):
            _log.warning("tasks: ignored a message on %s that is not a task record", self._channel)
            return
        self._watchers.notify(record)


def _index_member(record: TaskRecord) -> str:
    return json.dumps([record.owner, record.task_id])


def _ms_left(end: float | None, now: float) -> int | None:
    return None if end is None else max(1, int((end - now) * 1000))
