"""A session seen from inside one handler: requests to the client tied to the handler's token."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..cancel import CancelToken
from ..jsonrpc import RequestId

if TYPE_CHECKING:  # pragma: no cover
    import mcp_types

    from .dispatch import ServerSession

__all__ = ["RequestScope"]


class RequestScope:
    """A :class:`ServerSession` seen from inside one handler: every request made through it
    is a child of the handler's token, so it is cancelled on the wire when the handler's own
    request is cancelled (or times out)."""

    def __init__(self, session: ServerSession, token: CancelToken, request_id: RequestId | None = None) -> None:
        self._session = session
        self._token = token
        self._request_id = request_id

    @property
    def session(self) -> ServerSession:
        """The underlying session."""
        return self._session

    @contextlib.contextmanager
    def _linked(self, cancel_token: CancelToken | None) -> Iterator[CancelToken]:
        """The handler's token, or a child of it that ``cancel_token`` also cancels (the
        link is removed afterwards, so a long-lived token does not collect callbacks)."""
        if cancel_token is None:
            yield self._token
            return
        linked = self._token.child()

        def forward(token: CancelToken) -> None:
            linked.cancel(token.reason)

        cancel_token.add_callback(forward)
        try:
            yield linked
        finally:
            cancel_token.remove_callback(forward)

    def list_roots(self, *, timeout: float | None = None, cancel_token: CancelToken | None = None) -> list[mcp_types.Root]:
        """See :meth:`ServerSession.list_roots`."""
        with self._linked(cancel_token) as token:
            return self._session.list_roots(timeout=timeout, cancel_token=token, related_request=self._request_id)

    def create_message(
        self, messages: Iterable[dict[str, Any]], *, max_tokens: int, cancel_token: CancelToken | None = None, **kwargs: Any
    ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools:
        """See :meth:`ServerSession.create_message`."""
        with self._linked(cancel_token) as token:
            return self._session.create_message(
                messages, max_tokens=max_tokens, cancel_token=token, related_request=self._request_id, **kwargs
            )

    def elicit(
        self, message: str, requested_schema: dict[str, Any] | None = None, *, cancel_token: CancelToken | None = None, **kwargs: Any
    ) -> mcp_types.ElicitResult:
        """See :meth:`ServerSession.elicit`."""
        with self._linked(cancel_token) as token:
            return self._session.elicit(
                message, requested_schema, cancel_token=token, related_request=self._request_id, **kwargs
            )

    def ping(self, *, timeout: float | None = None) -> None:
        """Ping the client."""
        self._session.send_request(
            "ping", None, timeout=timeout, cancel_token=self._token, related_request=self._request_id
        ).result()

    def send_log(self, level: str, data: Any, logger: str | None = None) -> bool:
        """See :meth:`ServerSession.send_log`."""
        return self._session.send_log(level, data, logger, related_request=self._request_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)
