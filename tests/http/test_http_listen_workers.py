"""``subscriptions/listen`` across gunicorn worker processes, through Redis.

The app (tests/peers/gunicorn_listen_app.py) runs under a real ``gunicorn -w 4 -k gthread``
with every worker on a :class:`~mcp_sync.server.bus.RedisBus` of a real ``redis-server``. A
listen stream held by one worker receives the ``notifications/tools/list_changed`` of a tool
registered by a call that another worker served (and the prompts' list change and a
resource update, raised there too). Workers are told apart by the pid their
tools return; a keep-alive connection stays with the worker that accepted it, so a listen
sent on the connection that reported pid *A* is held by worker *A* (checked by the
connection's local port). Each worker allows one listen stream: a second one to the same
worker is refused (503), and once the client closes the first, a new one is accepted there.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from support.paths import PYTHON, ROOT
from support.processes import Proc, user_env
from support.redis_server import REDIS_SERVER, RedisServer
from support.waiting import PEER_WAIT
from test_http_modern import headers_for, modern

pytest.importorskip("gunicorn")
pytestmark = pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server is not installed (.ci/run installs it)"
)

WORKERS = 4
TRIES = 80
"""New connections tried to reach a given kind of worker (each one lands on any worker)."""
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
WATCHED = "file:///watched"
EVERYTHING = {
    "toolsListChanged": True,
    "promptsListChanged": True,
    "resourcesListChanged": True,
    "resourceSubscriptions": [WATCHED],
}


@pytest.fixture
def gunicorn_url() -> Iterator[str]:
    redis = RedisServer()
    redis.start()
    argv = [
        PYTHON, "-m", "gunicorn", "-k", "gthread", "--workers", str(WORKERS), "--threads", "4",
        "--bind", "127.0.0.1:0", "--no-control-socket", "--graceful-timeout", "1",
        "--pythonpath", str(ROOT / "tests" / "peers"), "gunicorn_listen_app:app",
    ]  # fmt: skip
    env = {**user_env(), "MCP_TEST_REDIS_URL": redis.url, "MCP_TEST_MAX_LISTEN": "1"}
    try:
        with Proc(argv, env=env) as proc:
            line = proc.wait_for("stderr", "Listening at: ", 30)
            match = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", line)
            assert match, line
            for _ in range(WORKERS):
                proc.wait_for("stderr", "Booting worker", 30)
            yield match.group(1) + "/mcp"
    finally:
        redis.kill()


def local_port(response: httpx.Response) -> int:
    """The client-side port of the connection that carried ``response``."""
    return int(response.extensions["network_stream"].get_extra_info("client_addr")[1])


def call(client: httpx.Client, url: str, tool: str, arguments: dict[str, Any]) -> tuple[Any, int]:
    """Call ``tool`` on ``client``'s connection: its structured result and the local port."""
    body = modern("tools/call", {"name": tool, "arguments": arguments})
    response = client.post(
        url,
        content=json.dumps(body),
        headers={"Content-Type": "application/json", **headers_for(body)},
    )
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    return result["structuredContent"]["result"], local_port(response)


def connection_to(url: str, wanted: Callable[[int], bool]) -> tuple[httpx.Client, int, int]:
    """A new client whose connection is held by a worker whose pid ``wanted`` accepts (new
    connections are tried, at most :data:`TRIES`): the client, that pid, its local port."""
    for _ in range(TRIES):
        client = httpx.Client(timeout=PEER_WAIT)
        pid, port = call(client, url, "pid", {})
        if wanted(pid):
            return client, pid, port
        client.close()
    raise AssertionError(f"no worker of the wanted kind answered in {TRIES} connections")


class Listen:
    """A listen POST on ``client``'s connection, read message by message."""

    def __init__(
        self, client: httpx.Client, url: str, request_id: str, wanted: dict[str, Any] | None = None
    ) -> None:
        wanted = wanted or {"toolsListChanged": True}
        body = modern("subscriptions/listen", {"notifications": wanted}, request_id)
        self._cm = client.stream(
            "POST", url, content=json.dumps(body),
            headers={"Content-Type": "application/json", **headers_for(body)},
        )  # fmt: skip
        self.response = self._cm.__enter__()
        self._lines = self.response.iter_lines()

    def next_message(self, deadline: float) -> dict[str, Any]:
        for line in self._lines:  # keep-alive comments every 0.2 s keep this loop turning
            if line.startswith("data:") and line[5:].strip():
                return dict(json.loads(line[5:]))
            assert time.monotonic() < deadline, "no message on the listen stream in time"
        raise AssertionError("the listen stream ended")

    def close(self) -> None:
        self._cm.__exit__(None, None, None)


def test_a_listener_on_one_worker_gets_a_change_raised_on_another(gunicorn_url: str) -> None:
    url = gunicorn_url
    listener, listen_pid, listen_port = connection_to(url, lambda pid: True)
    other: httpx.Client | None = None
    try:
        listen = Listen(listener, url, "across", EVERYTHING)
        assert listen.response.status_code == 200
        assert local_port(listen.response) == listen_port  # the same connection: worker A
        deadline = time.monotonic() + PEER_WAIT
        ack = listen.next_message(deadline)
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == EVERYTHING
        assert ack["params"]["_meta"][SUBSCRIPTION_ID] == "across"

        other, other_pid, other_port = connection_to(url, lambda pid: pid != listen_pid)
        changed_by, port = call(other, url, "add_tool", {"name": "from_another_worker"})
        assert (changed_by, port) == (other_pid, other_port)  # raised on worker B
        assert changed_by != listen_pid

        change = listen.next_message(time.monotonic() + PEER_WAIT)
        assert change["method"] == "notifications/tools/list_changed"
        assert change["params"]["_meta"][SUBSCRIPTION_ID] == "across"

        # the other kinds of change, raised on worker B too
        assert call(other, url, "add_prompt", {"name": "p2"}) == (other_pid, other_port)
        change = listen.next_message(time.monotonic() + PEER_WAIT)
        assert change["method"] == "notifications/prompts/list_changed"
        assert call(other, url, "touch", {"uri": WATCHED}) == (other_pid, other_port)
        change = listen.next_message(time.monotonic() + PEER_WAIT)
        assert change["method"] == "notifications/resources/updated"
        assert change["params"]["uri"] == WATCHED
        assert change["params"]["_meta"][SUBSCRIPTION_ID] == "across"
        listen.close()
    finally:
        listener.close()
        if other is not None:
            other.close()


def test_a_closed_listen_stream_frees_its_workers_slot(gunicorn_url: str) -> None:
    url = gunicorn_url
    first_client, pid_a, port = connection_to(url, lambda pid: True)
    try:
        first = Listen(first_client, url, "first")
        assert local_port(first.response) == port
        first.next_message(time.monotonic() + PEER_WAIT)  # acknowledged: the slot is taken
        # a second listen on worker A is refused: its one slot is taken
        second_client, _, _ = connection_to(url, lambda pid: pid == pid_a)
        try:
            body = modern(
                "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, "x"
            )
            refused = second_client.post(
                url, content=json.dumps(body),
                headers={"Content-Type": "application/json", **headers_for(body)},
            )  # fmt: skip
        finally:
            second_client.close()
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == -32000
        first.close()
    finally:
        first_client.close()
    # the worker notices the closed stream at its next keep-alive write (0.2 s) and frees the
    # slot; a listen that reaches worker A before that is refused, so try again (bounded)
    deadline = time.monotonic() + PEER_WAIT
    while True:
        client, _, _ = connection_to(url, lambda pid: pid == pid_a)
        try:
            again = Listen(client, url, "again")
            try:
                if again.response.status_code == 200:
                    ack = again.next_message(time.monotonic() + PEER_WAIT)
                    assert ack["params"]["_meta"][SUBSCRIPTION_ID] == "again"
                    return
                assert again.response.status_code == 503
            finally:
                again.close()
        finally:
            client.close()
        assert time.monotonic() < deadline, "worker A never gave its listen slot back"
