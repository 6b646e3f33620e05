"""Tasks across worker processes: the HTTP app under gunicorn with 3 workers sharing a
``RedisTaskStore`` (a real redis-server). A task created through one worker is read and
cancelled through the others, and its handler in the first worker stops; ``kill -9`` of the
worker running a task leaves it ``failed``, not ``working``."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.http import ACCEPT_BOTH
from support.paths import PYTHON, ROOT
from support.processes import Proc
from support.waiting import PEER_WAIT, WAIT, wait_until

pytest.importorskip("gunicorn")
tasks_module = pytest.importorskip("mcp_sync.tasks")
if not hasattr(tasks_module, "RedisTaskStore"):
    pytest.skip("RedisTaskStore is not available", allow_module_level=True)

from support.redis_server import REDIS_SERVER, RedisServer  # noqa: E402

pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")

MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    },
}


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    redis = RedisServer()
    redis.start()
    markers = tmp_path / "markers"
    markers.mkdir()
    argv = [
        PYTHON, "-m", "gunicorn", "-k", "gthread", "--workers", "3", "--threads", "4",
        "--bind", "127.0.0.1:0", "--no-control-socket", "--graceful-timeout", "1",
        "--pythonpath", str(ROOT / "tests" / "peers"), "gunicorn_tasks_app:app",
    ]  # fmt: skip
    env = {**os.environ, "MCP_TASKS_REDIS": redis.url, "MCP_TASKS_MARKERS": str(markers)}
    try:
        with Proc(argv, env=env) as proc:
            line = proc.wait_for("stderr", "Listening at: ", 30)
            match = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", line)
            assert match, line
            for _ in range(3):
                proc.wait_for("stderr", "Booting worker", 30)
            yield match.group(1) + "/mcp", markers
    finally:
        redis.kill()


class Worker:
    """One keep-alive connection, hence one gunicorn worker, and its pid."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=WAIT)
        self.pid = int(self.call("tools/call", {"name": "whoami"})["content"][0]["text"])

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": {**params, "_meta": ENVELOPE},
        }
        headers = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json",
                   "MCP-Protocol-Version": MODERN, "Mcp-Method": method}  # fmt: skip
        name = params.get("name") if method == "tools/call" else params.get("taskId")
        if name is not None:
            headers["Mcp-Name"] = name
        response = self.http.post(self.url, content=json.dumps(body), headers=headers)
        message = _answer(response)
        assert "result" in message, message
        return message["result"]  # type: ignore[no-any-return]

    def close(self) -> None:
        self.http.close()


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and '"id"' in line:
                return json.loads(line[5:])  # type: ignore[no-any-return]
    return response.json()  # type: ignore[no-any-return]


def another_worker(
    url: str, not_pids: set[int], opened: list[Worker], *, rather_not: set[int] = frozenset()
) -> Worker:
    """A connection that lands on a worker whose pid is not in ``not_pids`` (and, if one
    answers within a few hundred connections, not in ``rather_not`` either: the kernel
    hands connections to the workers unevenly)."""
    fallback: Worker | None = None
    for _ in range(300):
        worker = Worker(url)
        opened.append(worker)
        if worker.pid in not_pids:
            continue
        if worker.pid not in rather_not:
            return worker
        fallback = fallback or worker
    if fallback is not None:
        return fallback
    raise AssertionError(f"every connection landed on {not_pids}")


def marker(markers: Path, name: str) -> int:
    wait_until(lambda: (markers / name).exists(), f"the marker {name}", timeout=PEER_WAIT)
    return int((markers / name).read_text())


def test_a_task_is_read_and_cancelled_through_other_workers(
    deployment: tuple[str, Path],
) -> None:
    url, markers = deployment
    opened: list[Worker] = []
    try:
        first = Worker(url)
        opened.append(first)
        created = first.call("tools/call", {"name": "long_job", "arguments": {"seconds": 60}})
        task_id = created["taskId"]
        assert marker(markers, f"started-{task_id}") == first.pid
        second = another_worker(url, {first.pid}, opened)
        assert second.call("tasks/get", {"taskId": task_id})["status"] == "working"
        third = another_worker(url, {first.pid}, opened, rather_not={second.pid})
        third.call("tasks/cancel", {"taskId": task_id})
        assert marker(markers, f"stopped-{task_id}") == first.pid  # the handler stopped
        assert second.call("tasks/get", {"taskId": task_id})["status"] == "cancelled"
    finally:
        for worker in opened:
            worker.close()


def test_kill_9_of_the_worker_running_a_task_fails_it(deployment: tuple[str, Path]) -> None:
    url, markers = deployment
    opened: list[Worker] = []
    try:
        first = Worker(url)
        opened.append(first)
        created = first.call("tools/call", {"name": "long_job", "arguments": {"seconds": 60}})
        task_id = created["taskId"]
        assert marker(markers, f"started-{task_id}") == first.pid
        os.kill(first.pid, signal.SIGKILL)
        other = another_worker(url, {first.pid}, opened)

        def failed() -> bool:
            return other.call("tasks/get", {"taskId": task_id})["status"] == "failed"

        wait_until(failed, "the dead worker's task to be marked failed", timeout=PEER_WAIT)
    finally:
        for worker in opened:
            worker.close()
