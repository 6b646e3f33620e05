"""Transport wrappers that record every decoded message, so a test judges by what crossed
the wire: :class:`RecordingTransport` (one end of any transport) and :class:`WireRecorder`
(its variant for the interop tests, whose predicates look at both directions)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from support.messages import requests
from support.waiting import PEER_WAIT, WAIT


class RecordingTransport:
    """A transport wrapper that records decoded messages in both directions."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent: list[Any] = []
        self.received: list[Any] = []
        self._cond = threading.Condition()

    @staticmethod
    def _decode(data: bytes) -> Any:
        try:
            return json.loads(data)
        except ValueError:
            return data

    def read_line(self) -> bytes | None:
        line = self.inner.read_line()
        if line is not None and line.strip():
            with self._cond:
                self.received.append(self._decode(line))
                self._cond.notify_all()
        return line

    def write(self, data: bytes) -> None:
        # record first: the peer may react to the message before inner.write returns
        entry = self._decode(data)
        with self._cond:
            self.sent.append(entry)
            self._cond.notify_all()
        try:
            self.inner.write(data)
        except BaseException:
            with self._cond:
                self.sent.remove(entry)
            raise

    def close(self) -> None:
        self.inner.close()

    def wait_for(
        self, predicate: Callable[[RecordingTransport], Any], what: str, timeout: float = WAIT
    ) -> Any:
        """Wait until ``predicate(self)`` is truthy and return its value; fail with the wire."""
        box: list[Any] = []

        def check() -> bool:
            value = predicate(self)
            if value:
                box.append(value)
            return bool(value)

        with self._cond:
            ok = self._cond.wait_for(check, timeout)
        assert ok, (
            f"timed out after {timeout} s waiting for {what}; sent={self.sent!r} received={self.received!r}"
        )
        return box[-1]

    def snapshot(self) -> tuple[list[Any], list[Any]]:
        with self._cond:
            return list(self.sent), list(self.received)


class WireRecorder(RecordingTransport):
    """Wraps a transport; records decoded messages: ``sent`` (by us) and ``received``."""

    def wait_for(
        self,
        predicate: Callable[[list[Any], list[Any]], Any],
        what: str,
        timeout: float = PEER_WAIT,
    ) -> Any:  # type: ignore[override]
        """Wait until ``predicate(sent, received)`` holds; fail with the wire if it does not."""
        return super().wait_for(lambda wire: predicate(wire.sent, wire.received), what, timeout)

    def sent_requests(self, method: str) -> list[dict[str, Any]]:
        with self._cond:
            return requests(self.sent, method)

    def received_requests(self, method: str) -> list[dict[str, Any]]:
        with self._cond:
            return requests(self.received, method)
