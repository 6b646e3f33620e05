"""Stores shared by processes: three processes on one RedisTaskStore, a worker killed with
SIGKILL while it holds a task's lease, and SQLite across a killed process and a reopened file.

Each process runs tests/tasks/store_peer.py, which answers commands line by line.
"""

from __future__ import annotations

import itertools
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import PYTHON, TESTS
from support.processes import Proc
from support.redis_server import REDIS_SERVER, RedisServer, running_redis
from support.waiting import PEER_WAIT

PEER = TESTS / "tasks" / "store_peer.py"
_tags = itertools.count(1)


class Peer:
    """One store_peer.py process."""

    def __init__(self, *store_args: str) -> None:
        self.proc = Proc([PYTHON, str(PEER), *store_args], stdin=True)
        self.proc.wait_for("stdout", "ready", PEER_WAIT)

    def ask(self, *command: str) -> str:
        tag = f"#{next(_tags)}"
        self.proc.write_line(" ".join([tag, *command]).encode())
        line = self.proc.wait_for("stdout", f"{tag} ", PEER_WAIT)
        return str(line).split(" ", 1)[1].strip()

    def saw(self, fragment: str) -> str:
        return str(self.proc.wait_for("stdout", fragment, PEER_WAIT))

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.finish(PEER_WAIT).code == -signal.SIGKILL

    def close(self) -> None:
        self.proc.close_stdin()
        done = self.proc.finish(PEER_WAIT)
        assert done.code in (0, -signal.SIGKILL), done.describe()


@pytest.fixture
def peers() -> Iterator[list[Peer]]:
    started: list[Peer] = []
    yield started
    for peer in started:
        peer.close()


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (.ci/run installs it)")
    with running_redis() as server:
        yield server


def test_three_processes_share_one_redis_store(
    redis_server: RedisServer, peers: list[Peer]
) -> None:
    prefix = f"p{uuid.uuid4().hex[:8]}:"
    first, second, third = (Peer("redis", redis_server.url, prefix) for _ in range(3))
    peers += [first, second, third]
    task_id = first.ask("create", "alice", "worker-1", "60")
    assert first.ask("watch", task_id) == "watching"
    assert second.ask("get", task_id, "alice") == "working"
    assert third.ask("get", task_id, "mallory") == "unknown"  # another owner's task
    assert third.ask("cancel", task_id, "alice") == "cancelled"
    first.saw(f"event {task_id} cancelled")  # the watch in the first process heard it
    assert second.ask("cancel", task_id, "alice") == "terminal:cancelled"
    assert first.ask("get", task_id, "alice") == "cancelled"


def test_a_killed_workers_task_is_failed_for_the_others(
    redis_server: RedisServer, peers: list[Peer]
) -> None:
    prefix = f"p{uuid.uuid4().hex[:8]}:"
    worker, reader = (
        Peer("redis", redis_server.url, prefix),
        Peer("redis", redis_server.url, prefix),
    )
    peers += [worker, reader]
    task_id = worker.ask("create", "alice", "worker-1", "60")  # long: a busy machine is slow
    assert reader.ask("watch", task_id) == "watching"
    worker.kill9()
    assert reader.ask("get", task_id, "alice") == "working"  # the lease has not run out yet
    assert reader.ask("advance", "61") == "ok"  # the reader's clock passes the lease
    assert reader.ask("get", task_id, "alice") == "failed"
    reader.saw(f"event {task_id} failed")
    assert reader.ask("cancel", task_id, "alice") == "terminal:failed"


def test_sqlite_after_a_killed_process_and_a_reopened_file(
    tmp_path: Path, peers: list[Peer]
) -> None:
    path = str(tmp_path / "tasks.db")
    worker, watcher = Peer("sqlite", path), Peer("sqlite", path)
    peers += [worker, watcher]
    held = worker.ask("create", "alice", "worker-1", "60")
    other = worker.ask("create", "alice", "worker-1", "60")
    assert watcher.ask("watch", other) == "watching"
    assert watcher.ask("cancel", held, "alice") == "cancelled"  # two processes, one file
    assert worker.ask("get", held, "alice") == "cancelled"
    assert watcher.ask("get", other, "alice") == "working"
    worker.kill9()
    watcher.close()
    peers.clear()
    restarted = Peer("sqlite", path)  # the server comes back on the same file
    peers.append(restarted)
    assert restarted.ask("get", held, "alice") == "cancelled"
    assert restarted.ask("get", other, "alice") == "working"  # its lease is still running
    assert restarted.ask("advance", "61") == "ok"
    assert restarted.ask("get", other, "alice") == "failed"  # the killed worker never renewed
    assert restarted.ask("cancel", other, "alice") == "terminal:failed"
