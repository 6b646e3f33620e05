"""Every exception mcp_sync raises, in one place.

The tree (stdlib bases in brackets; code that catches those keeps working)::

    Exception
     +-- McpError                     the peer answered with a JSON-RPC error
     |    +-- ArgumentError           arguments that do not match a handler's schema (-32602)
     |    +-- RequestStateError       a requestState the server cannot accept (-32602)
     |         +-- StateMalformed     not a state this library sealed
     |         |    +-- StateTooLarge longer than the sealer's bound
     |         +-- StateTampered      the signature does not match
     |         +-- StateKeyUnknown    a key id the key ring does not hold
     |         +-- StateExpired       past its expiry
     |         +-- StateMismatch      issued for another method, params or principal
     |         +-- StateReplayed      opened once already
     +-- PeerMisbehaved               the peer broke the protocol for one call
     +-- ResponseTooLarge             an HTTP answer over the client's limit
     +-- InvalidToken                 an access token a token verifier does not accept
     +-- VerifierUnavailable          a token verifier cannot decide now
     +-- [ValueError]
     |    +-- PayloadTooLarge         a requestState to seal is over the sealer's bound
     +-- [LookupError]
     |    +-- TaskNotFound            no such task for that owner (unknown, expired, another's)
     +-- [RuntimeError]
     |    +-- CapabilityError         a feature the peer did not declare
     |    |    +-- FeatureRemoved     a feature the protocol version in use does not have
     |    +-- TaskAlreadyTerminal     the task has ended already, so it cannot change
     |    +-- TaskStoreFull           a task store holds as many running tasks as it may
     +-- [ConnectionError]
     |    +-- ConnectionClosed        the connection ended under a call, or was closed
     |         +-- ServerExited       a spawned server process ended on its own
     |         +-- RequestNotSent     an HTTP request never reached the server
     |         +-- HttpError          the server refused a message with an HTTP status
     |              +-- SessionEnded  404 for our HTTP session
     |    +-- BusUnavailable          a message bus cannot reach its broker
     +-- [TimeoutError]
     |    +-- RequestTimeout          a call's ``timeout=`` expired
     |    +-- WaitTimeout             a wait's own timeout passed (the call goes on)
     +-- [concurrent.futures.CancelledError]
     |    +-- Cancelled               the work was cancelled
     +-- AuthorizationError           OAuth for an HTTP connection failed (mcp_sync.auth)
          +-- DiscoveryError          resource or authorization server metadata missing or wrong
          +-- RegistrationError       no client registration could be had
          +-- AuthorizationDenied     the user or the authorization server declined (``error``)
          +-- AuthorizationRejected   the redirect failed a check (``state``, ``iss``)
          +-- TokenEndpointError      the token endpoint answered an OAuth ``error``
          +-- InsufficientScope       403 insufficient_scope that a wider grant did not cure
          +-- AuthorizationTimeout    [TimeoutError] no redirect in time, or waited too long
          +-- AuthorizationCancelled  OAuth.cancel() stopped the wait for the user
     +-- PlainHttpError               internal: a request of the plain HTTP/1.1 client failed
     |    +-- RequestNotWritten       the server did not get the whole request
     |    +-- ConnectionLost          the connection broke after the request was written
     +-- HttpProtocolError            internal: the server's bytes are not valid HTTP/1.1
          +-- NoResponse              the connection ended before a response began
    [BaseException]
     +-- InputNeeded                  a handler stops until the client's input arrives (a signal)

The two internal families stay inside :mod:`mcp_sync.http`: the client transport turns them
into :class:`ConnectionClosed` or :class:`RequestNotSent` before a caller sees them.

(:class:`WaitTimeout` is also a :class:`concurrent.futures.TimeoutError`; on Python >= 3.11 it
is that class.)

Two families, kept apart on purpose:

* errors the **peer** reported or caused (:class:`McpError` carries a JSON-RPC error object the
  peer sent; :class:`ConnectionClosed` means the transport ended under a pending call);
* errors of **local** origin (:class:`RequestTimeout`, :class:`Cancelled`, and
  ordinary ``ValueError``/``RuntimeError`` for API misuse).

A local failure is never an :class:`McpError` (:class:`ArgumentError` is the error a local
handler answers the peer with), so it cannot be mistaken for an answer from the peer.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

from .jsonrpc import INVALID_PARAMS

__all__ = [
    "McpError",
    "ArgumentError",
    "ConnectionClosed",
    "ServerExited",
    "RequestNotSent",
    "HttpError",
    "SessionEnded",
    "ResponseTooLarge",
    "RequestTimeout",
    "WaitTimeout",
    "Cancelled",
    "CapabilityError",
    "FeatureRemoved",
    "PeerMisbehaved",
    "RequestStateError",
    "StateMalformed",
    "StateTooLarge",
    "StateTampered",
    "StateKeyUnknown",
    "StateExpired",
    "StateMismatch",
    "StateReplayed",
    "PayloadTooLarge",
    "BusUnavailable",
    "TaskNotFound",
    "TaskAlreadyTerminal",
    "TaskStoreFull",
    "InvalidToken",
    "VerifierUnavailable",
    "InputNeeded",
    "describe_base_exception",
    # authorization (mcp_sync.auth)
    "AuthorizationError",
    "DiscoveryError",
    "RegistrationError",
    "AuthorizationDenied",
    "AuthorizationRejected",
    "TokenEndpointError",
    "InsufficientScope",
    "AuthorizationTimeout",
    "AuthorizationCancelled",
]


class McpError(Exception):
    """The peer answered a request with a JSON-RPC error.

    Attributes:
        code: the JSON-RPC error code (for example ``-32601``).
        message: the error message the peer sent.
        data: the optional ``data`` member, or ``None``.
        http_status: over Streamable HTTP, the HTTP status of an error answer that carried
            this JSON-RPC error (for example 400); ``None`` otherwise.
    """

    http_status: int | None = None

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data

    def to_error_object(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member for this error."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ArgumentError(McpError):
    """Arguments that do not match a handler's schema (a -32602 error).

    ``problems`` has one line per problem, naming the argument and what was expected. A
    tool reports it as a tool error (``isError: true``) instead, so that the model can
    correct its call; prompts and resource templates answer with the JSON-RPC error.
    """

    def __init__(self, problems: list[str]) -> None:
        super().__init__(INVALID_PARAMS, "Invalid arguments: " + "; ".join(problems))
        self.problems = problems


class ConnectionClosed(ConnectionError):
    """The connection ended while a call was pending, or a call was made on a closed one."""


class ServerExited(ConnectionClosed):
    """A spawned server process ended its output on its own (it exited or crashed).

    The message gives its exit status (or signal) and the end of its stderr.

    Attributes:
        returncode: the exit status, negative for a signal, ``None`` if it had not exited.
        stderr_tail: the last few KiB it wrote to stderr (may be empty).
        what: the message without the stderr, e.g. "the server process 42 exited with
            status 3" (for callers that show the stderr their own way).
    """

    def __init__(
        self,
        message: str = "the server process exited",
        *,
        returncode: int | None = None,
        stderr_tail: str = "",
        what: str | None = None,
    ) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        self.what = message if what is None else what


class HttpError(ConnectionClosed):
    """The server refused a message with an HTTP error status (401, 403, 4xx, 5xx)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:  # copy.copy() and pickle keep the status
        return (type(self), (self.status, str(self)))


class SessionEnded(HttpError):
    """The server answered 404 for our session: it ended (or never existed)."""


class RequestNotSent(ConnectionClosed):
    """This request never reached the server (connection refused, or reset before its body
    was sent): the server did not run it, so it is safe to send again. Unlike other
    :class:`ConnectionClosed` errors, only this call failed: the
    connection stays up (code that catches ``ConnectionClosed`` for an unreachable server
    still catches it)."""


class ResponseTooLarge(Exception):
    """The answer to this call (a JSON body, or an SSE event on its stream) is larger than
    the client's limit; it was not read. The connection stays up.

    Attributes:
        limit: the limit in bytes (``max_response_bytes`` or ``max_event_bytes``).
    """

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.limit))


class RequestTimeout(TimeoutError):
    """A call's ``timeout=`` expired; ``notifications/cancelled`` was sent to the peer."""


if issubclass(concurrent.futures.TimeoutError, TimeoutError):  # Python >= 3.11: one class
    WaitTimeout = concurrent.futures.TimeoutError
else:  # pragma: no cover - Python 3.10

    class WaitTimeout(concurrent.futures.TimeoutError, TimeoutError):  # type: ignore[no-redef]
        """A wait's own timeout passed (the call goes on): both kinds of TimeoutError."""


class Cancelled(concurrent.futures.CancelledError):
    """The work was cancelled. ``reason`` is what the canceller said, if anything."""

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(reason or "cancelled")
        self.reason = reason


class CapabilityError(RuntimeError):
    """A feature was used that the peer did not declare during initialization."""


class FeatureRemoved(CapabilityError):
    """A feature the protocol version in use does not have: for example ``ping``,
    ``logging/setLevel`` or ``resources/subscribe`` on a connection that speaks 2026-07-28,
    which removed them. Nothing was sent.

    Attributes:
        feature: the method (or notification) asked for, e.g. ``"ping"``.
        protocol_version: the version the connection speaks, e.g. ``"2026-07-28"``.
    """

    def __init__(self, feature: str, protocol_version: str, hint: str = "") -> None:
        message = (
            f"{feature} does not exist in protocol {protocol_version}, which this connection"
            " speaks (it was removed in 2026-07-28)"
        )
        super().__init__(message + (f"; {hint}" if hint else ""))
        self.feature = feature
        self.protocol_version = protocol_version
        self.hint = hint

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.feature, self.protocol_version, self.hint))


class PeerMisbehaved(Exception):
    """The peer broke the protocol in a way that ends one call: for example it answered the
    call with a response that carries both ``result`` and ``error``, or one nested deeper than
    :data:`~mcp_sync.jsonrpc.MAX_NESTING_DEPTH`. The connection stays up.

    Attributes:
        detail: what was wrong with the peer's message.
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class RequestStateError(McpError):
    """A ``requestState`` the server cannot accept: a ``-32602`` error, the handler must not run.

    ``reason`` is a short machine-readable word, sent as ``data.reason``; the message never
    includes the state or anything from a key.
    """

    reason = "invalid"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(
            INVALID_PARAMS,
            f"Invalid requestState: {detail or self.reason}",
            {"reason": self.reason},
        )


class StateMalformed(RequestStateError):
    """Not a state this library sealed: wrong type, shape, version or encoding."""

    reason = "malformed"


class StateTooLarge(StateMalformed):
    """Longer than the sealer's bound; rejected before any parsing."""

    reason = "too_large"


class StateTampered(RequestStateError):
    """The signature does not match: the state was altered or signed with another secret."""

    reason = "bad_signature"


class StateKeyUnknown(RequestStateError):
    """Signed with a key id this key ring does not hold (a foreign or retired key)."""

    reason = "unknown_key"


class StateExpired(RequestStateError):
    """Authentic, but past its expiry."""

    reason = "expired"


class StateMismatch(RequestStateError):
    """Authentic, but issued for another method, other params or another principal.

    ``reason`` is ``method_mismatch``, ``params_mismatch`` or ``principal_mismatch``.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason.replace("_", " "))


class StateReplayed(RequestStateError):
    """Authentic and valid, but already opened once (refused by the sealer's replay guard)."""

    reason = "replayed"


class PayloadTooLarge(ValueError):
    """:meth:`StateSealer.seal <mcp_sync.request_state.StateSealer.seal>` would produce a state longer than the sealer's bound.

    A server-side problem (the payload is too big), not the client's: it is a plain
    :class:`ValueError`, never sent to the client as ``-32602``.
    """


class BusUnavailable(ConnectionError):
    """A message bus could not reach its broker: a publish was not sent, or a subscription
    could not be made active in time (see :mod:`mcp_sync.server.bus`)."""


class TaskNotFound(LookupError):
    """No task with that id is visible to that owner (unknown, expired or another owner's);
    see :class:`~mcp_sync.tasks.TaskStore`."""


class TaskAlreadyTerminal(RuntimeError):
    """The task has already reached a terminal state, so it cannot be changed (or cancelled).

    ``record`` is the task as it is (a :class:`~mcp_sync.tasks.TaskRecord`).
    """

    def __init__(self, record: Any) -> None:
        super().__init__(f"task {record.task_id} is already {record.status}")
        self.record = record


class TaskStoreFull(RuntimeError):
    """A task store holds as many tasks as it may, none of them expired or terminal."""


def describe_base_exception(exc: BaseException) -> str:
    """The error message sent for a handler that raised ``SystemExit``, ``KeyboardInterrupt``
    or another exception that is not an :class:`Exception`."""
    text = str(exc)
    return f"the handler raised {type(exc).__name__}" + (f": {text}" if text else "")


class InvalidToken(Exception):
    """A token verifier does not accept the token (unknown, expired, not for this resource,
    badly signed, ...): the HTTP app answers ``401`` ``invalid_token``. The message is sent to
    the client as the ``error_description``: never put the token, or anything taken from an
    unverified token, in it."""

    def __init__(self, description: str = "the access token is not valid") -> None:
        super().__init__(description)
        self.description = description


class VerifierUnavailable(Exception):
    """A token verifier cannot decide now (its authorization server does not answer): the
    request gets ``503`` with ``Retry-After``, not ``401`` (the token may be fine)."""


class InputNeeded(BaseException):
    """Stops a handler whose ``ctx.session.elicit(...)`` (``create_message``, ``list_roots``)
    has no answer yet, so that the library can answer ``input_required`` for it (revision
    2026-07-28; see :doc:`/input-rounds`).

    It derives from :class:`BaseException`, like :class:`KeyboardInterrupt`, so that the
    ``except Exception`` of handler code lets it pass. Do not catch it (or re-raise it): a
    handler that swallows it still gets ``input_required`` answered, and whatever it returns
    instead is dropped. It never reaches the client.
    """


class AuthorizationError(Exception):
    """OAuth authorization of an HTTP connection failed (:mod:`mcp_sync.auth`); the subclass
    says which step. Messages name the step, the URL and the OAuth ``error`` code, never a
    token, a code or a secret.

    Attributes:
        error: the OAuth ``error`` code when the peer sent one (``"access_denied"``,
            ``"invalid_grant"`` ...), else ``None``.
        description: the peer's ``error_description``, if any.
    """

    def __init__(
        self, message: str, *, error: str | None = None, description: str | None = None
    ) -> None:
        super().__init__(message)
        self.error = error
        self.description = description


class DiscoveryError(AuthorizationError):
    """The protected resource metadata (RFC 9728) or the authorization server metadata
    (RFC 8414 / OpenID Connect discovery) could not be found, or failed a check (resource
    mismatch, issuer mismatch, no PKCE ``S256``, not HTTPS)."""


class RegistrationError(AuthorizationError):
    """No client registration: no pre-registered credentials for this authorization server,
    no client ID metadata document it accepts, and dynamic registration (RFC 7591) absent or
    refused (``error`` then holds its code)."""


class AuthorizationDenied(AuthorizationError):
    """The authorization endpoint redirected back with an ``error`` (``access_denied`` when
    the user declined)."""


class AuthorizationRejected(AuthorizationError):
    """The redirect back failed a check and was discarded: a ``state`` that does not match,
    or an ``iss`` that is not the recorded issuer (RFC 9207), or one missing where the
    authorization server promised it. Its ``error`` fields, if any, are not shown."""


class TokenEndpointError(AuthorizationError):
    """The token endpoint refused a grant (authorization code, refresh token or client
    credentials); ``error`` is its OAuth code, for example ``"invalid_client"``."""


class InsufficientScope(AuthorizationError):
    """The server answered 403 ``insufficient_scope`` and a new grant with the union of the
    scopes did not help (or may not be asked for again).

    Attributes:
        required: the scopes the server's challenge named (a tuple, maybe empty).
    """

    def __init__(self, message: str, required: tuple[str, ...] = ()) -> None:
        super().__init__(message, error="insufficient_scope")
        self.required = required


class AuthorizationTimeout(AuthorizationError, TimeoutError):
    """No redirect reached the loopback listener within the authorization timeout, or a
    thread waited longer than its bound for another thread's authorization."""


class AuthorizationCancelled(AuthorizationError):
    """The authorization was cancelled (``OAuth.cancel()``) while waiting for the user. Not
    a :class:`Cancelled`: the call did not ask for it, and the connection may go on."""


class PlainHttpError(Exception):
    """A request of :class:`~mcp_sync.http.plain_http.PlainHttpClient` failed (internal)."""


class RequestNotWritten(PlainHttpError):
    """The server did not get the whole request (so it cannot have acted on it)."""


class ConnectionLost(PlainHttpError):
    """The connection broke after the request was written: the server may have got it."""


class HttpProtocolError(Exception):
    """The server's bytes are not a valid HTTP/1.1 response (internal)."""


class NoResponse(HttpProtocolError):
    """The connection ended before the first byte of a response."""
