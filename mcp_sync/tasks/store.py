"""The task store interface: where tasks live, and the one place their race is decided.

A task store keeps :class:`TaskRecord` rows and is the single authority on a task's state.
Every transition goes through one of its methods, and each method is a compare-and-set
inside the store (a lock in memory, a transaction in SQLite, an atomic script in Redis), so
that when a handler's completion races a ``tasks/cancel`` exactly one of them wins and the
loser sees that it lost. A terminal state (``completed``, ``failed``, ``cancelled``) never
changes again.

Several processes may share one store (SQLite on one machine for restarts, Redis for worker
processes): the server running a task's handler :meth:`~TaskStore.watch`\\ es its record, so
a cancel or an input answer written by any process reaches that handler. A worker holds a
*lease* on each task it runs and renews it; a reader that finds a non-terminal task whose
lease ran out marks it ``failed`` (the worker died), so no task is left ``working`` for ever.

Visibility: every read or write a requestor makes names its ``owner`` key (the session at
2025-11-25, the authenticated principal at 2026-07-28); a task of another owner looks
exactly like an unknown task.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal, TypeVar

from ..errors import TaskAlreadyTerminal, TaskNotFound  # every exception lives in errors

__all__ = [
    "TaskStatus",
    "TERMINAL_STATUSES",
    "TaskRecord",
    "TaskStore",
    "TaskNotFound",
    "TaskAlreadyTerminal",
]

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
"""The five states of a task; the last three are terminal."""

TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
"""The states a task never leaves."""


@dataclasses.dataclass(frozen=True)
class TaskRecord:
    """One task as the store holds it at one version (an immutable snapshot).

    Attributes:
        task_id: unguessable id (at least 128 random bits).
        owner: the requestor key the task belongs to.
        status: one of :data:`TaskStatus`.
        status_message: a human-readable note on the status, if any.
        created_at: creation time, seconds since the epoch.
        updated_at: time of the last change, seconds since the epoch.
        ttl_ms: lifetime from creation in milliseconds (``None``: unlimited).
        poll_interval_ms: the polling interval suggested to requestors.
        outcome: set exactly when ``completed`` or ``failed``: ``{"result": {...}}`` (what the
            request would have returned) or ``{"error": {"code": ..., "message": ...}}`` (a
            JSON-RPC error); ``None`` while running and once ``cancelled``.
        input_requests: while ``input_required``: the requests waiting for the requestor,
            keyed by ids unique for the task's lifetime.
        input_responses: answers the requestor has sent and the handler has not taken yet.
        worker: the id of the worker running the handler (``None`` when none is).
        lease_expires_at: when the worker's lease ends unless renewed (seconds since epoch).
        version: grows by one on every change; a waiter compares it.
        meta: free-form data the server keeps with the task (e.g. the method and the era).
    """

    task_id: str
    owner: str
    status: TaskStatus
    created_at: float
    updated_at: float
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None
    outcome: Mapping[str, Any] | None = None
    input_requests: Mapping[str, Any] | None = None
    input_responses: Mapping[str, Any] | None = None
    worker: str | None = None
    lease_expires_at: float | None = None
    version: int = 1
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        """``True`` once the task is ``completed``, ``failed`` or ``cancelled``."""
        return self.status in TERMINAL_STATUSES


_Store = TypeVar("_Store", bound="TaskStore")


class TaskStore(abc.ABC):
    """Where tasks live. Thread-safe; every method is atomic against every other one,
    in this process and in every process sharing the same backing store.

    Methods that take ``owner`` raise :class:`TaskNotFound` for a task that is not that
    owner's (or does not exist, or has expired); the others are the running server's own
    and take no owner. Implementations: :class:`~mcp_sync.tasks.MemoryTaskStore`,
    :class:`~mcp_sync.tasks.SqliteTaskStore`, :class:`~mcp_sync.tasks.RedisTaskStore`.

    What a record holds (``meta``, ``outcome``, input requests and responses) must be JSON:
    anything else is a :class:`TypeError` and changes nothing. Every record handed out is a
    snapshot that shares nothing with the store.
    """

    # -- the requestor's side ------------------------------------------------------------

    @abc.abstractmethod
    def create(
        self,
        *,
        owner: str,
        ttl_ms: int | None,
        poll_interval_ms: int | None = None,
        worker: str | None = None,
        lease_seconds: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> TaskRecord:
        """Create a ``working`` task, durably (a :meth:`get` from any process finds it once
        this returns), held by ``worker`` for ``lease_seconds``. The store may shorten
        ``ttl_ms`` to its own maximum; the record says what was granted."""

    @abc.abstractmethod
    def get(self, task_id: str, *, owner: str) -> TaskRecord:
        """The task as it is now. A non-terminal task whose lease has run out is first
        marked ``failed`` (its worker is gone). Raises :class:`TaskNotFound`."""

    @abc.abstractmethod
    def list(
        self, *, owner: str, cursor: str | None = None, limit: int = 50
    ) -> tuple[list[TaskRecord], str | None]:
        """The owner's tasks, newest first, a page at a time: ``(records, next_cursor)``
        (``next_cursor`` is ``None`` on the last page). Raises :class:`ValueError` for a
        cursor this store did not give out."""

    @abc.abstractmethod
    def cancel(self, task_id: str, *, owner: str, message: str | None = None) -> TaskRecord:
        """Make a non-terminal task ``cancelled`` (the compare-and-set: it stays so whatever
        the handler does later) and return it. Raises :class:`TaskNotFound`, or
        :class:`TaskAlreadyTerminal` when it had already ended."""

    @abc.abstractmethod
    def answer_input(self, task_id: str, *, owner: str, responses: Mapping[str, Any]) -> TaskRecord:
        """Add input responses for the handler to take (keys it did not ask for, or has had
        answered, are ignored). Raises :class:`TaskNotFound`; on a terminal task it changes
        nothing and returns the record."""

    # -- the running server's side ---------------------------------------------------------

    @abc.abstractmethod
    def set_status(
        self,
        task_id: str,
        status: Literal["working", "input_required"],
        *,
        message: str | None = None,
        input_requests: Mapping[str, Any] | None = None,
        taken_responses: Collection[str] = (),
    ) -> TaskRecord:
        """Move a non-terminal task between ``working`` and ``input_required`` (with the
        requests it waits for). ``taken_responses`` names the answers the handler has taken:
        they leave ``input_responses`` in the same atomic change, and every other answer
        stays (one may have arrived since the handler read the record). On a
        terminal task nothing changes and the record is returned as it is (check
        ``record.terminal``). Raises :class:`TaskNotFound` for an unknown id."""

    @abc.abstractmethod
    def finish(
        self,
        task_id: str,
        status: Literal["completed", "failed"],
        outcome: Mapping[str, Any],
        *,
        message: str | None = None,
    ) -> bool:
        """End the task with ``outcome``. Returns ``True`` if this call made it terminal,
        ``False`` if it was terminal already (e.g. cancelled first): the compare-and-set
        that decides a completion racing a cancel."""

    @abc.abstractmethod
    def renew_lease(self, task_id: str, *, worker: str, lease_seconds: float) -> bool:
        """Extend ``worker``'s lease; ``False`` when the task is terminal or not its."""

    @abc.abstractmethod
    def watch(self, task_id: str, callback: Callable[[TaskRecord], None]) -> Callable[[], None]:
        """Call ``callback(record)`` after each change to the task, from whichever process
        made it (on a thread of the store's; callbacks must not block), a change made while
        ``watch`` registers included. Returns a function that stops the watch (idempotent)."""

    @abc.abstractmethod
    def wait_changed(
        self, task_id: str, *, owner: str, after_version: int, timeout: float | None
    ) -> TaskRecord:
        """Block until the task's version is above ``after_version`` (or it is terminal), or
        ``timeout`` seconds pass, and return the record as it then is. Waits are sliced so
        Ctrl-C works. Raises :class:`TaskNotFound`."""

    @abc.abstractmethod
    def purge_expired(self) -> int:
        """Delete tasks past their TTL; returns how many went."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections and threads (idempotent). Watches stop."""

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
