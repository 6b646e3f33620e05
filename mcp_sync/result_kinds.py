"""What a 2026-07-28 result is, by its ``resultType``: complete, a request for input, or a task.

Every result of protocol 2026-07-28 names its kind in ``resultType``. A client must take a
result without one as complete (servers of earlier revisions send none), and must refuse a
kind it does not know. :func:`classify_result` applies these rules to the raw result of one
request (sans-IO: no threads, no I/O); the multi round-trip driver
(:mod:`mcp_sync.input_driver`) acts on :class:`InputRequired`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import PeerMisbehaved

__all__ = [
    "COMPLETE",
    "INPUT_REQUIRED",
    "TASK",
    "TASKS_EXTENSION",
    "INPUT_METHODS",
    "INPUT_REQUEST_METHODS",
    "Complete",
    "InputRequest",
    "InputRequired",
    "ResultKind",
    "classify_result",
    "retry_params",
]

COMPLETE = "complete"
"""``resultType`` of a final result."""

INPUT_REQUIRED = "input_required"
"""``resultType`` of a result that asks the client for input before a retry."""

TASK = "task"
"""``resultType`` of a task handle (only with the tasks extension)."""

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension, declared in ``clientCapabilities.extensions``, that allows ``resultType: "task"``."""

INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The requests a server may answer with ``input_required``."""

INPUT_REQUEST_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
"""What a server may ask for in ``inputRequests``."""


@dataclass(frozen=True)
class Complete:
    """A final result (``resultType`` ``"complete"``, absent, or ``"task"`` when allowed).

    Attributes:
        result: the raw result, as the server sent it.
    """

    result: Any


@dataclass(frozen=True)
class InputRequest:
    """One entry of ``inputRequests``: a request the client answers locally.

    Attributes:
        key: its key in ``inputRequests`` (the answer goes under the same key).
        method: ``elicitation/create``, ``sampling/createMessage`` or ``roots/list``.
        params: its ``params`` (``{}`` when absent).
    """

    key: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InputRequired:
    """A result that asks for input (``resultType`` ``"input_required"``).

    Attributes:
        requests: what to answer before the retry, in the server's order (may be empty).
        state: the ``requestState`` to echo byte-exact on the retry, or ``None`` if none came.
    """

    requests: tuple[InputRequest, ...]
    state: str | None

    @property
    def state_only(self) -> bool:
        """True when there is nothing to answer, only a state to send back."""
        return not self.requests


ResultKind = Complete | InputRequired


def _misbehaved(method: str, problem: str) -> PeerMisbehaved:
    return PeerMisbehaved(f"{method}: the server answered {problem}", problem)


def classify_result(method: str, result: Any, *, tasks_declared: bool = False) -> ResultKind:
    """The kind of the raw ``result`` of a ``method`` request at 2026-07-28.

    Raises :class:`~mcp_sync.errors.PeerMisbehaved` for an unknown ``resultType``,
    ``input_required`` on a method that may not ask for input or with a malformed body,
    and ``task`` unless ``tasks_declared`` (the request declared :data:`TASKS_EXTENSION`).
    """
    kind = result.get("resultType") if isinstance(result, Mapping) else None
    if kind is None or kind == COMPLETE:
        return Complete(result)
    if kind == TASK:
        if tasks_declared:
            return Complete(result)
        raise _misbehaved(
            method, 'resultType "task", but this client did not declare the tasks extension'
        )
    if kind != INPUT_REQUIRED:
        raise _misbehaved(method, f"an unknown resultType {kind!r}")
    if method not in INPUT_METHODS:
        raise _misbehaved(
            method,
            'resultType "input_required", which only tools/call, prompts/get and resources/read may',
        )
    assert isinstance(result, Mapping)
    return InputRequired(
        _input_requests(method, result.get("inputRequests")), _state(method, result)
    )


def _input_requests(method: str, value: Any) -> tuple[InputRequest, ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise _misbehaved(method, "inputRequests that is not an object")
    requests = []
    for key, request in value.items():
        if not isinstance(request, Mapping) or not isinstance(request.get("method"), str):
            raise _misbehaved(method, f"inputRequests[{key!r}] without a method")
        asked = request["method"]
        if asked not in INPUT_REQUEST_METHODS:
            raise _misbehaved(
                method,
                f"inputRequests[{key!r}] asking for {asked!r}, which is not an input request",
            )
        params = request.get("params")
        if params is not None and not isinstance(params, Mapping):
            raise _misbehaved(method, f"inputRequests[{key!r}] with params that are not an object")
        requests.append(InputRequest(str(key), asked, dict(params or {})))
    return tuple(requests)


def _state(method: str, result: Mapping[str, Any]) -> str | None:
    state = result.get("requestState")
    if state is not None and not isinstance(state, str):
        raise _misbehaved(method, "a requestState that is not a string")
    if state is None and result.get("inputRequests") is None:
        raise _misbehaved(method, "input_required with neither inputRequests nor requestState")
    return state


def retry_params(
    params: Mapping[str, Any] | None, responses: Mapping[str, Any], state: str | None
) -> dict[str, Any]:
    """The params of the retry after an ``input_required`` round: the original ``params``
    (without an earlier round's ``inputResponses``/``requestState``) plus ``inputResponses``
    keyed like the requests (when there are any) and ``requestState`` exactly as received
    (omitted when none came)."""
    out = {k: v for k, v in (params or {}).items() if k not in ("inputResponses", "requestState")}
    if responses:
        out["inputResponses"] = dict(responses)
    if state is not None:
        out["requestState"] = state
    return out
