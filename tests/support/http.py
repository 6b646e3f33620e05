"""Helpers for the Streamable HTTP tests (tests/http): the test server, a recorder of what the
server writes, and raw-HTTP/SSE helpers.

Everything here drives the server with plain ``httpx`` requests and a tiny SSE reader of its
own, so the server is judged by what it puts on the wire, not by mcp_sync's own client code.

* :func:`make_server` — a :class:`~mcp_sync.Server` with the standard test tools, gated by a
  :class:`~support.probes.GateProbe`.
* :class:`Wire` — every message the server puts on any SSE stream (or JSON answer), and
  every inbound request whose cancellation a session accepted (see the ``wire`` fixture).
* :class:`RawSession` / :class:`Sse` — raw POST/GET/DELETE and SSE parsing.
* :func:`run_waitress` — serve a WSGI app with waitress on a free loopback port.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import httpx

from mcp_sync import Client, Context, Server
from mcp_sync.jsonrpc import id_key
from support.messages import PROTOCOL_VERSION, initialize_request, notification
from support.probes import GateProbe
from support.waiting import WAIT

ACCEPT_BOTH = "application/json, text/event-stream"


def make_server(probe: GateProbe, name: str = "http-test", **options: Any) -> Server:
    """A server with the tools the HTTP tests use."""
    server = Server(name, version="1.0.0", **options)

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    @server.tool()
    def touch(tag: str) -> str:
        """Set the event ``tag`` (proves that the tool ran)."""
        probe.event(tag).set()
        return "touched"

    @server.tool()
    def gated(tag: str, ctx: Context) -> str:
        """Block until the test releases ``tag`` or the request is cancelled."""
        cancelled = probe.gate(tag, ctx)
        return f"{tag}: {'cancelled' if cancelled else 'released'}"

    @server.tool()
    def progress_gated(tag: str, ctx: Context) -> str:
        """Report progress 1 and 2, block on the gate, then report 3 and answer."""
        ctx.report_progress(1, 3, "one")
        ctx.report_progress(2, 3, "two")
        cancelled = probe.gate(tag, ctx)
        ctx.report_progress(3, 3, "three")
        return f"{tag}: {'cancelled' if cancelled else 'done'}"

    @server.tool()
    def slow(seconds: float, ctx: Context) -> str:
        """Work for ``seconds`` in 10 steps with progress, stopping early when cancelled."""
        for step in range(10):
            if ctx.wait(seconds / 10):
                probe.event("slow.cancelled").set()
                return "stopped"
            ctx.report_progress(step + 1, 10)
        return "done"

    return server


def legacy_http(url: str, *args: Any, **options: Any) -> Client:
    """``Client.http`` pinned to the 2025-11-25 era (``protocol="legacy"``): for the tests of
    2025 sessions (the GET stream, resumption, ``DELETE``, ``notifications/cancelled``)."""
    options.setdefault("protocol", "legacy")
    return Client.http(url, *args, **options)


# -- what the server wrote -----------------------------------------------------------------------
class Wire:
    """Every message the server pushed onto an event stream (JSON answers included), and
    every inbound request id whose cancellation a session accepted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.pushed: list[tuple[str, dict[str, Any]]] = []
        self.accepted_cancels: list[tuple[str, Any]] = []

    def responses(self, request_id: Any) -> list[dict[str, Any]]:
        """Responses (results or errors) the server wrote for ``request_id`` (exact type)."""
        with self._lock:
            return [
                m
                for _, m in self.pushed
                if "method" not in m
                and ("result" in m or "error" in m)
                and m.get("id") is not None
                and id_key(m["id"]) == id_key(request_id)
            ]

    def messages(self, method: str) -> list[dict[str, Any]]:
        with self._lock:
            return [m for _, m in self.pushed if m.get("method") == method]

    def response_counts(self) -> dict[Any, int]:
        counts: dict[Any, int] = defaultdict(int)
        with self._lock:
            for _, m in self.pushed:
                if (
                    "method" not in m
                    and ("result" in m or "error" in m)
                    and m.get("id") is not None
                ):
                    counts[id_key(m["id"])] += 1
        return counts


# -- raw HTTP ------------------------------------------------------------------------------------
class Sse:
    """A minimal reader of one ``text/event-stream`` response (independent of mcp_sync)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.iter_lines()
        self.comments: list[str] = []
        self.last_id: str | None = None
        self.ended = False

    def next(self) -> tuple[str | None, dict[str, Any]] | None:
        """The next message event as ``(event id, JSON message)``; ``None`` at the end of the
        stream. Comments are collected in :attr:`comments`; events without data (priming
        events) only update :attr:`last_id`. A read stalling for 5 s raises ``ReadTimeout``."""
        event_id: str | None = None
        data: list[str] = []
        for line in self._lines:
            if line == "":
                if event_id is not None:
                    self.last_id = event_id
                if data and "".join(data).strip():
                    return event_id, json.loads("\n".join(data))
                event_id, data = None, []
                continue
            if line.startswith(":"):
                self.comments.append(line)
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                event_id = value
            elif field == "data":
                data.append(value)
        self.ended = True
        return None

    def next_priming(self) -> str | None:
        """Read the priming event (an id and no data) that opens every stream; its id."""
        event_id: str | None = None
        for line in self._lines:
            if line.startswith("id:"):
                event_id = line.partition(":")[2].lstrip(" ")
            elif line == "" and event_id is not None:
                self.last_id = event_id
                return event_id
        self.ended = True
        return None

    def next_comment(self) -> str | None:
        """Read until the next comment line; ``None`` at the end of the stream."""
        for line in self._lines:
            if line.startswith(":"):
                self.comments.append(line)
                return line
        self.ended = True
        return None

    def rest(self) -> list[tuple[str | None, dict[str, Any]]]:
        """Every remaining message event, until the server ends the stream."""
        events = []
        while True:
            event = self.next()
            if event is None:
                return events
            events.append(event)

    def close(self) -> None:
        self.response.close()


class RawSession:
    """One MCP session driven with raw HTTP requests."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        self.url = url
        self.http = httpx.Client(timeout=httpx.Timeout(WAIT))
        self.extra = dict(headers or {})
        self.session_id: str | None = None
        self._streams: list[Sse] = []

    def headers(
        self, *, accept: str = ACCEPT_BOTH, session: bool = True, **extra: str
    ) -> dict[str, str]:
        headers = {"Accept": accept, "Content-Type": "application/json", **self.extra}
        if session and self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
            headers["MCP-Protocol-Version"] = PROTOCOL_VERSION
        headers.update(extra)
        return {k: v for k, v in headers.items() if v is not None}

    def post(
        self, message: Any, *, headers: dict[str, str] | None = None, content: bytes | None = None
    ) -> httpx.Response:
        """POST and read the whole answer (for 202, errors and JSON answers, and SSE answers
        that end by themselves)."""
        body = content if content is not None else json.dumps(message).encode()
        return self.http.post(
            self.url, content=body, headers=headers if headers is not None else self.headers()
        )

    def open(self, message: Any, *, headers: dict[str, str] | None = None) -> Sse:
        """POST a request and return its SSE answer as a stream (read it with :class:`Sse`)."""
        req = self.http.build_request(
            "POST",
            self.url,
            content=json.dumps(message).encode(),
            headers=headers or self.headers(),
        )
        response = self.http.send(req, stream=True)
        assert response.status_code == 200, (response.status_code, response.read())
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = Sse(response)
        self._streams.append(stream)
        return stream

    def get(
        self, *, headers: dict[str, str] | None = None, last_event_id: str | None = None
    ) -> httpx.Response:
        """Open a GET stream (returns the streaming response; wrap it in :class:`Sse`)."""
        hdrs = headers or self.headers(accept="text/event-stream")
        hdrs.pop("Content-Type", None)
        if last_event_id is not None:
            hdrs["Last-Event-ID"] = last_event_id
        response = self.http.send(
            self.http.build_request("GET", self.url, headers=hdrs), stream=True
        )
        self._streams.append(Sse(response))
        return response

    def delete(self) -> httpx.Response:
        return self.http.delete(self.url, headers=self.headers())

    def initialize(self) -> dict[str, Any]:
        """Run the handshake; returns the initialize result."""
        stream = self.open(initialize_request(0), headers=self.headers(session=False))
        self.session_id = stream.response.headers["mcp-session-id"]
        events = stream.rest()
        assert [m.get("id") for _, m in events] == [0], events
        answer = self.post(notification("notifications/initialized"))
        assert answer.status_code == 202, answer.text
        return events[0][1]["result"]

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send a request; return its response (reading its SSE stream to the end)."""
        stream = self.open(message)
        events = stream.rest()
        answers = [m for _, m in events if m.get("id") == message["id"] and "method" not in m]
        assert len(answers) == 1, events
        return answers[0]

    def close(self) -> None:
        for stream in self._streams:
            stream.close()
        self.http.close()


def single_answer(response: httpx.Response) -> dict[str, Any]:
    """The one JSON-RPC message of a POST's answer, whether JSON or a whole SSE stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        messages = [json.loads(d) for d in data if d]
        assert len(messages) == 1, messages
        return messages[0]
    return response.json()  # type: ignore[no-any-return]


# -- waitress ------------------------------------------------------------------------------------
def run_waitress(web: Any, threads: int = 8, **options: Any) -> tuple[str, Callable[[], None]]:
    """Serve the WSGI app ``web`` with waitress on a free loopback port: ``(base url, stop)``
    (``options``: more waitress settings, such as ``channel_request_lookahead``).

    ``stop()`` closes every socket and joins the server's threads; close an MCP app first
    (its open streams hold waitress threads)."""
    from waitress.server import create_server

    server = create_server(web, host="127.0.0.1", port=0, threads=threads, **options)
    thread = threading.Thread(target=server.run, name="waitress-server")
    thread.start()

    def close_the_connections() -> None:
        """In the loop's own thread: close every connection and empty the map, so the loop
        ends. The trigger and the listening socket only leave the map: the trigger must stay
        open, as a ``pull_trigger()`` may still be about to write to it -- this thunk can run
        before ``stop()``'s own write, when the loop is woken by a worker's pull first."""
        from waitress import wasyncore

        server.trigger.del_channel()
        server.del_channel()
        wasyncore.close_all(server._map)

    def stop() -> None:
        server.trigger.pull_trigger(close_the_connections)
        thread.join(WAIT)
        server.task_dispatcher.shutdown()  # its threads can pull the trigger until they end
        server.close()  # the listening socket and the trigger, now that no one writes to it

    return f"http://127.0.0.1:{server.effective_port}", stop
