"""Task stores for the tests: a factory per backend, each with an injectable clock.

``make_store(kind)`` gives a fresh store of that kind (``"memory"``, ``"sqlite"`` on a
temporary file, ``"redis"`` on a redis-server the tests start); every store made is closed
at the end of the test. :class:`FakeClock` moves time without sleeping.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from mcp_sync.tasks import MemoryTaskStore, RedisTaskStore, SqliteTaskStore, TaskStore
from support.redis_server import REDIS_SERVER


class FakeClock:
    """Seconds since the epoch that move only when a test says so."""

    def __init__(self, start: float | None = None) -> None:
        self._lock = threading.Lock()
        self._now = time.time() if start is None else start

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


class StoreMaker:
    """Makes stores of one kind that share one backing (the same SQLite file, the same Redis
    database and key prefix), so a second store is what another process or a restarted
    server would see; :meth:`close_all` closes every one made."""

    def __init__(self, kind: str, tmp_path: Path, redis_url: str | None = None) -> None:
        self.kind = kind
        self.path = tmp_path / "tasks.db"
        self.redis_url = redis_url
        self.prefix = f"t{uuid.uuid4().hex[:12]}:"  # a test's own keys on a shared server
        self.made: list[TaskStore] = []

    def __call__(self, **options: Any) -> TaskStore:
        store: TaskStore
        if self.kind == "memory":
            store = MemoryTaskStore(**options)
        elif self.kind == "sqlite":
            store = SqliteTaskStore(options.pop("path", self.path), **options)
        elif self.kind == "redis":
            assert self.redis_url is not None
            options.setdefault("prefix", self.prefix)
            store = RedisTaskStore(self.redis_url, **options)
        else:
            raise AssertionError(f"no such store kind: {self.kind}")
        self.made.append(store)
        return store

    def close_all(self) -> None:
        for store in self.made:
            store.close()


NEEDS_REDIS = pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server is not installed (.ci/run installs it)"
)
"""Mark for a test (or a parameter) that runs a redis-server."""
