"""A client that is nothing but JSON lines: it writes what the test tells it to and keeps
every line the server wrote, decoded, in order (so nothing can hide a stray message)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, Protocol

from support.waiting import WAIT


class Lines(Protocol):
    """What the client needs of a connection: one line in, one line out."""

    def read_line(self) -> bytes | None: ...

    def write(self, data: bytes) -> None: ...


def same_id(a: Any, b: Any) -> bool:
    """JSON-RPC ids compared exactly: ``3`` is not ``"3"``, ``True`` is not ``1``."""
    return type(a) is type(b) and a == b


class LineClient:
    """Reads every line of ``lines`` on a thread of its own (until the end of input)."""

    def __init__(self, lines: Lines, on_message: Callable[[Any], None] | None = None) -> None:
        self.lines = lines
        self.received: list[Any] = []
        self.sent: list[dict[str, Any]] = []
        self.on_message = on_message
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self.ended = threading.Event()
        self._reader = threading.Thread(target=self._read, name="line-client-reader")
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                raw = self.lines.read_line()
                if raw is None:
                    return
                if not raw.strip():
                    continue
                try:
                    message = json.loads(raw)
                except ValueError:
                    message = raw
                with self._cond:
                    self.received.append(message)
                    self._cond.notify_all()
                if self.on_message is not None:
                    self.on_message(message)
        finally:
            self.ended.set()
            with self._cond:
                self._cond.notify_all()

    def write(self, message: dict[str, Any]) -> None:
        with self._write_lock:
            self.sent.append(message)
            self.lines.write(json.dumps(message).encode() + b"\n")

    def _answer(self, request_id: Any) -> dict[str, Any] | None:
        for message in self.received:
            if (
                isinstance(message, dict)
                and "method" not in message
                and same_id(message.get("id"), request_id)
            ):
                return message
        return None

    def wait_answer(self, request_id: Any, timeout: float = WAIT) -> dict[str, Any]:
        """The answer to ``request_id``; fails if none comes within ``timeout``."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self._answer(request_id) is not None, timeout)
            assert ok, (
                f"no answer to {request_id!r} within {timeout} s; received {self.received[-5:]}"
            )
            found = self._answer(request_id)
        assert found is not None
        return found

    def wait_for(
        self, predicate: Callable[[list[Any]], Any], what: str, timeout: float = WAIT
    ) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: predicate(self.received), timeout), (
                f"timed out after {timeout} s waiting for {what}; received {self.received[-5:]}"
            )

    def about(
        self, request_id: Any, progress_token: Any = None, tag: str | None = None
    ) -> list[Any]:
        """Everything received about one request: its answers, progress for its token, log
        messages whose data names ``tag``."""
        out = []
        with self._cond:
            for message in self.received:
                if not isinstance(message, dict):
                    continue
                params = message.get("params") or {}
                if "method" not in message and same_id(message.get("id"), request_id):
                    out.append(message)
                elif (
                    message.get("method") == "notifications/progress" and progress_token is not None
                ):
                    if same_id(params.get("progressToken"), progress_token):
                        out.append(message)
                elif message.get("method") == "notifications/message" and tag is not None:
                    data = params.get("data")
                    if isinstance(data, dict) and data.get("tag") == tag:
                        out.append(message)
        return out

    def join(self, timeout: float = WAIT) -> None:
        self._reader.join(timeout)
        assert not self._reader.is_alive(), "the line client's reader did not see the end"
