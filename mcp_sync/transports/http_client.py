"""The client side of Streamable HTTP (revision 2025-11-25), without asyncio.

Built on httpx's synchronous client (the optional extra ``mcp-sync-threaded[http]``): a
maintained, thread-safe, connection-pooling client with streaming responses and per-phase
timeouts, which is what SSE over plain threads needs.

Every message the endpoint writes is POSTed, and :meth:`HttpClientTransport.write` never
waits for the network (after the handshake): each request is POSTed by a short-lived thread
of its own, which then reads the answer -- JSON, or an SSE stream that it follows to the
end (HTTP/1.1 needs one connection, and so one blocking reader, per open response).
Notifications and responses are POSTed in order by one sender thread; a
``notifications/cancelled`` goes only after its request's POST got through. After the
handshake a thread holds the GET stream for server-initiated messages. Dropped streams are
resumed with ``Last-Event-ID``; one that cannot be resumed fails the connection.
:meth:`HttpClientTransport.close` ends the session with ``DELETE``.
"""

from __future__ import annotations

import json
import logging
import queue
import socket
import threading
from typing import Any, Mapping

from ..errors import ConnectionClosed
from ..jsonrpc import id_key, is_valid_id
from .sse import SseParser

__all__ = ["HttpClientTransport", "HttpError", "SessionEnded"]

_log = logging.getLogger("mcp_sync.http_client")


class HttpError(ConnectionClosed):
    """The server refused a message with an HTTP error status (401, 403, 4xx, 5xx)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:  # copy.copy() and pickle keep the status
        return (type(self), (self.status, str(self)))


class SessionEnded(HttpError):
    """The server answered 404 for our session: it ended (or never existed)."""


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the HTTP transport needs httpx: pip install 'mcp-sync-threaded[http]'") from exc
    return httpx


class HttpClientTransport:
    """A transport that speaks Streamable HTTP to ``url``.

    Args:
        url: the MCP endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        headers: extra headers for every request (for example ``Authorization``).
        connect_timeout: seconds to establish a connection.
        reconnect_attempts: how many times a dropped SSE stream is resumed.
        reconnect_delay: seconds between attempts (the server's ``retry:`` wins).
        open_get_stream: open the GET stream for server-initiated messages.
    """

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        connect_timeout: float = 10.0,
        reconnect_attempts: int = 3,
        reconnect_delay: float = 0.5,
        open_get_stream: bool = True,
    ) -> None:
        httpx = _httpx()
        self.url = url
        self._headers = dict(headers or {})
        self._client = httpx.Client(
            headers=self._headers,
            timeout=httpx.Timeout(connect=connect_timeout, read=None, write=30.0, pool=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
        )
        self._reconnect_attempts = reconnect_attempts
        self._reconnect_delay = reconnect_delay
        self._open_get = open_get_stream
        self._inbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._responses: set[Any] = set()
        self._threads: set[threading.Thread] = set()
        self._closed = threading.Event()
        self._get_started = False
        self._failure: BaseException | None = None
        # ids of our requests we cancelled: their streams end without an answer, by design
        self._cancelled: set[tuple[type, Any]] = set()
        # requests whose POST has not got its answer headers yet (a cancel waits for them)
        self._posted: dict[tuple[type, Any], threading.Event] = {}
        self._outgoing: queue.SimpleQueue[tuple[bytes, Any] | None] = queue.SimpleQueue()
        self._sender: threading.Thread | None = None
        self.session_id: str | None = None
        self.protocol_version: str | None = None

    # -- transport interface ------------------------------------------------------------------
    def read_line(self) -> bytes | None:
        """The next message from any stream; ``None`` once closed. Raises the
        :class:`SessionEnded` (or other :class:`~mcp_sync.errors.ConnectionClosed`) that
        ended the connection when a stream learnt it (a 404 while resuming, say)."""
        if self._closed.is_set():
            return None
        item = self._inbox.get()
        if item is None and self._failure is not None:
            raise self._failure
        return item

    def write(self, data: bytes) -> None:
        """Send one message without waiting for the network.

        ``initialize`` and ``notifications/initialized`` are POSTed here and now (nothing
        else may go before them). Every later request is POSTed by a thread of its own,
        which then reads its answer; notifications and responses are POSTed in order by
        one sender thread, and a ``notifications/cancelled`` only after its request's POST
        got through. So neither a slow server nor a cancellation ever stalls the caller.
        """
        if self._closed.is_set():
            raise ConnectionClosed("the HTTP transport is closed")
        message = json.loads(data)
        method = message.get("method") if isinstance(message, dict) else None
        is_request = method is not None and "id" in message
        if method in ("initialize", "notifications/initialized"):
            self._post(data, message, is_request, stream_inline=False)
            if method == "notifications/initialized":
                self._start_get_stream()
            return
        if is_request:
            posted = threading.Event()
            key = _key(message["id"])
            if key is not None:
                with self._lock:
                    self._posted[key] = posted
            self._start(self._post_request, data, message, posted, f"mcp_sync-http-request-{message['id']}")
            return
        if method == "notifications/cancelled":
            params = message.get("params")
            key = _key(params.get("requestId")) if isinstance(params, dict) else None
            if key is not None:
                with self._lock:
                    self._cancelled.add(key)
        with self._lock:
            if self._sender is None:
                self._sender = threading.Thread(target=self._send_loop, name="mcp_sync-http-sender", daemon=True)
                self._threads.add(self._sender)
                self._sender.start()
        self._outgoing.put((data, message))

    def _post(self, data: bytes, message: Any, is_request: bool, *, stream_inline: bool, posted: threading.Event | None = None) -> None:
        """POST one message and route its answer (JSON body or SSE stream) to the inbox."""
        httpx = _httpx()
        request = self._client.build_request("POST", self.url, content=data.rstrip(b"\n"), headers=self._request_headers())
        try:
            try:
                response = self._client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise ConnectionClosed(f"HTTP POST to {self.url} failed: {exc}") from exc
        finally:
            if posted is not None:
                posted.set()
        try:
            self._check(response)
        except BaseException:
            response.close()
            raise
        if is_request and message.get("method") == "initialize":
            session_id = response.headers.get("mcp-session-id")
            if session_id:
                self.session_id = session_id
        content_type = response.headers.get("content-type", "")
        if response.status_code == 202 or not is_request:
            response.close()
        elif content_type.startswith("text/event-stream"):
            if stream_inline:
                self._read_stream(response, message.get("id"))
            else:
                self._start(self._read_stream, response, message.get("id"), f"mcp_sync-http-stream-{message.get('id')}")
        else:
            try:
                body = response.read()
            finally:
                response.close()
            if body.strip():
                self._deliver(body)

    def _post_request(self, data: bytes, message: Any, posted: threading.Event) -> None:
        """Thread body: POST a request and read its answer."""
        try:
            self._post(data, message, True, stream_inline=True, posted=posted)
        except ConnectionClosed as exc:
            self._fail(exc)
        finally:
            posted.set()
            key = _key(message.get("id"))
            with self._lock:
                if key is not None and self._posted.get(key) is posted:
                    del self._posted[key]

    def _send_loop(self) -> None:
        """Thread body: POST notifications and responses, in order."""
        while True:
            item = self._outgoing.get()
            if item is None:
                return
            data, message = item
            if message.get("method") == "notifications/cancelled":
                params = message.get("params")
                key = _key(params.get("requestId")) if isinstance(params, dict) else None
                with self._lock:
                    posted = self._posted.get(key) if key is not None else None
                while posted is not None and not posted.wait(0.1):  # after its request, never before
                    if self._closed.is_set():
                        return
            try:
                self._post(data, message, False, stream_inline=False)
            except ConnectionClosed as exc:
                self._fail(exc)
                return
            except Exception as exc:  # pragma: no cover - unexpected
                self._fail(ConnectionClosed(f"HTTP POST to {self.url} failed: {exc}"))
                return

    def close(self) -> None:
        """End the session (``DELETE``), close every stream, join the reader threads."""
        if self._closed.is_set():
            return
        with self._lock:
            sender = self._sender
        if sender is not None:  # let queued notifications (cancellations) go out first
            self._outgoing.put(None)
            sender.join(2.0)
        if self.session_id is not None:
            try:
                self._client.delete(self.url, headers=self._request_headers(), timeout=5.0)
            except Exception:
                _log.debug("DELETE of the session failed", exc_info=True)
        self._closed.set()
        with self._lock:
            responses = list(self._responses)
            threads = list(self._threads)
        for response in responses:
            _abort(response)
        self._inbox.put(None)
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(5.0)
        self._client.close()

    # -- helpers ------------------------------------------------------------------------------
    def _request_headers(self, *, accept: str = "application/json, text/event-stream") -> dict[str, str]:
        headers = {"Accept": accept, "Content-Type": "application/json"}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    def _check(self, response: Any) -> None:
        status = response.status_code
        if status < 400:
            return
        try:
            detail = response.read().decode("utf-8", "replace")[:200]
        except Exception:
            detail = ""
        if status == 404 and self.session_id is not None:
            raise SessionEnded(404, f"the server ended the MCP session (HTTP 404): {detail}".rstrip(": "))
        if status == 401:
            raise HttpError(401, f"the server requires authentication (HTTP 401): {detail}".rstrip(": "))
        if status == 403:
            raise HttpError(403, f"the server refused access (HTTP 403): {detail}".rstrip(": "))
        raise HttpError(status, f"HTTP {status} from {self.url}: {detail}".rstrip(": "))

    def _fail(self, failure: BaseException) -> None:
        """End the connection: the endpoint's reader gets ``failure`` from :meth:`read_line`."""
        with self._lock:
            if self._failure is not None or self._closed.is_set():
                return
            self._failure = failure
        self._inbox.put(None)

    def _deliver(self, data: bytes) -> None:
        if self.protocol_version is None:
            try:
                message = json.loads(data)
                version = message.get("result", {}).get("protocolVersion")
                if isinstance(version, str):
                    self.protocol_version = version
            except (ValueError, AttributeError):
                pass
        self._inbox.put(data.replace(b"\n", b" "))

    def _start(self, target: Any, *args: Any) -> None:
        name = args[-1]
        thread = threading.Thread(target=self._run_thread, args=(target, *args[:-1]), name=name, daemon=True)
        with self._lock:
            if self._closed.is_set():
                for arg in args[:-1]:
                    if hasattr(arg, "close"):
                        arg.close()
                return
            self._threads.add(thread)
        thread.start()

    def _run_thread(self, target: Any, *args: Any) -> None:
        try:
            target(*args)
        except Exception:
            if not self._closed.is_set():
                _log.debug("HTTP stream reader failed", exc_info=True)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _consume(self, response: Any, parser: SseParser, answer_to: Any = None) -> bool:
        """Feed one SSE response into the inbox. True if it ended normally and, when
        ``answer_to`` is a request id, carried the answer to that request."""
        with self._lock:
            self._responses.add(response)
        answered = answer_to is None
        try:
            for line in response.iter_lines():
                event = parser.feed(line)
                if event is not None and event[1] == "message" and event[2].strip():
                    data = event[2].encode()
                    if not answered and _answers(data, answer_to):
                        answered = True
                    self._deliver(data)
            return answered
        except Exception:
            return False
        finally:
            with self._lock:
                self._responses.discard(response)
            response.close()

    def _read_stream(self, response: Any, request_id: Any) -> None:
        parser = SseParser()
        try:
            if self._consume(response, parser, request_id) or self._was_cancelled(request_id):
                return
            # the stream ended without the answer: resume it with Last-Event-ID
            if not self._resume(parser, request_id) and not self._closed.is_set():
                # the answer is lost for good: fail the connection rather than leave the
                # call waiting for ever -- with SessionEnded if that is why (a GET says)
                probe, _ = self._get(None)
                if probe is not None:
                    _abort(probe)
                self._fail(ConnectionClosed(f"the answer stream of request {request_id!r} broke and could not be resumed"))
        finally:
            with self._lock:
                self._cancelled.discard(_key(request_id))

    def _was_cancelled(self, request_id: Any) -> bool:
        """True if we cancelled ``request_id``: its stream ends with no answer, by design."""
        with self._lock:
            return _key(request_id) in self._cancelled

    def _resume(self, parser: SseParser, request_id: Any) -> bool:
        """Resume a request's stream with ``Last-Event-ID``; True once the answer came (or
        the request was cancelled by us)."""
        attempts = 0
        while not self._closed.is_set() and parser.last_event_id and attempts < self._reconnect_attempts:
            attempts += 1
            delay = (parser.retry_ms / 1000) if parser.retry_ms else self._reconnect_delay
            if self._closed.wait(delay):
                return False
            response, _ = self._get(parser.last_event_id)
            if response is None:
                if self._failure is not None:
                    return False
                continue
            if self._consume(response, parser, request_id) or self._was_cancelled(request_id):
                return True
        return self._was_cancelled(request_id)

    def _get(self, last_event_id: str | None) -> tuple[Any, Any]:
        """Open a GET stream: ``(response, None)``, or ``(None, why)`` with an HTTP status or
        an httpx error. A 404 means the server ended the session: the connection fails with
        :class:`SessionEnded`."""
        headers = self._request_headers(accept="text/event-stream")
        headers.pop("Content-Type", None)
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        httpx = _httpx()
        try:
            response = self._client.send(self._client.build_request("GET", self.url, headers=headers), stream=True)
        except httpx.HTTPError as exc:
            return None, exc
        status = response.status_code
        if status == 404 and self.session_id is not None:
            try:
                self._check(response)
            except SessionEnded as exc:
                self._fail(exc)
            finally:
                response.close()
            return None, status
        if status != 200 or not response.headers.get("content-type", "").startswith("text/event-stream"):
            response.close()
            return None, status
        return response, None

    def _start_get_stream(self) -> None:
        if not self._open_get or self._get_started:
            return
        self._get_started = True
        self._start(self._hold_get_stream, "mcp_sync-http-get-stream")

    def _hold_get_stream(self) -> None:
        httpx = _httpx()
        parser = SseParser()
        failures = 0
        while not self._closed.is_set() and self._failure is None:
            response, error = self._get(parser.last_event_id)
            if response is None:
                if error == 405 or self._failure is not None:
                    return  # the server offers no GET stream, or the session ended
                failures += 1
                if failures > self._reconnect_attempts:
                    if isinstance(error, httpx.TransportError):
                        # the server is gone: fail the pending calls rather than leave them hanging
                        self._fail(ConnectionClosed(f"lost the connection to {self.url}: {error}"))
                    return
                if self._closed.wait(self._reconnect_delay * failures):
                    return
                continue
            failures = 0
            self._consume(response, parser)
            if self._closed.wait(self._reconnect_delay):
                return


def _key(request_id: Any) -> tuple[type, Any] | None:
    """The id's key (type included), or ``None`` for a value that is not a valid id."""
    return id_key(request_id) if is_valid_id(request_id) else None


def _abort(response: Any) -> None:
    """Close a streaming response from another thread. Closing alone does not wake a thread
    blocked reading it; shutting the socket down does."""
    try:
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception:
        pass
    try:
        response.close()
    except Exception:
        pass


def _answers(data: bytes, request_id: Any) -> bool:
    try:
        message = json.loads(data)
    except ValueError:
        return False
    return isinstance(message, dict) and "method" not in message and message.get("id") == request_id
