"""SqliteTaskStore beyond the contract: a restart keeps the tasks, a dead worker's task is
failed on open, and two connections to one file see each other's changes."""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest
from support.task_stores import FakeClock
from support.waiting import wait_event, wait_until

from mcp_sync.tasks import SqliteTaskStore, TaskAlreadyTerminal, TaskRecord
from mcp_sync.tasks._common import LEASE_EXPIRED_MESSAGE


def test_reopening_the_file_shows_the_tasks(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    with SqliteTaskStore(path) as first:
        done = first.create(owner="a", ttl_ms=60_000, meta={"tool": "report"})
        first.finish(done.task_id, "completed", {"result": {"content": []}})
        running = first.create(owner="a", ttl_ms=60_000)
        done_record = first.get(done.task_id, owner="a")
    with SqliteTaskStore(path) as second:
        assert second.get(done.task_id, owner="a") == done_record
        assert second.get(running.task_id, owner="a").status == "working"  # no lease: kept
        assert [r.task_id for r in second.list(owner="a")[0]] == [running.task_id, done.task_id]


def test_a_dead_workers_task_is_failed_when_the_file_is_opened(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    clock = FakeClock()
    with SqliteTaskStore(path, clock=clock) as first:
        task = first.create(owner="a", ttl_ms=600_000, worker="w1", lease_seconds=5)
        alive = first.create(owner="a", ttl_ms=600_000, worker="w1", lease_seconds=60)
    clock.advance(10)  # the server was down longer than the first lease
    with SqliteTaskStore(path, clock=clock) as second:
        with closing(sqlite3.connect(path)) as db:  # the row as stored, before any read
            (text,) = db.execute(
                "SELECT record FROM mcp_tasks WHERE task_id = ?", (task.task_id,)
            ).fetchone()
        raw = json.loads(text)
        assert (raw["status"], raw["status_message"], raw["worker"]) == (
            "failed",
            LEASE_EXPIRED_MESSAGE,
            None,
        )
        assert second.get(alive.task_id, owner="a").status == "working"
        clock.advance(60)
        assert second.get(alive.task_id, owner="a").status == "failed"  # on read


def test_two_connections_to_one_file_decide_a_race_once(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    with SqliteTaskStore(path) as one, SqliteTaskStore(path) as other:
        task = one.create(owner="a", ttl_ms=60_000)
        assert other.cancel(task.task_id, owner="a").status == "cancelled"
        assert one.finish(task.task_id, "completed", {"result": {}}) is False
        with pytest.raises(TaskAlreadyTerminal):
            one.cancel(task.task_id, owner="a")


def test_a_watch_sees_another_connections_change(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    with SqliteTaskStore(path, poll_interval=0.01) as one, SqliteTaskStore(path) as other:
        task = one.create(owner="a", ttl_ms=60_000)
        seen: list[TaskRecord] = []
        got = threading.Event()

        def callback(record: TaskRecord) -> None:
            seen.append(record)
            got.set()

        stop = one.watch(task.task_id, callback)
        other.cancel(task.task_id, owner="a", message="from elsewhere")
        wait_event(got, "the other connection's cancel")
        stop()
        assert [(r.status, r.status_message) for r in seen] == [("cancelled", "from elsewhere")]


def test_the_poll_thread_ends_with_the_last_watch(tmp_path: Path) -> None:
    with SqliteTaskStore(tmp_path / "tasks.db", poll_interval=0.01) as store:
        task = store.create(owner="a", ttl_ms=60_000)
        before = set(threading.enumerate())
        stop = store.watch(task.task_id, lambda _record: None)
        pollers = [t for t in threading.enumerate() if t not in before]
        assert len(pollers) == 1
        stop()
        wait_until(lambda: not pollers[0].is_alive(), "the poll thread to end")
        stop = store.watch(task.task_id, lambda _record: None)  # a new watch polls again
        assert store._poller is not None and store._poller.is_alive()
        stop()


class _CommitFailsOnce:
    """The store's connection, but the next COMMIT fails (a disk error, say)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.armed = True

    def execute(self, sql: str, args: tuple[object, ...] = ()) -> sqlite3.Cursor:
        if sql == "COMMIT" and self.armed:
            self.armed = False
            raise sqlite3.OperationalError("disk I/O error")
        return self._db.execute(sql, args)

    def __getattr__(self, name: str) -> object:
        return getattr(self._db, name)


def test_a_failed_commit_changes_nothing_and_the_store_goes_on(tmp_path: Path) -> None:
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        task = store.create(owner="a", ttl_ms=60_000)
        real = store._db
        store._db = _CommitFailsOnce(real)  # type: ignore[assignment]
        with pytest.raises(sqlite3.OperationalError):
            store.cancel(task.task_id, owner="a")
        assert store.get(task.task_id, owner="a").status == "working"  # rolled back
        assert store.cancel(task.task_id, owner="a").status == "cancelled"  # not stuck
        store._db = real
