"""A task store in one SQLite file: tasks survive a restart of the server.

One connection per store, guarded by a lock (so a store uses one file handle whatever the
number of threads); every transition is a ``BEGIN IMMEDIATE`` transaction that reads the row,
applies the rule and writes it back, so it is a compare-and-set against every other
connection to the file, in this process or another. The file is in WAL mode, so readers in
other processes do not wait for a writer.

What is supported across processes: any number of processes on one machine may open the same
file (not over a network file system, where SQLite's locks do not hold). Every read, write
and :meth:`wait_changed` sees the others' changes; :meth:`watch` callbacks are called for
this store's own changes at once and for other connections' changes within ``poll_interval``
seconds (one poll thread per store, started by the first watch, reading ``PRAGMA
data_version``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
from .store import TaskRecord

__all__ = ["SqliteTaskStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mcp_tasks (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    expires_at REAL,
    lease_until REAL,
    ended INTEGER NOT NULL DEFAULT 0,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS mcp_tasks_owner ON mcp_tasks (owner, position);
CREATE INDEX IF NOT EXISTS mcp_tasks_expiry ON mcp_tasks (expires_at);
CREATE INDEX IF NOT EXISTS mcp_tasks_lease ON mcp_tasks (lease_until);
CREATE INDEX IF NOT EXISTS mcp_tasks_ended ON mcp_tasks (ended, position);
"""


def _lease_until(record: TaskRecord) -> float | None:
    return None if record.terminal else record.lease_expires_at


class SqliteTaskStore(StoreBase):
    """Tasks in the SQLite file at ``path`` (created if missing).

    Opening the file marks ``failed`` every task left running whose lease has run out (its
    worker died with the previous process); a task whose lease runs out later is marked so
    by the first read that finds it.

    At most ``max_tasks`` tasks are kept (every owner's, ended ones included): when a new
    one would pass that, expired tasks are deleted, then the oldest ended one, and
    :class:`~mcp_sync.tasks.TaskStoreFull` is raised only when every task still runs -- the
    same rule as the memory store's, counted over every process using the file.

    Args:
        path: the database file.
        max_tasks: the most tasks the file holds.
        poll_interval: how often (seconds) the watch thread looks for other connections'
            changes.
        busy_timeout: how long (seconds) a transaction waits for another process's lock
            before :class:`sqlite3.OperationalError` is raised.
        clock: seconds since the epoch (default :func:`time.time`), for tests.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_tasks: int = DEFAULT_MAX_TASKS,
        poll_interval: float = 0.2,
        busy_timeout: float = 30.0,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(clock=clock)
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        self.max_tasks = max_tasks
        self.path = os.fspath(path)
        self.poll_interval = poll_interval
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk when it returns, so a task reported created (or cancelled)
        # survives a power cut too, not only a crash of the process (NORMAL in WAL mode may
        # lose the last commits then)
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._poller_lock = threading.Lock()
        self._poller: threading.Thread | None = None
        self._stop_polling = threading.Event()
        self._fail_dead_leases()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._check_open()
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:  # also when COMMIT itself failed
                    self._db.execute("ROLLBACK")
                raise

    def _query(self, sql: str, args: tuple[object, ...]) -> list[tuple[object, ...]]:
        with self._lock:
            self._check_open()
            return self._db.execute(sql, args).fetchall()

    def _fail_dead_leases(self) -> None:
        rows = self._query("SELECT task_id FROM mcp_tasks WHERE lease_until <= ?", (self._clock(),))
        for (task_id,) in rows:
            self._change(str(task_id), lambda _record, _now: None)

    # -- the storage primitives -------------------------------------------------------------

    def _insert(self, record: TaskRecord) -> None:
        text = record_to_json(record)
        with self._transaction() as db:
            self._make_room(db)
            db.execute(
                "INSERT INTO mcp_tasks (task_id, owner, expires_at, lease_until, record)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    record.task_id,
                    record.owner,
                    expires_at(record),
                    _lease_until(record),
                    text,
                ),
            )

    def _make_room(self, db: sqlite3.Connection) -> None:
        """Inside the insert's transaction: below ``max_tasks`` by deleting expired tasks,
        then the oldest ended one; :class:`TaskStoreFull` when every task still runs."""
        if self._count(db) < self.max_tasks:
            return
        db.execute("DELETE FROM mcp_tasks WHERE expires_at <= ?", (self._clock(),))
        if self._count(db) < self.max_tasks:
            return
        oldest = db.execute(
            "SELECT position FROM mcp_tasks WHERE ended = 1 ORDER BY position LIMIT 1"
        ).fetchone()
        if oldest is None:
            raise TaskStoreFull(f"the task store holds {self.max_tasks} running tasks")
        db.execute("DELETE FROM mcp_tasks WHERE position = ?", oldest)

    @staticmethod
    def _count(db: sqlite3.Connection) -> int:
        return int(db.execute("SELECT count(*) FROM mcp_tasks").fetchone()[0])

    def _read(self, task_id: str) -> TaskRecord | None:
        rows = self._query("SELECT record FROM mcp_tasks WHERE task_id = ?", (task_id,))
        return record_from_json(str(rows[0][0])) if rows else None

    def _apply(
        self, task_id: str, transition: Transition
    ) -> tuple[TaskRecord | None, TaskRecord | None]:
        with self._transaction() as db:
            row = db.execute(
                "SELECT record FROM mcp_tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
            if row is None:
                return None, None
            record = record_from_json(row[0])
            now = self._clock()
            if is_expired(record, now):
                db.execute("DELETE FROM mcp_tasks WHERE task_id = ?", (task_id,))
                return None, None
            changed = transition(record, now)
            if changed is None:
                return record, None
            db.execute(
                "UPDATE mcp_tasks SET lease_until = ?, ended = ?, record = ? WHERE task_id = ?",
                (_lease_until(changed), int(changed.terminal), record_to_json(changed), task_id),
            )
            return changed, changed

    def _page(self, owner: str, before: int | None, limit: int) -> tuple[list[str], int | None]:
        rows = self._query(
            "SELECT position, task_id FROM mcp_tasks WHERE owner = ? AND position < ?"
            " ORDER BY position DESC LIMIT ?",
            (owner, before if before is not None else 2**63 - 1, limit + 1),
        )
        more = len(rows) > limit
        rows = rows[:limit]
        ids = [str(task_id) for _, task_id in rows]
        return ids, (int(str(rows[-1][0])) if more else None)

    def _delete_expired(self, now: float) -> int:
        with self._transaction() as db:
            return db.execute("DELETE FROM mcp_tasks WHERE expires_at <= ?", (now,)).rowcount

    def _close(self) -> None:
        self._stop_polling.set()
        with self._poller_lock:
            poller = self._poller
        if poller is not None and poller is not threading.current_thread():
            poller.join()
        with self._lock:
            self._db.close()

    # -- watches: this store's changes at once, other connections' by polling ----------------

    def watch(self, task_id: str, callback: Callable[[TaskRecord], None]) -> Callable[[], None]:
        stop = super().watch(task_id, callback)
        with self._poller_lock:
            if self._poller is None:
                self._poller = threading.Thread(
                    target=self._poll, name=f"mcp-sync-sqlite-tasks {self.path}", daemon=True
                )
                self._poller.start()
        return stop

    def _poll(self) -> None:
        """Announce other connections' changes to watched tasks; end once nothing is watched
        (the next watch starts another poller)."""
        seen_version: object = None
        while not self._stop_polling.wait(self.poll_interval):
            with self._poller_lock:
                watched = self._watchers.task_ids()
                if not watched:
                    self._poller = None
                    return
            try:
                (data_version,) = self._query("PRAGMA data_version", ())[0]
                if data_version != seen_version:
                    seen_version = data_version
                    for task_id in watched:
                        record = self._read(task_id)
                        if record is not None:
                            self._announce(record)
            except (sqlite3.Error, RuntimeError):
                if self._closed:
                    return
