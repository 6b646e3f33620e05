"""A blocking 2026-07-28 call over HTTP reads its own answer, on the caller's thread.

``client.call_tool(...)`` (and every other blocking method) sends its request with the hint
that the caller waits at once; the transport keeps the read for it, and the caller POSTs and
reads the answer itself -- no reader thread, no hand-off. The claim is a handshake under the
transport's lock: a caller that comes before the request was sent leaves a mark, and the
send then gives the read to a reader thread as before. Cancel, timeout, Ctrl-C and close
still end such a call at once, against the embedded server and under waitress.
"""

from __future__ import annotations

import gc
import io
import json
import signal
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.http import legacy_http, make_server, run_waitress
from support.probes import GateProbe
from support.waiting import WAIT

from mcp_sync import Client, Context, Server
from mcp_sync._caller_waits import caller_waits
from mcp_sync.cancel import CancelToken
from mcp_sync.errors import Cancelled, ConnectionClosed, RequestTimeout
from mcp_sync.http import HttpClientTransport, McpWsgiApp, serve_http
from mcp_sync.jsonrpc import Request, encode
from mcp_sync.transports.base import OutboundMeta

pytestmark = pytest.mark.usefixtures("client_path")  # both client paths (conftest)

READER = "mcp_sync-http-reader"
RESPONSE_LOOP = "mcp_sync-http-responses"


def make_caller_server(probe: GateProbe) -> Server:
    """The HTTP tests' server, and a tool that reports progress without waiting."""
    server = make_server(probe, "caller-reads")

    @server.tool()
    def stepped(steps: int, ctx: Context) -> str:
        """Report ``steps`` progress notifications, then answer."""
        for step in range(steps):
            ctx.report_progress(step + 1, steps)
        return "stepped"

    return server


class Posts:
    """A WSGI middleware that records the JSON-RPC method of every POST."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.methods: list[str | None] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] == "POST":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            with self.lock:
                self.methods.append(json.loads(body).get("method"))
        return self.app(environ, start_response)

    def count(self, method: str) -> int:
        with self.lock:
            return self.methods.count(method)


Served = tuple[str, GateProbe, Posts]


@pytest.fixture(params=["embedded", "waitress"])
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    """(url, probe, posts) of our app under the embedded server or under waitress."""
    probe = GateProbe()
    # short SSE keep-alives: a stream the client closed is seen at the next one
    app = McpWsgiApp(
        make_caller_server(probe), path="/mcp", modern_json_window=0.05, keepalive=0.05
    )
    posts = Posts(app)
    if request.param == "embedded":
        handle = serve_http(posts, "127.0.0.1", 0)  # type: ignore[arg-type]
        try:
            yield handle.url, probe, posts
        finally:
            app.close()
            handle.stop()
    else:
        base, stop = run_waitress(posts)
        try:
            yield base + "/mcp", probe, posts
        finally:
            app.close()
            stop()


def readers() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name == READER)


def transport_of(client: Client) -> HttpClientTransport:
    transport = client.transport
    assert isinstance(transport, HttpClientTransport)
    return transport


def record_receivers(client: Client) -> list[str]:
    """The names of the threads that hand the endpoint an answer the caller read."""
    names: list[str] = []
    receive = client.endpoint.receive_line

    def recording(line: bytes | str) -> None:
        names.append(threading.current_thread().name)
        receive(line)

    client.endpoint.receive_line = recording  # type: ignore[method-assign]
    return names


class Caller:
    """Runs ``fn`` on a thread named ``caller``; ``outcome()`` is its result or exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._result: list[Any] = []
        self._thread = threading.Thread(target=self._run, args=(fn,), name="caller")
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._result.append(fn())
        except BaseException as exc:
            self._result.append(exc)

    def outcome(self) -> Any:
        self._thread.join(WAIT)
        assert not self._thread.is_alive(), "the blocking call did not end"
        return self._result[0]


def test_a_blocking_call_reads_its_answer_on_the_calling_thread(served: Served) -> None:
    """While three blocking calls wait for their answers no reader thread is added (each
    caller reads its own), and the answers reach the endpoint on the callers' threads."""
    url, probe, _posts = served
    with Client.http(url) as client:
        received = record_receivers(client)
        before = readers()  # the idle reader of the server/discover probe, if any
        callers = [
            Caller(lambda tag=tag: client.call_tool("gated", {"tag": tag}))  # type: ignore[misc]
            for tag in ("a", "b", "c")
        ]
        for tag in ("a", "b", "c"):
            assert probe.started(tag).wait(WAIT)
        assert readers() <= before
        for tag in ("a", "b", "c"):
            probe.release(tag)
        texts = sorted(caller.outcome().content[0].text for caller in callers)
        assert texts == ["a: released", "b: released", "c: released"]
        assert received.count("caller") == 3
        assert transport_of(client)._caller_reads == {}


def test_a_call_read_on_the_caller_is_freed_without_the_garbage_collector(
    served: Served,
) -> None:
    """A settled 2026-07-28 call and its round hold no reference cycle: dropped, both are
    freed at once, with the collector off."""
    url, _probe, _posts = served
    with Client.http(url) as client:
        gc.collect()
        gc.disable()
        try:
            with caller_waits():
                call = client.call_tool_future("echo", {"text": "x"})
            assert call.result(WAIT).content[0].text == "x"
            freed = weakref.ref(call)
            round_freed = weakref.ref(call._round)  # type: ignore[attr-defined]
            del call
            assert freed() is None and round_freed() is None
        finally:
            gc.enable()


def test_every_blocking_method_reads_on_the_caller(served: Served) -> None:
    url, _probe, _posts = served
    with Client.http(url) as client:
        received = record_receivers(client)
        assert "echo" in [tool.name for tool in client.list_tools()]
        assert client.request("tools/list")["tools"]
        assert client.call_tool("echo", {"text": "hi"}).content[0].text == "hi"
        assert client.endpoint.request("tools/list", client.lifecycle.stamp({}, client._envelope()))
        assert received == ["MainThread"] * 4


def test_a_future_keeps_the_reader_pool(served: Served) -> None:
    url, _probe, _posts = served
    with Client.http(url) as client:
        received = record_receivers(client)
        assert client.call_tool_future("echo", {"text": "hi"}).result(WAIT).content[0].text == "hi"
        assert received == []  # read by a reader thread, which hands it over itself


def test_progress_of_a_call_read_on_the_caller_reaches_the_callback_thread(
    served: Served,
) -> None:
    url, _probe, _posts = served
    seen: list[tuple[float, str]] = []
    with Client.http(url) as client:
        result = client.call_tool(
            "stepped",
            {"steps": 3},
            on_progress=lambda progress, _total, _message: seen.append(
                (progress, threading.current_thread().name)
            ),
        )
        assert result.content[0].text == "stepped"
        client.endpoint._callbacks.join(WAIT)  # type: ignore[attr-defined]
    assert [progress for progress, _ in seen] == [1, 2, 3]
    assert all(name != "MainThread" for _, name in seen)


def test_cancelling_from_another_thread_ends_the_callers_read(served: Served) -> None:
    url, probe, posts = served
    token = CancelToken()
    with Client.http(url) as client:
        caller = Caller(lambda: client.call_tool("gated", {"tag": "c"}, cancel_token=token))
        assert probe.started("c").wait(WAIT)
        token.cancel("enough")
        assert isinstance(caller.outcome(), Cancelled)
        assert probe.cancelled("c").wait(WAIT)  # the closed stream cancelled the handler
        assert client.call_tool("echo", {"text": "alive"}).content[0].text == "alive"
        assert client.endpoint.in_flight() == (0, 0)
    assert posts.count("notifications/cancelled") == 0


def test_a_timeout_ends_the_callers_read(served: Served) -> None:
    url, probe, _posts = served
    with Client.http(url) as client:
        with pytest.raises(RequestTimeout):
            client.call_tool("gated", {"tag": "t"}, timeout=0.3)
        assert probe.cancelled("t").wait(WAIT)
        assert transport_of(client)._flights == {}


def test_ctrl_c_inside_the_callers_read_cancels_the_call(served: Served) -> None:
    """A KeyboardInterrupt raised while the main thread reads the answer (here: as it
    handles the progress notification) closes the stream and cancels the call."""
    url, probe, posts = served
    with Client.http(url) as client:
        receive = client.endpoint.receive_line

        def interrupted(line: bytes | str) -> None:
            if b"notifications/progress" in (line if isinstance(line, bytes) else line.encode()):
                raise KeyboardInterrupt
            receive(line)

        client.endpoint.receive_line = interrupted  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            client.call_tool("progress_gated", {"tag": "k"}, on_progress=lambda *_: None)
        assert probe.cancelled("k").wait(WAIT)
        assert client.endpoint.in_flight() == (0, 0)
        assert transport_of(client)._flights == {}
        client.endpoint.receive_line = receive  # type: ignore[method-assign]
        assert client.call_tool("echo", {"text": "alive"}).content[0].text == "alive"
    assert posts.count("notifications/cancelled") == 0


def test_a_real_sigint_while_the_main_thread_reads_cancels_the_call(served: Served) -> None:
    """SIGINT while the main thread is blocked reading its answer: the read ends with
    KeyboardInterrupt, the call is cancelled on the wire (its stream closed), the client
    goes on."""
    url, probe, posts = served
    main = threading.main_thread().ident
    assert main is not None and threading.current_thread() is threading.main_thread()

    def interrupt() -> None:
        if probe.started("s").wait(WAIT):
            signal.pthread_kill(main, signal.SIGINT)

    with Client.http(url) as client:
        interrupter = threading.Thread(target=interrupt, name="interrupter")
        interrupter.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                client.call_tool("gated", {"tag": "s"})
        finally:
            interrupter.join(WAIT)
        assert probe.cancelled("s").wait(WAIT)
        assert client.endpoint.in_flight() == (0, 0)
        assert client.call_tool("echo", {"text": "alive"}).content[0].text == "alive"
    assert posts.count("notifications/cancelled") == 0


def test_closing_the_client_ends_the_callers_read(served: Served) -> None:
    url, probe, _posts = served
    client = Client.http(url)
    try:
        caller = Caller(lambda: client.call_tool("gated", {"tag": "z"}))
        assert probe.started("z").wait(WAIT)
    finally:
        client.close()
    assert isinstance(caller.outcome(), ConnectionClosed)
    assert probe.cancelled("z").wait(WAIT)


def test_a_read_never_claimed_is_dropped_by_the_cancel(served: Served) -> None:
    """Interrupted between sending and waiting: the call's cancel drops its read, nothing
    was posted, nothing is kept."""
    url, probe, posts = served
    with Client.http(url) as client:
        with caller_waits():
            call = client.submit("tools/call", {"name": "touch", "arguments": {"tag": "n"}})
        transport = transport_of(client)
        assert list(transport._caller_reads) != []
        assert call.cancel()
        with pytest.raises(Cancelled):
            call.result()
        assert transport._caller_reads == {}
        assert transport._flights == {}
        assert client.call_tool("echo", {"text": "alive"}).content[0].text == "alive"
    assert posts.count("tools/call") == 1  # only the echo
    assert not probe.event("n").is_set()


def test_a_cancel_written_by_another_thread_before_it_settles_leaves_no_mark(
    served: Served,
) -> None:
    """The canceller queues notifications/cancelled under the registry lock and settles the
    call after releasing it; another writer may flush that cancel (dropping the unread read)
    and the caller look for its read in between. The caller must see the call as over (no
    mark is left for a send that will never come)."""
    url, probe, posts = served
    with Client.http(url) as client:
        endpoint, transport = client.endpoint, transport_of(client)
        with caller_waits():
            call = client.submit("tools/call", {"name": "touch", "arguments": {"tag": "m"}})
        perform = endpoint._perform
        interleaved: list[bool] = []

        def between(actions: Any, *args: Any) -> None:
            if not interleaved:
                interleaved.append(True)
                endpoint._flush(block=True)  # another writer: the cancel drops the read
                call._read_here()  # the caller looks before the canceller settled
            perform(actions, *args)

        endpoint._perform = between  # type: ignore[method-assign]
        try:
            assert call.cancel()
        finally:
            endpoint._perform = perform  # type: ignore[method-assign]
        assert interleaved
        with pytest.raises(Cancelled):
            call.result()
        assert transport._caller_reads == {}
        assert transport._flights == {}
    assert posts.count("tools/call") == 0
    assert not probe.event("m").is_set()


def test_blocking_calls_cancelled_at_random_moments_each_end_once_and_leave_nothing(
    served: Served,
) -> None:
    """Blocking calls on six threads, each cancelled from a timer at a random moment --
    before its POST, while the caller reads, after the answer: each ends with its result or
    Cancelled, and no read, mark or flight is left behind."""
    import random
    import sys

    url, _probe, _posts = served
    outcomes: list[str] = []
    lock = threading.Lock()
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        with Client.http(url, max_workers=8) as client:

            def worker(index: int) -> None:
                rng = random.Random(index)
                for _ in range(12):
                    token = CancelToken()
                    timer = threading.Timer(rng.random() * 0.04, token.cancel)
                    timer.start()
                    try:
                        text = (
                            client.call_tool("echo", {"text": "done"}, cancel_token=token)
                            .content[0]
                            .text
                        )
                    except Cancelled:
                        text = "Cancelled"
                    finally:
                        timer.join(WAIT)
                    with lock:
                        outcomes.append(text)

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(WAIT * 4)
            transport = transport_of(client)
            assert transport._caller_reads == {}
            assert transport._flights == {}
            assert client.endpoint.in_flight() == (0, 0)
    finally:
        sys.setswitchinterval(previous)
    assert len(outcomes) == 72
    assert set(outcomes) <= {"done", "Cancelled"}


def test_a_2025_blocking_call_keeps_its_reader_and_leaves_nothing(served: Served) -> None:
    url, _probe, _posts = served
    with legacy_http(url) as client:
        received = record_receivers(client)
        assert client.call_tool("echo", {"text": "old"}).content[0].text == "old"
        assert transport_of(client)._caller_reads == {}
        assert "MainThread" not in received


# -- the transport's handshake, driven by hand -------------------------------------------------


def modern_call(url: str, request_id: int, tool: str, arguments: dict[str, Any]) -> bytes:
    """An encoded 2026-07-28 tools/call, stamped as a client of ``url`` stamps it."""
    with Client.http(url) as client:
        params = client.lifecycle.stamp({"name": tool, "arguments": arguments}, client._envelope())
    return encode(Request(request_id, "tools/call", params))


HINTED = OutboundMeta("request", "tools/call", request_id=7, caller_reads=True)


class Answers:
    """The messages a bare transport hands over, and the thread that handed each."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.got = threading.Event()
        self.items: list[tuple[dict[str, Any], str]] = []

    def __call__(self, data: bytes) -> None:
        with self.lock:
            self.items.append((json.loads(data), threading.current_thread().name))
        self.got.set()


@contextmanager
def bare_transport(url: str) -> Iterator[tuple[HttpClientTransport, Answers]]:
    """A transport of its own (no endpoint), and what its reader threads hand over."""
    transport = HttpClientTransport(url, open_get_stream=False)
    pooled = Answers()
    transport.bind_receiver(pooled)
    try:
        yield transport, pooled
    finally:
        transport.close()


def test_a_send_before_the_claim_is_read_by_the_claiming_caller(served: Served) -> None:
    url, _probe, _posts = served
    data = modern_call(url, 7, "echo", {"text": "mine"})
    with bare_transport(url) as (transport, pooled):
        transport.send(data, HINTED)
        assert readers() == 0 and transport._readers.threads == 0
        mine = Answers()
        assert transport.read_on_caller(7, mine, lambda: False)
        assert mine.items[0][1] == "MainThread"
        assert mine.items[0][0]["result"]["content"][0]["text"] == "mine"
        assert pooled.items == [] and transport._readers.threads == 0
        assert transport._caller_reads == {} and transport._flights == {}


def test_a_claim_before_the_send_leaves_the_read_to_a_reader(
    served: Served, client_path: str
) -> None:
    url, _probe, _posts = served
    data = modern_call(url, 7, "echo", {"text": "pooled"})
    with bare_transport(url) as (transport, pooled):
        mine = Answers()
        assert not transport.read_on_caller(7, mine, lambda: False)  # not sent yet: a mark
        assert transport._caller_reads != {}
        transport.send(data, HINTED)  # the mark: a reader takes it
        assert transport._caller_reads == {}
        assert pooled.got.wait(WAIT)
        message, thread = pooled.items[0]
        # the plain path's reader writes the request and leaves the answer to the loop
        assert thread == (RESPONSE_LOOP if client_path == "plain" else READER)
        assert message["result"]["content"][0]["text"] == "pooled"
        assert mine.items == []


def test_a_claim_of_a_settled_call_leaves_no_mark(served: Served) -> None:
    url, _probe, _posts = served
    transport = HttpClientTransport(url, open_get_stream=False)
    try:
        assert not transport.read_on_caller(7, Answers(), lambda: True)
        assert transport._caller_reads == {}
    finally:
        transport.close()


def test_closing_the_transport_fails_a_read_nobody_ran(served: Served) -> None:
    url, probe, posts = served
    data = modern_call(url, 7, "touch", {"tag": "never"})
    transport = HttpClientTransport(url, open_get_stream=False)
    failed: list[tuple[Any, BaseException]] = []
    transport.bind_call_failure(lambda request_id, exc, **_: failed.append((request_id, exc)))
    transport.send(data, HINTED)
    transport.close()
    assert [request_id for request_id, _ in failed] == [7]
    assert isinstance(failed[0][1], ConnectionClosed)
    assert transport._caller_reads == {}
    assert not transport.read_on_caller(7, Answers(), lambda: False)
    assert transport._caller_reads == {}
    assert posts.count("tools/call") == 0
    assert not probe.event("never").is_set()
