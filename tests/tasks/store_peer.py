"""A process using a task store, driven line by line on stdin (for the multi-process tests).

    python store_peer.py redis <url> <prefix> | sqlite <path>

Each command line is ``<tag> <command> <args...>``; the answer is one line ``<tag> <result>``
on stdout. Commands: ``create <owner> <worker> <lease_seconds>`` (answers the task id),
``get <task_id> <owner>`` and ``cancel <task_id> <owner>`` (answer the status, or
``unknown`` / ``terminal:<status>``), ``watch <task_id>`` (answers ``watching``; every change
is then printed as ``event <task_id> <status>``), ``advance <seconds>`` (moves this process's
clock forward, so a lease runs out without waiting). Ends at the end of its input.
"""

from __future__ import annotations

import sys
import threading
import time

from mcp_sync.tasks import (
    RedisTaskStore,
    SqliteTaskStore,
    TaskAlreadyTerminal,
    TaskNotFound,
    TaskRecord,
    TaskStore,
)

_offset = [0.0]
_print_lock = threading.Lock()


def clock() -> float:
    return time.time() + _offset[0]


def say(line: str) -> None:
    with _print_lock:
        print(line, flush=True)


def open_store(argv: list[str]) -> TaskStore:
    if argv[0] == "redis":
        return RedisTaskStore(argv[1], prefix=argv[2], clock=clock)
    return SqliteTaskStore(argv[1], poll_interval=0.02, clock=clock)


def answer(store: TaskStore, command: str, args: list[str]) -> str:
    if command == "create":
        owner, worker, lease = args
        return store.create(
            owner=owner, ttl_ms=600_000, worker=worker, lease_seconds=float(lease)
        ).task_id
    if command == "advance":
        _offset[0] += float(args[0])
        return "ok"
    if command == "watch":

        def changed(record: TaskRecord) -> None:
            say(f"event {record.task_id} {record.status}")

        store.watch(args[0], changed)
        return "watching"
    try:
        if command == "get":
            return store.get(args[0], owner=args[1]).status
        if command == "cancel":
            return store.cancel(args[0], owner=args[1], message=f"from {args[1]}").status
    except TaskNotFound:
        return "unknown"
    except TaskAlreadyTerminal as exc:
        return f"terminal:{exc.record.status}"
    return f"bad command {command}"


def main() -> None:
    with open_store(sys.argv[1:]) as store:
        say("ready")
        for line in sys.stdin:
            tag, command, *args = line.split()
            say(f"{tag} {answer(store, command, args)}")


if __name__ == "__main__":
    main()
