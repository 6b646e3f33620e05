"""A session seen from inside one handler: the request's own context (its era, version and
the client's declarations) and requests to the client tied to the handler's token."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from typing_extensions import Unpack

from ..call_options import CallOptions
from ..cancel import CancelToken
from ..jsonrpc import RequestId
from ..lifecycle import Admission, Era, RequestEnvelope, capability_declared
from ..principal import Principal
from ..protocol import InboundRequest
from ..session import LOG_LEVELS
from .client_requests import create_message_params, elicit_params

if TYPE_CHECKING:  # pragma: no cover
    import mcp_types

    from .dispatch import ServerSession
    from .input_rounds import InputRound

__all__ = ["RequestScope", "NO_REQUESTS_AT_MODERN"]

NO_REQUESTS_AT_MODERN = (
    "at protocol 2026-07-28 a server sends no requests to the client: input is asked for with"
    " an input_required result (multi round-trip), not by {method}"
)
"""The message of the error raised for a request to the client at 2026-07-28."""


class RequestScope:
    """A :class:`ServerSession` seen from inside one handler.

    Every request made through it is a child of the handler's token, so it is cancelled on
    the wire when the handler's own request is cancelled (or times out). What it says about
    the client is what *this request* says: at 2026-07-28 its envelope (version, the
    client's capabilities and info, the log level it asked for), never anything from earlier
    requests; on a 2025 session what the handshake negotiated.

    The session makes one for every inbound request (``request``) when it admits it, before
    its handler runs; :attr:`Context.session <mcp_sync.context.Context.session>` is that
    scope, bound to the handler's token through :meth:`child`. Attributes it does not define
    are the session's.
    """

    def __init__(
        self,
        session: ServerSession,
        token: CancelToken,
        request_id: RequestId | None = None,
        *,
        request: InboundRequest | None = None,
        admission: Admission | None = None,
        principal: Principal | None = None,
        kept_by_request: bool = False,
    ) -> None:
        self._session = session
        self._token = token
        # the scope a request keeps as its context (``kept_by_request``) refers back to it
        # weakly: the two would otherwise keep each other, and the session with them, alive
        # until the garbage collector runs (the HTTP app makes a session per 2026-07-28
        # request). Whoever reaches this scope holds the request: through its context, or
        # in the handler's Context.
        self._request_ref = (
            weakref.ref(request) if kept_by_request and request is not None else None
        )
        self._request = None if self._request_ref is not None else request
        self._request_id = request.id if request is not None and request_id is None else request_id
        self.admission = admission
        """How the session admitted the request (its era and envelope); ``None`` until then."""
        self.input_round: InputRound | None = None
        """(the request's own scope) The input round its handler runs in, set before it runs."""
        self.principal = principal
        """Who sent the request: the :class:`~mcp_sync.principal.Principal` its transport
        authenticated (over HTTP, the verified bearer token of *this* request), ``None``
        where nobody is authenticated (stdio, an unguarded app). The one place that says
        who is asking: :attr:`Context.principal <mcp_sync.context.Context.principal>` reads
        it, and so does whatever scopes data to a requestor (tasks: ``principal.key``)."""

    @property
    def session(self) -> ServerSession:
        """The underlying session."""
        return self._session

    @property
    def request(self) -> InboundRequest | None:
        """The inbound request this scope serves (``None`` for a scope made by
        :meth:`ServerSession.scoped` without one)."""
        ref = self._request_ref
        return self._request if ref is None else ref()

    @property
    def token(self) -> CancelToken:
        """The token that cancels the requests made through this scope."""
        return self._token

    def child(self, token: CancelToken) -> RequestScope:
        """The same request's scope, its requests tied to ``token`` (a handler's own token,
        for example a child with a server-side deadline)."""
        return RequestScope(
            self._session,
            token,
            self._request_id,
            request=self.request,
            admission=self.admission,
            principal=self.principal,
        )

    # -- what the request says about itself ---------------------------------------------------
    @property
    def envelope(self) -> RequestEnvelope | None:
        """The request's 2026-07-28 envelope; ``None`` in the handshake era."""
        return None if self.admission is None else self.admission.envelope

    @property
    def era(self) -> Era:
        """The era the request is served in."""
        if self.admission is not None:
            return self.admission.era
        return self._session.lifecycle.era or Era.HANDSHAKE

    @property
    def modern(self) -> bool:
        """True when the request is served at 2026-07-28 (statelessly)."""
        return self.envelope is not None

    @property
    def protocol_version(self) -> str | None:
        """The request's protocol version (2025: the one the handshake negotiated)."""
        envelope = self.envelope
        return envelope.version if envelope is not None else self._session.protocol_version

    @property
    def peer_capabilities(self) -> dict[str, Any]:
        """The client's capabilities as this request declares them (2025: the handshake's)."""
        envelope = self.envelope
        if envelope is not None:
            return dict(envelope.client_capabilities)
        return self._session.peer_capabilities

    client_capabilities = peer_capabilities

    @property
    def peer_info(self) -> dict[str, Any]:
        """The client's ``Implementation`` (``name``, ``version``) as this request names it
        (``{}`` if it does not; 2025: the handshake's ``clientInfo``)."""
        envelope = self.envelope
        if envelope is not None:
            return dict(envelope.client_info or {})
        return self._session.peer_info

    client_info = peer_info

    @property
    def log_level(self) -> str | None:
        """The least severe log level the client is sent for this request: at 2026-07-28 the
        one its ``_meta`` asks for (``None``: no log messages at all); on a 2025 session the
        one ``logging/setLevel`` set."""
        envelope = self.envelope
        return envelope.log_level if envelope is not None else self._session.log_level

    def peer_supports(self, capability: str, sub: str | None = None) -> bool:
        """True if this request's client declared ``capability`` (and ``sub`` inside it)."""
        if self.envelope is not None:
            return self.envelope.declares(capability, sub)
        return capability_declared(self._session.peer_capabilities, capability, sub)

    def require_capability(self, capability: str, what: str) -> None:
        """Refuse what needs a client capability this request's client did not declare: at
        2026-07-28 the -32021 error owed to the client (``data.requiredCapabilities``); on a
        2025 session :class:`~mcp_sync.errors.CapabilityError` (nothing is sent)."""
        if self.envelope is not None:
            self.envelope.require(capability, what=what)
        else:
            self._session.require_capability(capability, what)

    # -- requests to the client ---------------------------------------------------------------
    def _refuse_at_modern(self, capability: str, method: str, sub: str | None = None) -> None:
        """At 2026-07-28 no request reaches the client: -32021 unless the request declares
        ``capability`` (and ``sub``), else a :class:`RuntimeError`. Nothing is written."""
        envelope = self.envelope
        if envelope is None:
            return
        envelope.require(capability, sub, what=method)
        raise RuntimeError(NO_REQUESTS_AT_MODERN.format(method=method))

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

    def _collecting(self) -> InputRound | None:
        """The 2026-07-28 input round that answers this request's requests to the client."""
        request = self.request
        root = request.context if request is not None else None
        current: InputRound | None = getattr(root, "input_round", None)
        return current if current is not None and current.collects else None

    def list_roots(self, **options: Unpack[CallOptions]) -> list[mcp_types.Root]:
        """See :meth:`ServerSession.list_roots`.

        At 2026-07-28 no request is sent: the answer comes from the request's input round
        (:doc:`/input-rounds`). Without it yet, the handler is stopped, the client is asked
        through ``input_required``, and its retry runs the handler again from the top -- so
        the code before this call may run more than once. ``options`` do not apply there."""
        current = self._collecting()
        if current is not None:
            return list(current.ask("roots/list", {}).roots)
        self._refuse_at_modern("roots", "roots/list")
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
        """See :meth:`ServerSession.create_message` (at 2026-07-28: :meth:`list_roots`)."""
        current = self._collecting()
        if current is not None:
            params = create_message_params(
                messages,
                max_tokens=max_tokens,
                system_prompt=system_prompt,
                extra_params=extra_params,
            )
            return current.ask("sampling/createMessage", params)  # type: ignore[no-any-return]
        self._refuse_at_modern("sampling", "sampling/createMessage")
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
        """See :meth:`ServerSession.elicit` (at 2026-07-28: :meth:`list_roots`)."""
        current = self._collecting()
        if current is not None:
            params = elicit_params(
                message, requested_schema, url=url, elicitation_id=elicitation_id, mint_id=False
            )
            return current.ask("elicitation/create", params)  # type: ignore[no-any-return]
        self._refuse_at_modern(
            "elicitation", "elicitation/create", "url" if url is not None else None
        )
        with self._linked(options) as scoped:
            return self._session.elicit(
                message,
                requested_schema,
                url=url,
                elicitation_id=elicitation_id,
                related_request=self._request_id,
                **scoped,
            )

    def ping(self, **options: Unpack[CallOptions]) -> None:
        """Ping the client (a 2025 session only: 2026-07-28 has no ``ping``)."""
        if self.envelope is not None:
            raise RuntimeError("ping does not exist at protocol 2026-07-28")
        with self._linked(options) as scoped:
            self._session.submit("ping", None, related_request=self._request_id, **scoped).result()

    def send_log(self, level: str, data: Any, logger: str | None = None) -> bool:
        """Send ``notifications/message`` about this request if :attr:`log_level` lets it
        through and the request is still running; see :meth:`ServerSession.send_log`."""
        if self.envelope is not None:
            wanted = self.envelope.log_level
            if wanted is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(wanted):
                return False
            return self._session.send_log(level, data, logger, about=self.request, min_level=wanted)
        request = self.request
        if request is not None:
            return self._session.send_log(level, data, logger, about=request)
        return self._session.send_log(level, data, logger, related_request=self._request_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)
