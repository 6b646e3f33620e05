"""The :class:`Context` handed to request handlers, on either side of a connection.

A handler asks for it by annotation (``def tool(x: int, ctx: Context)``). It carries the
request's cancellation token, progress and logging helpers, and :attr:`Context.session`, a
view of the connection whose requests are cancelled automatically when the handler's own
request is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .cancel import CancelToken
from .jsonrpc import RequestId
from .lifecycle import Era, RequestEnvelope
from .principal import Principal
from .protocol import InboundRequest
from .session import LOG_LEVELS

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

__all__ = ["Context"]


class Context:
    """What a handler knows about the request it serves.

    Attributes:
        request_id: the JSON-RPC id of the request (its JSON type kept).
        method: the request's method, e.g. ``"tools/call"``.
        cancel_token: fires when the request is cancelled by the peer, when a server-side
            ``timeout=`` expires, or when the connection closes.
    """

    def __init__(self, session: Session, request: InboundRequest, token: CancelToken) -> None:
        self._session = session
        self._request = request
        self.cancel_token = token
        self.request_id: RequestId = request.id
        self.method = request.method
        self._progress_lock = threading.Lock()
        self._last_progress: float | None = None

    # -- the request's own context ----------------------------------------------------------------
    def _about(self, name: str, fallback: Any = None) -> Any:
        """``name`` of the request's own scope (a server's), else of the session."""
        scope = self._request.context
        source = scope if scope is not None and hasattr(scope, name) else self._session
        return getattr(source, name, fallback)

    @property
    def protocol_version(self) -> str | None:
        """The protocol version of this request: at 2026-07-28 the one its ``_meta`` names,
        on a 2025 session the one ``initialize`` negotiated."""
        return self._about("protocol_version")  # type: ignore[no-any-return]

    @property
    def era(self) -> Era:
        """The era this request is served in (:attr:`Era.MODERN
        <mcp_sync.lifecycle.Era.MODERN>` for a 2026-07-28 request)."""
        era = self._about("era")
        return era if isinstance(era, Era) else Era.HANDSHAKE

    @property
    def envelope(self) -> RequestEnvelope | None:
        """This request's 2026-07-28 envelope (``None`` in the handshake era)."""
        return self._about("envelope")  # type: ignore[no-any-return]

    @property
    def principal(self) -> Principal | None:
        """Who sent this request: the :class:`~mcp_sync.principal.Principal` of its verified
        access token when the HTTP app checks tokens
        (:class:`~mcp_sync.http.bearer.BearerAuth`), else ``None`` (stdio, an app without
        ``auth=``, or the client side of a connection)."""
        principal = getattr(self._request.context, "principal", None)
        return principal if isinstance(principal, Principal) else None

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """The client's capabilities as this request declares them (never inferred from
        earlier requests; on a 2025 session, those of the handshake)."""
        return dict(self._about("peer_capabilities", {}))

    @property
    def client_info(self) -> dict[str, Any]:
        """The client's ``name`` and ``version`` as this request names them (``{}`` if it
        does not; on a 2025 session, the handshake's ``clientInfo``)."""
        return dict(self._about("peer_info", {}))

    @property
    def log_level(self) -> str | None:
        """The least severe level :meth:`log` sends for this request; ``None``: none at all
        (a 2026-07-28 request whose ``_meta`` asks for no log level)."""
        return self._about("log_level")  # type: ignore[no-any-return]

    # -- cancellation ---------------------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        """True once the request is cancelled (the caller will get no answer from us)."""
        return self.cancel_token.cancelled

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep up to ``timeout`` seconds, waking at once on cancellation; returns
        :attr:`cancelled` (``threading.Event.wait`` style)."""
        return self.cancel_token.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise :class:`~mcp_sync.errors.Cancelled` if the request is cancelled."""
        self.cancel_token.raise_if_cancelled()

    def on_cancel(self, callback: Callable[[], Any]) -> None:
        """Run ``callback()`` when the request is cancelled (at once if it already is).

        The callback runs on the connection's callback thread -- promptly, even when every
        worker is busy -- never on its reader thread. Keep it short: it can close a socket or
        interrupt a query so that a blocked handler returns.
        """
        endpoint = self._session.endpoint

        def fire(_token: CancelToken) -> None:
            endpoint.run_callback(callback)

        if self.cancel_token.cancelled:
            callback()
        else:
            self.cancel_token.add_callback(fire)

    # -- progress and logging --------------------------------------------------------------------
    @property
    def progress_token(self) -> str | int | None:
        """The caller's ``progressToken``, or ``None`` if it did not ask for progress."""
        return self._request.progress_token

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Send ``notifications/progress`` if the caller asked for progress.

        ``progress`` must increase with every call (a ``ValueError`` otherwise). Returns False
        when nothing was sent: no ``progressToken``, or the request has ended.
        """
        with self._progress_lock:
            if self._last_progress is not None and progress <= self._last_progress:
                raise ValueError(f"progress must increase: {progress} after {self._last_progress}")
            self._last_progress = progress
        return self._session.endpoint.report_progress(self._request, progress, total, message)

    def log(self, level: str, data: Any, logger: str | None = None) -> bool:
        """Send ``notifications/message`` at ``level`` (an MCP log level such as ``"info"``).

        Returns False when nothing was sent: the level is below :attr:`log_level` (at
        2026-07-28: the request asked for no log messages, or for a higher level), or the
        request was already cancelled or answered.
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; use one of {LOG_LEVELS}")
        # the request's own scope, when the session keeps one, knows the request's log level
        scoped_log = getattr(self._request.context, "send_log", None)
        if scoped_log is not None:
            return bool(scoped_log(level, data, logger))
        send_log = getattr(self._session, "send_log", None)
        if send_log is None:
            raise RuntimeError("this side of the connection cannot send log messages")
        return bool(send_log(level, data, logger, related_request=self.request_id))

    def debug(self, data: Any) -> bool:
        """Shorthand for ``log("debug", data)``."""
        return self.log("debug", data)

    def info(self, data: Any) -> bool:
        """Shorthand for ``log("info", data)``."""
        return self.log("info", data)

    def warning(self, data: Any) -> bool:
        """Shorthand for ``log("warning", data)``."""
        return self.log("warning", data)

    def error(self, data: Any) -> bool:
        """Shorthand for ``log("error", data)``."""
        return self.log("error", data)

    # -- input rounds (2026-07-28) ---------------------------------------------------------------
    def _input_round(self) -> Any:
        return getattr(getattr(self._request, "context", None), "input_round", None)

    @property
    def input_responses(self) -> Mapping[str, Any]:
        """The client's answers to the input this handler asked for by returning an
        :class:`~mcp_sync.server.InputRequired` in the round before (key -> the
        client's result, a JSON object); empty on a first request. See :doc:`/input-rounds`."""
        current = self._input_round()
        return current.input_responses if current is not None else {}

    @property
    def request_state_payload(self) -> Any:
        """The ``state`` of the :class:`~mcp_sync.server.InputRequired` this
        handler returned in the round before (opened and verified), or ``None``."""
        current = self._input_round()
        return current.handler_state if current is not None else None

    # -- nested requests -------------------------------------------------------------------------
    @property
    def session(self) -> Any:
        """The connection, scoped to this request -- requests made through it (for example
        ``ctx.session.list_roots()``) are cancelled on the wire when this request is."""
        scope = self._request.context
        child = getattr(scope, "child", None)
        if child is not None:  # the request's own scope (a server session makes one per request)
            return child(self.cancel_token)
        scoped = getattr(self._session, "scoped", None)
        if scoped is None:
            return self._session
        return scoped(self.cancel_token, self.request_id)
