"""What every task store shares: ids, cursors, the TTL and lease policy, the transitions, and
the watch registry with :meth:`~mcp_sync.tasks.TaskStore.wait_changed` built on top of it.

A store supplies only its storage: :class:`StoreBase` implements every method of
:class:`~mcp_sync.tasks.TaskStore` in terms of four primitives (insert a record, read one,
apply a transition atomically, read a page of an owner's tasks), and the transitions are the
pure functions here, so the rules are written once and each backend only makes them atomic
(a lock, a transaction, WATCH/MULTI).
"""

from __future__ import annotations

import abc
import base64
import binascii
import dataclasses
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

from .._waiting import WAIT_SLICE, wait_for_condition
from ..errors import TaskStoreFull
from .store import TaskAlreadyTerminal, TaskNotFound, TaskRecord, TaskStore

__all__ = [
    "MAX_TTL_MS",
    "MAX_LEASE_SECONDS",
    "MAX_PAGE_SIZE",
    "LEASE_EXPIRED_MESSAGE",
    "DEFAULT_MAX_TASKS",
    "TaskStoreFull",
    "Clock",
    "Transition",
    "new_task_id",
    "encode_cursor",
    "decode_cursor",
    "page_size",
    "granted_ttl_ms",
    "expires_at",
    "is_expired",
    "record_to_json",
    "record_from_json",
    "new_record",
    "StoreBase",
]

_log = logging.getLogger("mcp_sync.tasks")

MAX_TTL_MS = 7 * 24 * 3600 * 1000
"""The longest lifetime a store grants (a week); a longer or unlimited ``ttl_ms`` is shortened."""

MAX_LEASE_SECONDS = 3600.0
"""The longest lease a worker may take or renew at once (an hour)."""

MAX_PAGE_SIZE = 100
"""The most tasks one :meth:`~mcp_sync.tasks.TaskStore.list` page holds."""

DEFAULT_MAX_TASKS = 10_000
"""How many tasks (of every owner, terminal ones included) a store holds at most, unless told
otherwise (``max_tasks`` of every store; a SQLite file or a Redis prefix counts them over
every process using it)."""


LEASE_EXPIRED_MESSAGE = "the worker running this task stopped (its lease ran out)"
"""The ``status_message`` of a task marked ``failed`` because its worker's lease ran out."""

_LEASE_EXPIRED_CODE = -32603  # JSON-RPC internal error

_CURSOR_TAG = "mcp-sync-tasks/1"

Clock = Callable[[], float]
"""Seconds since the epoch (``time.time``); injectable so tests move time without sleeping."""

Transition = Callable[[TaskRecord, float], TaskRecord | None]
"""``(record, now) -> new record``, or ``None`` for "no change"; may raise
:class:`~mcp_sync.tasks.TaskAlreadyTerminal`."""


def new_task_id() -> str:
    """An unguessable task id: 192 random bits, URL-safe."""
    return secrets.token_urlsafe(24)


def encode_cursor(position: int) -> str:
    """The opaque cursor for "the page after the task at ``position``" (a store's own
    creation sequence number)."""
    raw = json.dumps([_CURSOR_TAG, position], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The position in a cursor :func:`encode_cursor` made; :class:`ValueError` otherwise."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        tag, position = json.loads(raw)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise ValueError(f"not a task list cursor: {cursor!r}") from exc
    if tag != _CURSOR_TAG or type(position) is not int or position < 0:
        raise ValueError(f"not a task list cursor: {cursor!r}")
    return position


def page_size(limit: int) -> int:
    """``limit`` kept within 1..:data:`MAX_PAGE_SIZE`."""
    return max(1, min(int(limit), MAX_PAGE_SIZE))


def granted_ttl_ms(ttl_ms: int | None) -> int:
    """The lifetime a store grants for a requested ``ttl_ms`` (``None``: the maximum)."""
    if ttl_ms is None:
        return MAX_TTL_MS
    return max(0, min(int(ttl_ms), MAX_TTL_MS))


def _lease_seconds(seconds: float) -> float:
    return max(0.0, min(float(seconds), MAX_LEASE_SECONDS))


def expires_at(record: TaskRecord) -> float | None:
    """When the task's TTL ends (seconds since the epoch), ``None`` if never."""
    if record.ttl_ms is None:
        return None
    return record.created_at + record.ttl_ms / 1000.0


def is_expired(record: TaskRecord, now: float) -> bool:
    """Whether the task is past its TTL (and so looks unknown)."""
    end = expires_at(record)
    return end is not None and now >= end


def record_to_json(record: TaskRecord) -> str:
    """The record as JSON text (for the stores that keep text)."""
    return json.dumps(dataclasses.asdict(record), separators=(",", ":"))


def record_from_json(text: str | bytes) -> TaskRecord:
    """The record :func:`record_to_json` wrote."""
    return TaskRecord(**json.loads(text))


def new_record(
    *,
    owner: str,
    ttl_ms: int | None,
    poll_interval_ms: int | None,
    worker: str | None,
    lease_seconds: float | None,
    meta: Mapping[str, Any] | None,
    now: float,
) -> TaskRecord:
    """A fresh ``working`` task, with the TTL and lease this policy grants."""
    lease = None if worker is None or lease_seconds is None else _lease_seconds(lease_seconds)
    return TaskRecord(
        task_id=new_task_id(),
        owner=owner,
        status="working",
        created_at=now,
        updated_at=now,
        ttl_ms=granted_ttl_ms(ttl_ms),
        poll_interval_ms=poll_interval_ms,
        worker=worker,
        lease_expires_at=None if lease is None else now + lease,
        meta=dict(meta or {}),
    )


# -- the transitions (pure: the stores make them atomic) -------------------------------------


def _changed(record: TaskRecord, now: float, **changes: Any) -> TaskRecord:
    return dataclasses.replace(record, updated_at=now, version=record.version + 1, **changes)


def _ended(record: TaskRecord, now: float, status: str, **changes: Any) -> TaskRecord:
    return _changed(
        record,
        now,
        status=status,
        input_requests=None,
        input_responses=None,
        worker=None,
        lease_expires_at=None,
        **changes,
    )


def lease_check(record: TaskRecord, now: float) -> TaskRecord | None:
    """A non-terminal task whose lease ran out, marked ``failed``; ``None`` otherwise."""
    if record.terminal or record.lease_expires_at is None or now < record.lease_expires_at:
        return None
    return _ended(
        record,
        now,
        "failed",
        status_message=LEASE_EXPIRED_MESSAGE,
        outcome={"error": {"code": _LEASE_EXPIRED_CODE, "message": LEASE_EXPIRED_MESSAGE}},
    )


def cancel_transition(message: str | None) -> Transition:
    """Cancel a non-terminal task; :class:`TaskAlreadyTerminal` on a terminal one."""

    def apply(record: TaskRecord, now: float) -> TaskRecord:
        if record.terminal:
            raise TaskAlreadyTerminal(record)
        return _ended(record, now, "cancelled", status_message=message, outcome=None)

    return apply


def answer_transition(responses: Mapping[str, Any]) -> Transition:
    """Add the responses to requests the task asked and has not had answered."""

    def apply(record: TaskRecord, now: float) -> TaskRecord | None:
        if record.terminal:
            return None
        asked = record.input_requests or {}
        have = dict(record.input_responses or {})
        fresh = {k: v for k, v in responses.items() if k in asked and k not in have}
        if not fresh:
            return None
        return _changed(record, now, input_responses={**have, **fresh})

    return apply


def status_transition(
    status: Literal["working", "input_required"],
    message: str | None,
    input_requests: Mapping[str, Any] | None,
    taken_responses: Collection[str],
) -> Transition:
    """Move a non-terminal task between ``working`` and ``input_required``, removing the
    answers the handler took (``taken_responses``) and keeping any others: an answer that
    arrived after the handler read the record is still there for it."""
    if status not in ("working", "input_required"):
        raise ValueError(f"set_status() takes 'working' or 'input_required', not {status!r}")

    def apply(record: TaskRecord, now: float) -> TaskRecord | None:
        if record.terminal:
            return None
        changes: dict[str, Any] = {
            "status": status,
            "status_message": message,
            "input_requests": dict(input_requests) if input_requests else None,
        }
        if taken_responses:
            left = {
                key: value
                for key, value in (record.input_responses or {}).items()
                if key not in taken_responses
            }
            changes["input_responses"] = left or None
        return _changed(record, now, **changes)

    return apply


def finish_transition(
    status: Literal["completed", "failed"], outcome: Mapping[str, Any], message: str | None
) -> Transition:
    """End a non-terminal task with ``outcome``; ``None`` (no change) on a terminal one."""
    if status not in ("completed", "failed"):
        raise ValueError(f"finish() takes 'completed' or 'failed', not {status!r}")

    def apply(record: TaskRecord, now: float) -> TaskRecord | None:
        if record.terminal:
            return None
        return _ended(record, now, status, status_message=message, outcome=dict(outcome))

    return apply


def renew_transition(worker: str, lease_seconds: float) -> Transition:
    """Extend ``worker``'s lease on a non-terminal task it holds."""

    def apply(record: TaskRecord, now: float) -> TaskRecord | None:
        if record.terminal or record.worker != worker:
            return None
        return _changed(record, now, lease_expires_at=now + _lease_seconds(lease_seconds))

    return apply


# -- the shared implementation ----------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class _Watch:
    """One watch: its callback and the highest version it has been told (or had read)."""

    callback: Callable[[TaskRecord], None]
    version: int


class _Watchers:
    """Callbacks per task id, called outside every lock of the store, each record version at
    most once per watch (a change seen both locally and through a notification channel or a
    poll is announced once). Each watch keeps its own version, so a watch added late is told
    a change the others heard before it was registered (:meth:`StoreBase.watch` re-reads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_task: dict[str, list[_Watch]] = {}

    def add(
        self, task_id: str, callback: Callable[[TaskRecord], None], version: int = 0
    ) -> Callable[[], None]:
        """Watch ``task_id``, whose version the caller last saw is ``version``."""
        watch = _Watch(callback, version)
        with self._lock:
            self._by_task.setdefault(task_id, []).append(watch)
        done = threading.Event()

        def stop() -> None:
            if done.is_set():
                return
            done.set()
            with self._lock:
                watches = self._by_task.get(task_id)
                if watches is not None and watch in watches:
                    watches.remove(watch)
                    if not watches:
                        del self._by_task[task_id]

        return stop

    def task_ids(self) -> list[str]:
        with self._lock:
            return list(self._by_task)

    def notify(self, record: TaskRecord) -> None:
        with self._lock:
            due = [w for w in self._by_task.get(record.task_id, ()) if w.version < record.version]
            for watch in due:
                watch.version = record.version
        for watch in due:
            try:
                watch.callback(record)
            except Exception:
                _log.exception("task %s: a watch callback raised", record.task_id)

    def clear(self) -> None:
        with self._lock:
            self._by_task.clear()


class StoreBase(TaskStore):
    """Every :class:`~mcp_sync.tasks.TaskStore` method on four storage primitives.

    A subclass implements :meth:`_insert`, :meth:`_read`, :meth:`_apply` and :meth:`_page`
    (and :meth:`_delete_expired`, :meth:`_close`). A change this store makes is announced to
    its watchers through :meth:`_announce` once written; a store shared by processes also
    tells its watchers of the others' changes (SQLite by a poll, Redis by the ``PUBLISH`` in
    each write transaction), each version at most once per watch.
    """

    _wait_poll: float = WAIT_SLICE
    """How often :meth:`wait_changed` re-reads the record besides the watch (seconds): it
    notices a lease running out, and changes no watch reports (another process's)."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or time.time
        self._watchers = _Watchers()
        self._closed = False

    # -- what a backend supplies ---------------------------------------------------------------

    @abc.abstractmethod
    def _insert(self, record: TaskRecord) -> None:
        """Store a new record durably."""

    @abc.abstractmethod
    def _read(self, task_id: str) -> TaskRecord | None:
        """The stored record, or ``None`` (no check of TTL or lease)."""

    @abc.abstractmethod
    def _apply(
        self, task_id: str, transition: Transition
    ) -> tuple[TaskRecord | None, TaskRecord | None]:
        """Atomically: read the record (``(None, None)`` when there is none or it is past
        its TTL, which deletes it), apply ``transition(record, now)`` and write the result
        when it is not ``None``. Returns ``(record as it now is, the changed record or
        None)``. ``transition`` may run more than once (a retried optimistic write)."""

    @abc.abstractmethod
    def _page(self, owner: str, before: int | None, limit: int) -> tuple[list[str], int | None]:
        """Up to ``limit`` task ids of ``owner``, newest first, created before position
        ``before`` (``None``: from the newest); and the position to continue from, or
        ``None`` when there are no more."""

    @abc.abstractmethod
    def _delete_expired(self, now: float) -> int:
        """Delete the records past their TTL; how many went."""

    def _close(self) -> None:
        """Release the backend's connections and threads."""

    def _announce(self, record: TaskRecord) -> None:
        self._watchers.notify(record)

    # -- the shared logic ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    def _change(self, task_id: str, transition: Transition) -> TaskRecord | None:
        """Run ``transition`` after the lease check, atomically; announce what changed;
        return the record as it now is (``None``: no live task). A
        :class:`TaskAlreadyTerminal` of the transition is raised after the lease check's
        change (if any) is written and announced."""
        self._check_open()
        refused: list[TaskAlreadyTerminal] = []

        def step(record: TaskRecord, now: float) -> TaskRecord | None:
            refused.clear()  # a backend may retry the step (optimistic concurrency)
            failed = lease_check(record, now)
            try:
                result = transition(failed or record, now)
            except TaskAlreadyTerminal as exc:
                refused.append(exc)
                result = None
            return result or failed

        current, changed = self._apply(task_id, step)
        if changed is not None:
            self._announce(changed)
        if refused:
            raise refused[-1]
        return current

    def _live(self, task_id: str, owner: str | None) -> TaskRecord:
        """The task as it is now, for ``owner`` (``None``: any): a plain read, and the atomic
        path (deleting an expired task, failing a dead lease) only when the read finds the
        task expired or its lease run out."""
        self._check_open()
        current = self._read(task_id)
        if current is not None:
            now = self._clock()
            if is_expired(current, now) or lease_check(current, now) is not None:
                current = self._change(task_id, lambda _record, _now: None)
        if current is None or (owner is not None and current.owner != owner):
            raise TaskNotFound(task_id)
        return current

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
        self._check_open()
        record = new_record(
            owner=owner,
            ttl_ms=ttl_ms,
            poll_interval_ms=poll_interval_ms,
            worker=worker,
            lease_seconds=lease_seconds,
            meta=meta,
            now=self._clock(),
        )
        self._insert(record)
        return record

    def get(self, task_id: str, *, owner: str) -> TaskRecord:
        return self._live(task_id, owner)

    def list(
        self, *, owner: str, cursor: str | None = None, limit: int = 50
    ) -> tuple[list[TaskRecord], str | None]:
        self._check_open()
        before = None if cursor is None else decode_cursor(cursor)
        size = page_size(limit)
        records: list[TaskRecord] = []
        while len(records) < size:
            ids, before = self._page(owner, before, size - len(records))
            for task_id in ids:
                try:
                    records.append(self._live(task_id, owner))
                except TaskNotFound:  # expired (or deleted) since the page was read
                    pass
            if before is None:
                break
        return records, None if before is None else encode_cursor(before)

    def cancel(self, task_id: str, *, owner: str, message: str | None = None) -> TaskRecord:
        self._live(task_id, owner)
        current = self._change(task_id, cancel_transition(message))
        if current is None:
            raise TaskNotFound(task_id)
        return current

    def answer_input(self, task_id: str, *, owner: str, responses: Mapping[str, Any]) -> TaskRecord:
        self._live(task_id, owner)
        current = self._change(task_id, answer_transition(responses))
        if current is None:
            raise TaskNotFound(task_id)
        return current

    def set_status(
        self,
        task_id: str,
        status: Literal["working", "input_required"],
        *,
        message: str | None = None,
        input_requests: Mapping[str, Any] | None = None,
        taken_responses: Collection[str] = (),
    ) -> TaskRecord:
        transition = status_transition(status, message, input_requests, taken_responses)
        current = self._change(task_id, transition)
        if current is None:
            raise TaskNotFound(task_id)
        return current

    def finish(
        self,
        task_id: str,
        status: Literal["completed", "failed"],
        outcome: Mapping[str, Any],
        *,
        message: str | None = None,
    ) -> bool:
        made, current = self._change_made(task_id, finish_transition(status, outcome, message))
        if current is None:
            raise TaskNotFound(task_id)
        return made

    def renew_lease(self, task_id: str, *, worker: str, lease_seconds: float) -> bool:
        return self._change_made(task_id, renew_transition(worker, lease_seconds))[0]

    def _change_made(self, task_id: str, transition: Transition) -> tuple[bool, TaskRecord | None]:
        """:meth:`_change`, and whether ``transition`` itself changed the record (not only
        the lease check before it)."""
        made: list[bool] = []

        def apply(record: TaskRecord, now: float) -> TaskRecord | None:
            result = transition(record, now)
            made[:] = [result is not None]
            return result

        current = self._change(task_id, apply)
        return bool(made and made[-1]), current

    def watch(self, task_id: str, callback: Callable[[TaskRecord], None]) -> Callable[[], None]:
        self._check_open()
        current = self._read(task_id)
        stop = self._watchers.add(task_id, callback, 0 if current is None else current.version)
        latest = self._read(task_id)  # a change made between the read and the registration
        if latest is not None:
            self._watchers.notify(latest)
        return stop

    def wait_changed(
        self, task_id: str, *, owner: str, after_version: int, timeout: float | None
    ) -> TaskRecord:
        cond = threading.Condition()
        latest = [self._live(task_id, owner)]
        read_at = [time.monotonic()]

        def seen(record: TaskRecord) -> None:
            with cond:
                if record.version > latest[0].version:
                    latest[0] = record
                cond.notify_all()

        def done() -> bool:
            return latest[0].version > after_version or latest[0].terminal

        stop = self.watch(task_id, seen)
        try:
            seen(self._live(task_id, owner))  # a change between the first read and the watch

            def changed_or_reread() -> bool:
                if done():
                    return True
                if time.monotonic() - read_at[0] >= self._wait_poll:
                    read_at[0] = time.monotonic()
                    try:
                        record = self._live(task_id, owner)
                    except TaskNotFound:
                        return True  # expired meanwhile: the final read below says so
                    if record.version > latest[0].version:
                        latest[0] = record
                return done()

            wait_for_condition(cond, changed_or_reread, timeout)
        finally:
            stop()
        return self._live(task_id, owner)

    def purge_expired(self) -> int:
        self._check_open()
        return self._delete_expired(self._clock())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._watchers.clear()
        self._close()
