"""A session seen from inside one handler: requests to the client tied to the handler's token."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping

from typing_extensions import Unpack

from ..call_options import CallOptions
from ..cancel import CancelToken
from ..jsonrpc import RequestId
from ..protocol import InboundRequest

if TYPE_CHECKING:  # pragma: no cover
    import mcp_types

    from .dispatch import ServerSession

__all__ = ["RequestScope"]


class RequestScope:
    """A :class:`ServerSession` seen from inside one handler: every request made through it
    is a child of the handler's token, so it is cancelled on the wire when the handler's own
    request is cancelled (or times out).

    The session makes one for every inbound request (``request``) before its handler runs;
    :attr:`Context.session <mcp_sync.context.Context.session>` is that scope, bound to the
    handler's token through :meth:`child`.
    """

    def __init__(
        self,
        session: ServerSession,
        token: CancelToken,
        request_id: RequestId | None = None,
        *,
        request: InboundRequest | None = None,
    ) -> None:
        self._session = session
        self._token = token
        self._request = request
        self._request_id = request.id if request is not None and request_id is None else request_id

    @property
    def session(self) -> ServerSession:
        """The underlying session."""
        return self._session

    @property
    def request(self) -> InboundRequest | None:
        """The inbound request this scope serves (``None`` for a scope made by
        :meth:`ServerSession.scoped` without one)."""
        return self._request

    @property
    def token(self) -> CancelToken:
        """The token that cancels the requests made through this scope."""
        return self._token

    def child(self, token: CancelToken) -> RequestScope:
        """The same request's scope, its requests tied to ``token`` (a handler's own token,
        for example a child with a server-side deadline)."""
        return RequestScope(self._session, token, self._request_id, request=self._request)

    @contextlib.contextmanager
    def _linked(self, options: CallOptions) -> Iterator[CallOptions]:
        """``options`` with the handler's token as ``cancel_token``, or a child of it that the
        caller's ``cancel_token`` also cancels (the link is removed afterwards, so a long-lived
        token does not collect callbacks)."""
        scoped = options.copy()
        cancel_token = options.get("cancel_token")
        if cancel_token is None:
            scoped["cancel_token"] = self._token
            yield scoped
            return
        linked = self._token.child()

        def forward(token: CancelToken) -> None:
            linked.cancel(token.reason)

        cancel_token.add_callback(forward)
        scoped["cancel_token"] = linked
        try:
            yield scoped
        finally:
            cancel_token.remove_callback(forward)

    def list_roots(self, **options: Unpack[CallOptions]) -> list[mcp_types.Root]:
        """See :meth:`ServerSession.list_roots`."""
        with self._linked(options) as scoped:
            return self._session.list_roots(related_request=self._request_id, **scoped)

    def create_message(
        self,
        messages: Iterable[dict[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        extra_params: Mapping[str, Any] | None = None,
        **options: Unpack[CallOptions],
    ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools:
        """See :meth:`ServerSession.create_message`."""
        with self._linked(options) as scoped:
            return self._session.create_message(
                messages,
                max_tokens=max_tokens,
                system_prompt=system_prompt,
                extra_params=extra_params,
                related_request=self._request_id,
                **scoped,
            )

    def elicit(
        self,
        message: str,
        requested_schema: dict[str, Any] | None = None,
        *,
        url: str | None = None,
        elicitation_id: str | None = None,
        **options: Unpack[CallOptions],
    ) -> mcp_types.ElicitResult:
        """See :meth:`ServerSession.elicit`."""
        with self._linked(options) as scoped:
            return self._session.elicit(
                message, requested_schema, url=url, elicitation_id=elicitation_id, related_request=self._request_id, **scoped
            )

    def ping(self, **options: Unpack[CallOptions]) -> None:
        """Ping the client."""
        with self._linked(options) as scoped:
            self._session.submit("ping", None, related_request=self._request_id, **scoped).result()

    def send_log(self, level: str, data: Any, logger: str | None = None) -> bool:
        """See :meth:`ServerSession.send_log`."""
        if self._request is not None:
            return self._session.send_log(level, data, logger, about=self._request)
        return self._session.send_log(level, data, logger, related_request=self._request_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)
