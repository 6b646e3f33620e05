"""Concurrency at 2026-07-28 over HTTP: many calls sending progress at once each get their
own notifications, in order, before their own answer; listen streams opened and closed
from many threads at once never exceed ``max_listen_streams`` and all give their slot back."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from support.waiting import PEER_WAIT, wait_until
from test_http_gunicorn import sse_messages
from test_http_listen_2026 import ListenStream
from test_http_modern import headers_for, modern
from test_http_progress_2026 import make_progress_server

from mcp_sync.http import McpWsgiApp, serve_http

CALLERS = 12
CALLS = 8
LISTENERS = 8
CYCLES = 6
MAX_LISTEN = 3


def test_concurrent_calls_each_get_their_own_progress_before_their_answer() -> None:
    handle = serve_http(McpWsgiApp(make_progress_server(), path="/mcp"), "127.0.0.1", 0)

    def caller(n: int) -> list[str]:
        problems = []
        with httpx.Client(timeout=PEER_WAIT) as http:
            for k in range(CALLS):
                token = f"t{n}-{k}"
                body = modern("tools/call", {"name": "steps", "arguments": {"n": 3}}, token)
                body["params"]["_meta"]["progressToken"] = token
                response = http.post(
                    handle.url,
                    content=json.dumps(body),
                    headers={"Content-Type": "application/json", **headers_for(body)},
                )
                messages = sse_messages(response.text)
                tokens = [m["params"]["progressToken"] for m in messages[:-1]]
                progress = [m["params"]["progress"] for m in messages[:-1]]
                if tokens != [token] * 3 or progress != [1, 2, 3] or messages[-1]["id"] != token:
                    problems.append(f"{token}: {messages}")
        return problems

    try:
        with ThreadPoolExecutor(CALLERS) as pool:
            problems = [p for found in pool.map(caller, range(CALLERS)) for p in found]
    finally:
        handle.stop()
    assert problems == []


def test_listen_streams_opened_and_closed_at_once_respect_the_cap() -> None:
    app = McpWsgiApp(
        make_progress_server(), path="/mcp", keepalive=0.05, max_listen_streams=MAX_LISTEN
    )
    handle = serve_http(app, "127.0.0.1", 0)
    peak = 0
    lock = threading.Lock()

    def listener(n: int) -> dict[str, int]:
        nonlocal peak
        outcomes = {"acknowledged": 0, "refused": 0}
        for k in range(CYCLES):
            stream = ListenStream(handle.url, f"l{n}-{k}")
            try:
                if stream.response.status_code == 503:
                    outcomes["refused"] += 1
                    continue
                assert stream.response.status_code == 200
                ack: dict[str, Any] = stream.next_message()
                assert (
                    ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == f"l{n}-{k}"
                )
                outcomes["acknowledged"] += 1
                with lock:
                    peak = max(peak, app.listen_slots.open)
            finally:
                stream.close()
        return outcomes

    try:
        with ThreadPoolExecutor(LISTENERS) as pool:
            results = list(pool.map(listener, range(LISTENERS)))
        wait_until(lambda: app.listen_slots.open == 0, "every listen slot is given back")
        # every slot is free again
        after = [ListenStream(handle.url, f"after{n}") for n in range(MAX_LISTEN)]
        try:
            assert all(s.response.status_code == 200 for s in after)
            assert all(s.next_message()["method"].endswith("acknowledged") for s in after)
        finally:
            for s in after:
                s.close()
    finally:
        handle.stop()
    assert sum(r["acknowledged"] for r in results) >= 1
    assert sum(r["acknowledged"] + r["refused"] for r in results) == LISTENERS * CYCLES
    assert peak <= MAX_LISTEN
