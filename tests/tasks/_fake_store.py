"""A throwaway in-memory TaskStore used until the real stores are merged."""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from mcp_sync.tasks.store import TaskAlreadyTerminal, TaskNotFound, TaskRecord, TaskStore


class FakeStore(TaskStore):
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._rows: dict[str, TaskRecord] = {}
        self._watches: dict[str, list[Callable[[TaskRecord], None]]] = {}

    def _put(self, rec: TaskRecord, **changes: Any) -> TaskRecord:
        new = dataclasses.replace(rec, updated_at=time.time(), version=rec.version + 1, **changes)
        self._rows[rec.task_id] = new
        self._cond.notify_all()
        return new

    def _fire(self, rec: TaskRecord) -> None:
        for cb in list(self._watches.get(rec.task_id, [])):
            cb(rec)

    def _get(self, task_id: str, owner: str | None) -> TaskRecord:
        rec = self._rows.get(task_id)
        if rec is None or (owner is not None and rec.owner != owner):
            raise TaskNotFound(task_id)
        return rec

    def create(
        self, *, owner, ttl_ms, poll_interval_ms=None, worker=None, lease_seconds=None, meta=None
    ):  # type: ignore[no-untyped-def]
        now = time.time()
        rec = TaskRecord(
            secrets.token_hex(16),
            owner,
            "working",
            now,
            now,
            ttl_ms,
            poll_interval_ms,
            worker=worker,
            meta=dict(meta or {}),
        )
        with self._cond:
            self._rows[rec.task_id] = rec
        return rec

    def get(self, task_id, *, owner):  # type: ignore[no-untyped-def]
        with self._cond:
            return self._get(task_id, owner)

    def list(self, *, owner, cursor=None, limit=50):  # type: ignore[no-untyped-def]
        with self._cond:
            mine = sorted(
                (r for r in self._rows.values() if r.owner == owner), key=lambda r: -r.created_at
            )
        start = int(cursor) if cursor else 0
        page = mine[start : start + limit]
        nxt = str(start + limit) if start + limit < len(mine) else None
        return page, nxt

    def cancel(self, task_id, *, owner, message=None):  # type: ignore[no-untyped-def]
        with self._cond:
            rec = self._get(task_id, owner)
            if rec.terminal:
                raise TaskAlreadyTerminal(rec)
            rec = self._put(rec, status="cancelled", status_message=message, input_requests=None)
        self._fire(rec)
        return rec

    def answer_input(self, task_id, *, owner, responses):  # type: ignore[no-untyped-def]
        with self._cond:
            rec = self._get(task_id, owner)
            if rec.terminal:
                return rec
            asked = rec.input_requests or {}
            fresh = {k: v for k, v in responses.items() if k in asked}
            rec = self._put(rec, input_responses={**(rec.input_responses or {}), **fresh})
        self._fire(rec)
        return rec

    def set_status(
        self, task_id, status, *, message=None, input_requests=None, take_responses=False
    ):  # type: ignore[no-untyped-def]
        with self._cond:
            rec = self._get(task_id, None)
            if rec.terminal:
                return rec
            changes: dict[str, Any] = {
                "status": status,
                "status_message": message,
                "input_requests": input_requests,
            }
            if take_responses:
                changes["input_responses"] = None
            rec = self._put(rec, **changes)
        self._fire(rec)
        return rec

    def finish(self, task_id, status, outcome, *, message=None):  # type: ignore[no-untyped-def]
        with self._cond:
            rec = self._get(task_id, None)
            if rec.terminal:
                return False
            rec = self._put(
                rec,
                status=status,
                outcome=dict(outcome),
                status_message=message,
                input_requests=None,
            )
        self._fire(rec)
        return True

    def renew_lease(self, task_id, *, worker, lease_seconds):  # type: ignore[no-untyped-def]
        return True

    def watch(self, task_id, callback):  # type: ignore[no-untyped-def]
        with self._cond:
            self._watches.setdefault(task_id, []).append(callback)

        def stop() -> None:
            with self._cond:
                if callback in self._watches.get(task_id, []):
                    self._watches[task_id].remove(callback)

        return stop

    def wait_changed(self, task_id, *, owner, after_version, timeout):  # type: ignore[no-untyped-def]
        with self._cond:
            self._cond.wait_for(
                lambda: (
                    self._get(task_id, owner).version > after_version
                    or self._get(task_id, owner).terminal
                ),
                timeout,
            )
            return self._get(task_id, owner)

    def purge_expired(self) -> int:
        return 0

    def close(self) -> None:
        pass
