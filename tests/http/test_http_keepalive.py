"""A quick call's SSE answer is sent whole, with a length, so the connection stays open.

A WSGI server closes the connection after a body of unknown length (waitress does, even at
HTTP/1.1), so a stream per call would cost a TCP connection per call. A request whose
stream ends within ``QUICK_ANSWER_WINDOW`` is answered with the same SSE events and a
``Content-Length``; a longer call is streamed as before, its events as they come.
"""

from __future__ import annotations

from typing import Any

from support.http import legacy_http, make_server, run_waitress
from support.messages import call_tool
from support.waiting import WAIT

from mcp_sync.http.wsgi_app import QUICK_ANSWER_WINDOW


def test_a_quick_answer_is_sse_with_a_length_and_a_slow_one_streams(probe, serve, raw):
    handle = serve(make_server(probe))
    session = raw(handle.url)
    session.initialize()
    quick = session.open(call_tool("echo", {"text": "hi"}, 1))
    assert quick.response.headers["content-type"].startswith("text/event-stream")
    assert quick.response.headers.get("content-length", "").isdigit()
    events = quick.rest()
    assert [m["result"]["content"][0]["text"] for _, m in events] == ["hi"]
    assert events[0][0] is not None  # the event keeps its id: resumable as ever
    slow = session.open(call_tool("progress_gated", {"tag": "s"}, 2, progress_token=2))
    # headers and the progress event arrive while the handler still runs
    assert "content-length" not in slow.response.headers
    progress = slow.next()
    assert progress is not None and progress[1]["method"] == "notifications/progress"
    assert probe.started("s").wait(WAIT) and not probe.completed("s").is_set()
    probe.release("s")
    assert [m["id"] for _, m in slow.rest() if "method" not in m] == [2]


def test_sequential_calls_under_waitress_reuse_their_connection(probe):
    assert QUICK_ANSWER_WINDOW > 0
    app = make_server(probe).wsgi_app(path="/mcp")
    ports: list[str] = []

    def record(environ: dict[str, Any], start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] == "POST":
            ports.append(environ["REMOTE_PORT"])
        return app(environ, start_response)

    base, stop = run_waitress(record, threads=4)
    try:
        with legacy_http(f"{base}/mcp", init_timeout=WAIT) as client:
            for i in range(30):
                assert client.call_tool("echo", {"text": str(i)}, timeout=WAIT).content[
                    0
                ].text == str(i)
    finally:
        app.close()
        stop()
    assert len(ports) >= 32  # initialize, initialized, 30 calls
    # one connection per call before; now the pool's connection is reused (a second may
    # be opened when a call is issued before the previous one gave its connection back)
    assert len(set(ports)) <= 4, f"{len(set(ports))} connections for {len(ports)} POSTs"
