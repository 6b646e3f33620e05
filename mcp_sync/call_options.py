"""The options every request takes, written once.

Every method that sends a request -- :meth:`Endpoint.submit <mcp_sync.endpoint.Endpoint.submit>`,
:meth:`Client.submit <mcp_sync.client.Client.submit>`, :meth:`Client.call_tool
<mcp_sync.client.Client.call_tool>` and the other typed client methods, ``Session.ping`` and the
server's requests to the client -- accepts the keyword arguments of :class:`CallOptions`::

    client.call_tool("slow", {}, timeout=2)                      # at most 2 s
    client.call_tool("slow", {}, timeout=None)                   # no timeout: wait for ever
    client.call_tool("slow", {})                                 # the client's default_timeout

``timeout`` left out (or :data:`USE_CLIENT_DEFAULT`) means "the default timeout of whatever
sends the request": ``Client(default_timeout=...)``, which is ``None`` (no timeout) unless set;
a server session has no default, so its requests wait for ever unless given a ``timeout``.
``timeout=None`` waits for ever; cancelling the call, a ``cancel_token`` or Ctrl-C still end
the wait.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from typing_extensions import TypedDict

from .cancel import CancelToken
from .deadlines import check_timeout

__all__ = [
    "CallOptions",
    "UseClientDefault",
    "USE_CLIENT_DEFAULT",
    "TimeoutOption",
    "ProgressCallback",
    "resolve_timeout",
]

ProgressCallback = Callable[[float, "float | None", "str | None"], Any]
"""``on_progress(progress, total, message)``."""


class UseClientDefault:
    """The type of :data:`USE_CLIENT_DEFAULT` (it has one instance)."""

    _instance: UseClientDefault | None = None

    def __new__(cls) -> UseClientDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "USE_CLIENT_DEFAULT"

    def __reduce__(self) -> str:  # copy and pickle keep the one instance
        return "USE_CLIENT_DEFAULT"


USE_CLIENT_DEFAULT: Final = UseClientDefault()
"""``timeout=USE_CLIENT_DEFAULT`` (the default): use the configured default timeout of the
client or connection sending the request (``Client(default_timeout=...)``)."""

TimeoutOption = float | UseClientDefault | None
"""What ``timeout=`` accepts: seconds, ``None`` (no timeout) or :data:`USE_CLIENT_DEFAULT`."""


class CallOptions(TypedDict, total=False):
    """The keyword arguments of every request (all optional).

    Attributes:
        timeout: seconds until the call is cancelled on the wire and fails with
            :class:`~mcp_sync.errors.RequestTimeout`; ``None`` waits for ever;
            :data:`USE_CLIENT_DEFAULT` (the default) uses the configured default timeout. A
            negative value raises :class:`ValueError`.
        cancel_token: cancelling it cancels the call (:class:`~mcp_sync.errors.Cancelled`).
        on_progress: ``on_progress(progress, total, message)`` for each
            ``notifications/progress`` the peer sends for this call (adds a
            ``progressToken``); runs on the callback thread, in order.
        reset_timeout_on_progress: each progress notification restarts ``timeout``.
        max_total_timeout: a limit in seconds that holds whatever progress arrives.
    """

    timeout: TimeoutOption
    cancel_token: CancelToken | None
    on_progress: ProgressCallback | None
    reset_timeout_on_progress: bool
    max_total_timeout: float | None


def resolve_timeout(timeout: TimeoutOption, default: float | None) -> float | None:
    """The timeout a call runs with: ``default`` for :data:`USE_CLIENT_DEFAULT`, else
    ``timeout`` (checked: a negative number or NaN raises :class:`ValueError`)."""
    if isinstance(timeout, UseClientDefault):
        return default
    return check_timeout(timeout)
