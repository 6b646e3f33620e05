"""Cancellation: :class:`CancelToken` (it raises :class:`~mcp_sync.errors.Cancelled`).

A token is a one-shot flag (a :class:`threading.Event` is made only when a thread first waits
on it, so the token every request carries costs little). Whoever wants a piece of work to stop
calls :meth:`CancelToken.cancel`; the work observes it by polling
:attr:`CancelToken.cancelled`, by waiting with :meth:`CancelToken.wait`, or by registering a
callback with :meth:`CancelToken.add_callback`.

Callbacks run exactly once, outside any lock, in the thread that cancelled the token (or at
once, in the registering thread, if the token was already cancelled). A callback that raises
is logged and does not disturb the others.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from . import deadlines
from ._waiting import wait_sliced
from .errors import Cancelled

__all__ = ["CancelToken"]

_log = logging.getLogger("mcp_sync.cancel")

Callback = Callable[["CancelToken"], object]


class CancelToken:
    """A thread-safe, one-shot cancellation flag with callbacks and linked children.

    Example::

        token = CancelToken.with_timeout(5.0)
        while not token.cancelled:
            do_a_bit_of_work()
    """

    __slots__ = (
        "_cancelled",
        "_event",
        "_lock",
        "_reason",
        "_callbacks",
        "_deadline",
        "_sources",
        "__weakref__",
    )

    def __init__(self) -> None:
        self._cancelled = False
        # made by the first wait(): most tokens (one per request) are never waited on
        self._event: threading.Event | None = None
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._callbacks: list[Callback] | None = []
        self._deadline: deadlines.Deadline | None = None
        self._sources: tuple[CancelToken, ...] = ()  # what CancelToken.any() combined

    def __repr__(self) -> str:
        state = f"cancelled reason={self._reason!r}" if self.cancelled else "active"
        return f"<CancelToken {state}>"

    # -- state -------------------------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` has succeeded."""
        return self._cancelled

    @property
    def reason(self) -> str | None:
        """The reason given to the winning :meth:`cancel` call, or ``None``."""
        return self._reason

    def cancel(self, reason: str | None = None) -> bool:
        """Cancel the token. Returns True only for the one call that cancelled it.

        Registered callbacks run in this thread, after the flag is set, outside any lock.
        """
        with self._lock:
            if self._callbacks is None:
                return False
            self._reason = reason
            self._cancelled = True  # after the reason: whoever sees the flag sees the reason
            callbacks, self._callbacks = self._callbacks, None
            deadline, self._deadline = self._deadline, None
            event = self._event
        if event is not None:
            event.set()
        if deadline is not None:
            deadline.cancel()
        for callback in callbacks:
            self._run(callback)
        return True

    # -- waiting -----------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled or until ``timeout`` seconds pass; return :attr:`cancelled`.

        The wait is sliced into short waits so that ``KeyboardInterrupt`` is seen promptly.
        ``timeout=None`` waits for ever; zero or a negative value does not wait at all (as
        with :meth:`threading.Event.wait`, so a computed remaining time may go below zero).
        """
        if self._cancelled:
            return True
        if timeout is not None and timeout <= 0:
            return False
        event = self._event
        if event is None:
            with self._lock:  # cancel() reads the event under this lock, after setting the flag
                if self._cancelled:
                    return True
                if self._event is None:
                    self._event = threading.Event()
                event = self._event
        return wait_sliced(lambda: self._cancelled, event.wait, timeout)

    def raise_if_cancelled(self) -> None:
        """Raise :class:`~mcp_sync.errors.Cancelled` (with the reason) if the token is cancelled."""
        if self._cancelled:
            raise Cancelled(self._reason)

    # -- callbacks ---------------------------------------------------------------------------
    def add_callback(self, callback: Callback) -> None:
        """Run ``callback(token)`` once when the token is cancelled.

        If the token is already cancelled the callback runs at once, in this thread.
        """
        with self._lock:
            if self._callbacks is not None:
                self._callbacks.append(callback)
                return
        self._run(callback)

    def remove_callback(self, callback: Callback) -> bool:
        """Forget a callback that has not run yet; True if it was registered."""
        with self._lock:
            if self._callbacks is None:
                return False
            try:
                self._callbacks.remove(callback)
            except ValueError:
                return False
            return True

    def _run(self, callback: Callback) -> None:
        try:
            callback(self)
        except Exception:
            _log.exception("CancelToken callback %r failed", callback)

    # -- linking -----------------------------------------------------------------------------
    def child(self) -> CancelToken:
        """A new token that is cancelled (with the same reason) when this one is.

        Cancelling the child does not touch the parent, and unlinks the child from it.
        """
        child = CancelToken()
        link = _Link(child)
        self.add_callback(link)
        if not child.cancelled:
            child.add_callback(lambda _c: self.remove_callback(link))
        return child

    @classmethod
    def any(cls, *tokens: CancelToken) -> CancelToken:
        """A new token that is cancelled as soon as any of ``tokens`` is, with that token's
        reason (the first cancellation wins; later ones change nothing).

        Like .NET's linked token sources, for example
        ``CancelToken.any(app_lifetime, user_stop, CancelToken.with_timeout(30))``. If one of
        ``tokens`` is already cancelled, so is the result, at once. Cancelling the result
        does not touch ``tokens``, and unlinks it from them.

        The sources hold the combined token only weakly: a combined token that is dropped
        before it is cancelled is freed, and its links are removed from the sources, so a
        long-lived source (an application's lifetime) does not accumulate them. The combined
        token holds its sources, so ``any(any(a, b), c)`` works. Keep a reference to the
        combined token for as long as it matters: callbacks registered on it do not keep it
        alive.
        """
        combined = cls()
        if not tokens:
            return combined
        combined._sources = tokens  # the combined token keeps its sources, never the reverse
        link = _AnyLink()
        unlink = _Unlink(link, tokens)
        link.target = weakref.ref(combined, unlink)  # unlinked when the token is freed...
        combined.add_callback(unlink)  # ...or cancelled
        for token in tokens:
            token.add_callback(link)  # runs at once when the source is already cancelled
            if combined.cancelled:
                break
        if combined.cancelled:  # a source cancelled meanwhile may have unlinked too early
            unlink(combined)
        return combined

    @classmethod
    def with_timeout(cls, seconds: float, parent: CancelToken | None = None) -> CancelToken:
        """A token that cancels itself after ``seconds`` (reason ``"timeout"``; a negative
        value raises :class:`ValueError`).

        With ``parent`` it is also a child of that token. The timer is an entry in the shared
        deadline scheduler, removed as soon as the token is cancelled by any path.
        """
        token = parent.child() if parent is not None else cls()
        token.set_deadline(seconds)
        return token

    def set_deadline(self, seconds: float, reason: str = "timeout") -> None:
        """Cancel this token with ``reason`` after ``seconds`` unless cancelled sooner.

        Replaces a deadline set earlier. A negative ``seconds`` raises :class:`ValueError`.
        """
        entry = deadlines.schedule(
            deadlines.check_timeout(seconds, "seconds") or 0.0, lambda: self.cancel(reason)
        )
        with self._lock:
            old, self._deadline = self._deadline, entry
            live = self._callbacks is not None
        if old is not None:
            old.cancel()
        if not live:
            entry.cancel()


class _Link:
    """Callback object that forwards a parent's cancellation to one child."""

    __slots__ = ("child",)

    def __init__(self, child: CancelToken) -> None:
        self.child = child

    def __call__(self, parent: CancelToken) -> Any:
        return self.child.cancel(parent.reason)


class _AnyLink:
    """Callback object that forwards a source's cancellation to a combined token it holds
    only weakly (see :meth:`CancelToken.any`)."""

    __slots__ = ("target", "__weakref__")

    def __init__(self) -> None:
        self.target: weakref.ref[CancelToken] | None = None

    def __call__(self, source: CancelToken) -> Any:
        combined = self.target() if self.target is not None else None
        return combined is not None and combined.cancel(source.reason)


class _Unlink:
    """Removes one :class:`_AnyLink` from every source; runs when the combined token is
    cancelled or freed. Holds everything weakly, so it keeps nothing alive."""

    __slots__ = ("_link", "_sources")

    def __init__(self, link: _AnyLink, sources: tuple[CancelToken, ...]) -> None:
        self._link = weakref.ref(link)
        self._sources = tuple(weakref.ref(source) for source in sources)

    def __call__(self, _token_or_ref: object) -> None:
        link = self._link()
        if link is None:
            return
        for ref in self._sources:
            source = ref()
            if source is not None:
                source.remove_callback(link)
