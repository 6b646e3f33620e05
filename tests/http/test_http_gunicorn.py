"""Request bodies under a real gunicorn (threaded worker), run as a subprocess.

gunicorn decodes ``Transfer-Encoding: chunked`` and says so with ``wsgi.input_terminated``:
the app reads such a body to its end, capped like a Content-Length body.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest
from support.http import ACCEPT_BOTH
from support.messages import PROTOCOL_VERSION, call_tool, initialize_request, notification
from support.paths import PYTHON, ROOT
from support.processes import Proc
from support.waiting import WAIT

pytest.importorskip("gunicorn")

MAX_BODY_BYTES = 2048  # as in tests/peers/gunicorn_app.py


@pytest.fixture
def gunicorn_url() -> Iterator[str]:
    argv = [
        PYTHON, "-m", "gunicorn", "-k", "gthread", "--workers", "1", "--threads", "4",
        "--bind", "127.0.0.1:0", "--no-control-socket", "--graceful-timeout", "1",
        "--pythonpath", str(ROOT / "tests" / "peers"), "gunicorn_app:app",
    ]  # fmt: skip
    with Proc(argv) as proc:
        line = proc.wait_for("stderr", "Listening at: ", 30)
        match = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", line)
        assert match, line
        proc.wait_for("stderr", "Booting worker", 30)
        yield match.group(1) + "/mcp"


def chunked(body: bytes, size: int = 100) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


def post_chunked(
    http: httpx.Client, url: str, message: dict, session_id: str | None = None
) -> httpx.Response:
    headers = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
    if session_id is not None:
        headers |= {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": PROTOCOL_VERSION}
    return http.post(url, content=chunked(json.dumps(message).encode()), headers=headers)


def sse_messages(text: str) -> list[dict]:
    return [
        json.loads(line[5:])
        for line in text.splitlines()
        if line.startswith("data:") and line[5:].strip()
    ]


def test_chunked_bodies_are_read_under_gunicorn_and_capped(gunicorn_url):
    with httpx.Client(timeout=WAIT) as http:
        answer = post_chunked(http, gunicorn_url, initialize_request(0))
        assert answer.status_code == 200, answer.text
        session_id = answer.headers["mcp-session-id"]
        assert [m["id"] for m in sse_messages(answer.text)] == [0]
        assert (
            post_chunked(
                http, gunicorn_url, notification("notifications/initialized"), session_id
            ).status_code
            == 202
        )
        echo = post_chunked(
            http, gunicorn_url, call_tool("echo", {"text": "chunked"}, 1), session_id
        )
        assert echo.status_code == 200
        assert sse_messages(echo.text)[-1]["result"]["content"][0]["text"] == "chunked"
        too_big = post_chunked(
            http, gunicorn_url, call_tool("echo", {"text": "x" * MAX_BODY_BYTES}, 2), session_id
        )
        assert too_big.status_code == 413, too_big.text
        # the session is unharmed
        again = post_chunked(
            http, gunicorn_url, call_tool("echo", {"text": "after"}, 3), session_id
        )
        assert sse_messages(again.text)[-1]["result"]["content"][0]["text"] == "after"
