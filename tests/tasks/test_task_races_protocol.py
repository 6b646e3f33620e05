"""Completion racing tasks/cancel, end to end over the in-memory pair (both eras): many tasks,
cancels at random moments. Every task ends in exactly one terminal state; a cancel the
server acknowledged as such (2025: the answer says ``cancelled``) is final; no cancelled task
ever reports completed; the token of every cancelled task's handler fired."""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.sessions import connected
from support.waiting import WAIT, wait_until
from tasks.task_servers import STORES, store_for, task_redis  # noqa: F401 (task_redis: a fixture)

from mcp_sync import CancelToken, Context, McpError, Server
from mcp_sync.tasks.store import TaskStore

TASKS = 60
ERAS = [pytest.param("legacy", id="2025-11-25"), pytest.param("modern", id="2026-07-28")]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TaskStore]:
    with store_for(request, tmp_path) as made:
        yield made


def racing_server(store: TaskStore, saw: dict[str, CancelToken], lock: threading.Lock) -> Server:
    server = Server("races", task_store=store, max_tasks=TASKS)

    @server.tool(task="optional")
    def work(spin: int, ctx: Context) -> str:
        """A little work; records its token."""
        for _ in range(spin):
            if ctx.cancelled:
                break
            ctx.wait(0.001)
        with lock:
            saw[ctx.session.task_id] = ctx.cancel_token
        return "done"

    return server


@pytest.mark.parametrize("protocol", ERAS)
def test_completion_racing_cancel_leaves_one_end(store: TaskStore, protocol: str) -> None:
    rng = random.Random(20261202)
    saw: dict[str, CancelToken] = {}
    lock = threading.Lock()
    server = racing_server(store, saw, lock)
    with connected(server, protocol=protocol) as conn:
        client = conn.client
        tasks = [
            client.call_tool_as_task("work", {"spin": rng.randint(0, 20)}, timeout=WAIT)
            for _ in range(TASKS)
        ]
        acknowledged: dict[str, str] = {}
        for task in tasks:
            if rng.random() < 0.6:
                assert task.task_id is not None
                try:
                    raw = client.task_request("tasks/cancel", {"taskId": task.task_id}, {})
                except McpError as exc:
                    assert exc.code == -32602 and protocol == "legacy"
                    acknowledged[task.task_id] = "refused"
                else:
                    acknowledged[task.task_id] = raw.get("status", "ack")
        wait_until(lambda: server.tasks.running_count() == 0, "every handler to end")
        ends: dict[str, Any] = {}
        for task in tasks:
            assert task.task_id is not None
            first = client.get_task(task.task_id, timeout=WAIT)
            again = client.get_task(task.task_id, timeout=WAIT)
            assert first.terminal and again.status == first.status, first
            ends[task.task_id] = first.status
        for task_id, answer in acknowledged.items():
            if answer == "cancelled":
                assert ends[task_id] == "cancelled"
            if answer == "refused":
                assert ends[task_id] == "completed"
        for task_id, status in ends.items():
            if task_id not in acknowledged:
                assert status == "completed"
            if status == "cancelled":
                assert saw[task_id].cancelled, "the token of every cancelled task fired"
        assert set(ends.values()) <= {"completed", "cancelled"}


ASKERS = 8


def asking_server(store: TaskStore) -> Server:
    server = Server("asking", task_store=store)

    @server.tool(task="optional")
    def ask_many(ctx: Context) -> dict[str, str]:
        """Elicit ASKERS answers at once, one per thread; return what each thread got."""
        got: dict[str, str] = {}

        def one(label: str) -> None:
            try:
                answer = ctx.session.elicit(label, {"type": "object", "properties": {"name": {}}})
            except Exception as exc:  # the result names it
                got[label] = repr(exc)
            else:
                got[label] = (answer.content or {}).get("name", "?")

        threads = [threading.Thread(target=one, args=(f"q{i}",)) for i in range(ASKERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return got

    return server


def test_many_questions_at_once_answered_in_racing_batches_each_reach_their_asker(
    store: TaskStore,
) -> None:
    """Eight threads of one task handler ask at once; two client threads answer whatever is
    asked in random batches, racing each other and the handler's takes. Every thread gets
    its own answer, and the task completes."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        with connected(
            asking_server(store), protocol="modern", elicitation_handler=lambda p, c: {}
        ) as conn:
            client = conn.client
            raw = client.task_request("tools/call", {"name": "ask_many", "arguments": {}}, {})
            task_id = raw["taskId"]
            done = threading.Event()
            failures: list[BaseException] = []

            def answer(seed: int) -> None:
                rng = random.Random(seed)
                try:
                    while not done.is_set():
                        task = client.task_request("tasks/get", {"taskId": task_id}, {})
                        if task["status"] in ("completed", "failed", "cancelled"):
                            done.set()
                            return
                        asked = list(task.get("inputRequests", {}).items())
                        batch = {
                            key: {
                                "action": "accept",
                                "content": {"name": entry["params"]["message"]},
                            }
                            for key, entry in asked
                            if rng.random() < 0.5
                        }
                        if batch:
                            client.task_request(
                                "tasks/update", {"taskId": task_id, "inputResponses": batch}, {}
                            )
                except BaseException as exc:  # reported below
                    failures.append(exc)
                    done.set()

            answerers = [threading.Thread(target=answer, args=(seed,)) for seed in (1, 2)]
            for thread in answerers:
                thread.start()
            try:
                ended = done.wait(WAIT)
            finally:
                done.set()
                for thread in answerers:
                    thread.join(WAIT)
            assert not failures, failures
            assert ended, "the task did not end"
            final = client.task_request("tasks/get", {"taskId": task_id}, {})
            assert final["status"] == "completed", final
            got = final["result"]["structuredContent"]
            assert got == {f"q{i}": f"q{i}" for i in range(ASKERS)}
    finally:
        sys.setswitchinterval(previous)
