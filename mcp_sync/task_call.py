"""The client's side of tasks: :class:`TaskCall`, the handle of a tool call running as a task.

``client.call_tool_as_task(name, arguments, ttl=...)`` returns a :class:`TaskCall` at once (the
server answered with the task it created). It is a :class:`concurrent.futures.Future` of the
``CallToolResult``:

* :meth:`TaskCall.status` asks ``tasks/get`` and returns a :class:`TaskState`;
* :meth:`TaskCall.result` waits for the end, polling ``tasks/get`` at the task's
  ``pollInterval`` (2026-07-28: ``pollIntervalMs``, and listening for the task's
  ``notifications/tasks`` on a ``subscriptions/listen`` stream while it waits, so that a
  change wakes it at once), and returns what ``call_tool`` would have
  returned (a tool error is a result with ``is_error``; a JSON-RPC error raises
  :class:`~mcp_sync.errors.McpError`; a cancelled task raises
  :class:`~mcp_sync.errors.Cancelled`). Input the task needs is answered by the client's own
  handlers (``elicitation_handler``, ``sampling_handler``, ``roots``): at 2025-11-25 through
  ``tasks/result``, whose stream carries the server's requests; at 2026-07-28 from the task's
  ``inputRequests``, answered with ``tasks/update``;
* :meth:`TaskCall.cancel` sends ``tasks/cancel`` -- never ``notifications/cancelled`` -- and
  returns the :class:`TaskState` it got back once the server acknowledged it.

The future settles when a call of this handle sees the task end (:meth:`~TaskCall.result`,
:meth:`~TaskCall.exception`, :meth:`~TaskCall.status`, :meth:`~TaskCall.cancel`): nothing
polls in the background, so no thread is held per task.

**Ctrl-C** (``KeyboardInterrupt``) in :meth:`TaskCall.result` stops waiting and leaves the task
running on the server: a task outlives its caller by design. (At 2025-11-25 the
``tasks/result`` request in flight, if any, is cancelled with ``notifications/cancelled``; that
ends the wait only.) Pick it up again later with ``client.task(task_id)``, or cancel it with
``client.cancel_task(task_id)``. ``call_tool()`` is different: Ctrl-C cancels that call.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import deadlines
from ._waiting import wait_sliced
from .call_options import CallOptions
from .cancel import CancelToken
from .errors import Cancelled, CapabilityError, McpError, WaitTimeout
from .jsonrpc import INVALID_PARAMS
from .lifecycle import TASKS_EXTENSION, Era
from .results import parser_for

__all__ = [
    "TaskState",
    "TaskCall",
    "TaskHost",
    "DEFAULT_POLL_INTERVAL",
    "start_task",
    "list_all_tasks",
]

DEFAULT_POLL_INTERVAL = 1.0
"""Seconds between two ``tasks/get`` when the server suggests no interval."""

MIN_POLL_INTERVAL = 0.01
"""The shortest pause between two polls, whatever the server suggests."""

_TERMINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True)
class TaskState:
    """A task as the server last described it.

    Attributes:
        task_id: its id.
        status: ``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled``.
        status_message: the server's note on it, if any.
        created_at: ISO 8601 creation time; ``last_updated_at``: of the last change.
        ttl_ms: its lifetime from creation in ms (``None``: unlimited).
        poll_interval_ms: the polling interval the server suggests, if any.
        raw: the task object as received.
    """

    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def terminal(self) -> bool:
        """True once ``completed``, ``failed`` or ``cancelled``."""
        return self.status in _TERMINAL

    @classmethod
    def from_wire(cls, task: Mapping[str, Any]) -> TaskState:
        """Read a ``Task`` of either era (``ttl``/``pollInterval`` or ``ttlMs``/``pollIntervalMs``)."""
        task_id, status = task.get("taskId"), task.get("status")
        if not isinstance(task_id, str) or not isinstance(status, str):
            raise McpError(INVALID_PARAMS, f"not a task: {dict(task)!r}")
        ttl = task.get("ttlMs", task.get("ttl"))
        poll = task.get("pollIntervalMs", task.get("pollInterval"))
        return cls(
            task_id=task_id,
            status=status,
            status_message=task.get("statusMessage"),
            created_at=task.get("createdAt"),
            last_updated_at=task.get("lastUpdatedAt"),
            ttl_ms=ttl if isinstance(ttl, int) else None,
            poll_interval_ms=poll if isinstance(poll, int) else None,
            raw=dict(task),
        )


class TaskHost(Protocol):
    """What a :class:`TaskCall` needs from its client (the :class:`~mcp_sync.client.Client`)."""

    @property
    def era(self) -> Era | None: ...

    @property
    def server_capabilities(self) -> dict[str, Any]: ...

    def task_request(
        self, method: str, params: dict[str, Any], options: CallOptions
    ) -> dict[str, Any]:
        """Send a task request (with the tasks extension declared at 2026-07-28); block for
        its raw result."""

    def answer_task_input(
        self, key: str, method: str, params: dict[str, Any], token: CancelToken
    ) -> Any:
        """Answer one of a task's ``inputRequests`` with the client's own handler."""

    def listen_to_task(
        self, task_id: str, on_change: Callable[[Mapping[str, Any]], None]
    ) -> Callable[[], None] | None:
        """(2026-07-28) Have ``on_change(detailed_task)`` called for each
        ``notifications/tasks`` of the task; returns the function that stops it, or ``None``
        when the server cannot (then the handle polls only)."""


def _call_tool_result(raw: Mapping[str, Any]) -> Any:
    body = {k: v for k, v in raw.items() if k != "resultType"}
    return parser_for("CallToolResult")(body)


class TaskCall(concurrent.futures.Future):  # type: ignore[type-arg]
    """A tool call running as a task on the server: a Future of its ``CallToolResult``.

    Made by ``client.call_tool_as_task(...)`` (or ``client.task(task_id)`` to pick up a task
    created earlier). See the module's description for how it waits and cancels.

    Attributes:
        task_id: the task's id (``None`` when the server answered the call at once instead
            of creating a task: the future is then already done).
    """

    def __init__(
        self,
        host: TaskHost,
        task_id: str | None,
        state: TaskState | None = None,
        *,
        options: CallOptions | None = None,
    ) -> None:
        super().__init__()
        self._host = host
        self.task_id = task_id
        self._task_state = state
        self._options: CallOptions = dict(options or {})  # type: ignore[assignment]
        self._answered: set[str] = set()  # input keys answered (2026-07-28)
        self._drive = threading.Lock()  # one thread at a time talks to the server for us
        self._cancel_reason: str | None = None
        self._pushed: TaskState | None = None  # the last notifications/tasks, not yet seen
        self._push = threading.Event()

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_answer(cls, host: TaskHost, raw: Mapping[str, Any], options: CallOptions) -> TaskCall:
        """The handle for a ``tools/call`` answer: a created task (2025 ``{"task": ...}``;
        2026 ``resultType: "task"``), or a result already (the server chose not to make a
        task), which settles the future at once."""
        task = raw.get("task") if isinstance(raw.get("task"), Mapping) else None
        if task is None and raw.get("resultType") == "task":
            task = raw
        if task is None:
            call = cls(host, None, options=options)
            call.set_result(_call_tool_result(raw))
            return call
        state = TaskState.from_wire(task)
        return cls(host, state.task_id, state, options=options)

    def __repr__(self) -> str:
        status = self._task_state.status if self._task_state is not None else "?"
        return f"<TaskCall {self.task_id} {status}>"

    # -- asking the server ---------------------------------------------------------------------
    @property
    def last_state(self) -> TaskState | None:
        """The state last received (no request is sent)."""
        return self._task_state

    def _request(self, method: str, **params: Any) -> dict[str, Any]:
        assert self.task_id is not None
        return self._host.task_request(method, {"taskId": self.task_id, **params}, self._options)

    def status(self) -> TaskState:
        """Ask the server (``tasks/get``) and return the task's state."""
        if self.task_id is None:
            raise RuntimeError("the server answered this call at once: there is no task")
        raw = self._request("tasks/get")
        self._task_state = TaskState.from_wire(raw)
        if self._task_state.terminal and self._host.era is Era.MODERN:
            self._settle_modern(self._task_state)
        return self._task_state

    def cancel(self, reason: str | None = None) -> TaskState:  # type: ignore[override]
        """Send ``tasks/cancel`` and return the task's state once the server acknowledged it.

        At 2025-11-25 the answer is the task itself, ``cancelled`` (a task that had already
        ended is asked for with ``tasks/get``); at 2026-07-28 the answer is an empty
        acknowledgement (cancelling is cooperative there), so the state is then asked for with
        ``tasks/get``. Unless that state is a different end (the task completed or failed
        first), this future is cancelled: :meth:`result` raises
        :class:`~mcp_sync.errors.Cancelled`. ``reason`` is kept as the future's cancel reason
        (the protocol's ``tasks/cancel`` carries none).
        """
        if self.task_id is None:
            return TaskState("", "completed")
        try:
            raw = self._request("tasks/cancel")
        except McpError as exc:
            if exc.code != INVALID_PARAMS or self._host.era is Era.MODERN:
                raise
            state = self.status()  # already ended (2025: -32602 for a terminal task)
        else:
            state = TaskState.from_wire(raw) if self._host.era is not Era.MODERN else self.status()
        self._task_state = state
        self._cancel_reason = reason
        if state.status not in ("completed", "failed"):  # else it ended first, and so it stays
            super().cancel()
        return state

    # -- waiting ---------------------------------------------------------------------------------
    def result(self, timeout: float | None = None) -> Any:
        """Wait for the task to end and return its ``CallToolResult`` (see the module's
        description). :class:`~mcp_sync.errors.WaitTimeout` (a :class:`TimeoutError`) if
        ``timeout`` seconds pass first: the task goes on. Ctrl-C stops the wait and leaves
        the task running."""
        self._wait(deadlines.check_timeout(timeout))
        try:
            return super().result(0)
        except concurrent.futures.CancelledError:
            raise Cancelled(self._cancel_reason or "the task was cancelled") from None

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Like :meth:`result`, but returns the exception instead of raising it."""
        try:
            self.result(timeout)
        except (McpError, Cancelled) as exc:
            return exc
        return None

    def _on_push(self, task: Mapping[str, Any]) -> None:
        """A ``notifications/tasks`` of this task (on the client's callback thread)."""
        try:
            state = TaskState.from_wire(task)
        except McpError:
            return
        self._pushed = state
        if state.terminal:
            self._settle_modern(state)
        self._push.set()

    def _wait(self, timeout: float | None) -> None:
        stop_listening = None
        if self._host.era is Era.MODERN and self.task_id is not None and not self.done():
            stop_listening = self._host.listen_to_task(self.task_id, self._on_push)
        try:
            self._poll(timeout)
        finally:
            if stop_listening is not None:
                stop_listening()

    def _poll(self, timeout: float | None) -> None:
        """Ask ``tasks/get`` at the task's poll interval (woken early by a notification)
        until the task ends or ``timeout`` passes."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self.done():
            remaining = None if end is None else end - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise WaitTimeout()
            with self._drive:
                if self.done():
                    return
                pushed, self._pushed = self._pushed, None
                self._push.clear()
                state = pushed if pushed is not None else self.status()
                if self.done():
                    return
                if self._host.era is Era.MODERN:
                    if state.status == "input_required":
                        self._answer_inputs(state)
                        continue
                elif state.terminal or state.status == "input_required":
                    self._fetch_result(remaining)
                    continue
            pause = (
                state.poll_interval_ms / 1000
                if state.poll_interval_ms is not None
                else DEFAULT_POLL_INTERVAL
            )
            pause = max(MIN_POLL_INTERVAL, pause)
            if remaining is not None:
                pause = min(pause, remaining)
            # a sliced sleep that Ctrl-C interrupts, cut short by a notification
            wait_sliced(lambda: self.done() or self._push.is_set(), self._push.wait, pause)

    # -- 2025-11-25 ------------------------------------------------------------------------------
    def _fetch_result(self, timeout: float | None) -> None:
        """``tasks/result``: blocks until the task ends (the server's requests for input come
        on its stream meanwhile); settles the future."""
        options: CallOptions = dict(self._options)  # type: ignore[assignment]
        options["timeout"] = timeout  # this wait's own limit (None: until the task ends)
        assert self.task_id is not None
        try:
            raw = self._host.task_request("tasks/result", {"taskId": self.task_id}, options)
        except TimeoutError:
            raise WaitTimeout() from None
        except McpError as exc:
            state = self.status()
            if state.status == "cancelled":
                super().cancel()
            else:
                self.set_exception(exc)
            return
        self.set_result(_call_tool_result(raw))

    # -- 2026-07-28 ------------------------------------------------------------------------------
    def _settle_modern(self, state: TaskState) -> None:
        if self.done():
            return
        if state.status == "completed":
            result = state.raw.get("result")
            self.set_result(_call_tool_result(result if isinstance(result, Mapping) else {}))
        elif state.status == "failed":
            error = state.raw.get("error")
            error = error if isinstance(error, Mapping) else {}
            self.set_exception(
                McpError(
                    int(error.get("code", -32603)),
                    str(error.get("message", state.status_message or "the task failed")),
                    error.get("data"),
                )
            )
        else:
            super().cancel()

    def _answer_inputs(self, state: TaskState) -> None:
        """Answer the task's new ``inputRequests`` with the client's handlers (``tasks/update``)."""
        requests = state.raw.get("inputRequests")
        if not isinstance(requests, Mapping):
            return
        answers: dict[str, Any] = {}
        token = CancelToken()
        for key, request in requests.items():
            if key in self._answered or not isinstance(request, Mapping):
                continue
            method = request.get("method")
            params = request.get("params")
            if not isinstance(method, str):
                continue
            answers[key] = self._host.answer_task_input(
                key, method, dict(params) if isinstance(params, Mapping) else {}, token
            )
        if answers:
            self._request("tasks/update", inputResponses=answers)
            self._answered.update(answers)
        else:  # asked and answered already: wait for the server to take it
            stop = threading.Event()
            pause = (state.poll_interval_ms or DEFAULT_POLL_INTERVAL * 1000) / 1000
            wait_sliced(self.done, stop.wait, max(MIN_POLL_INTERVAL, pause))


def start_task(
    host: TaskHost,
    name: str,
    arguments: Mapping[str, Any] | None,
    ttl: float | None,
    options: CallOptions,
) -> TaskCall:
    """``tools/call`` as a task (``ttl`` in seconds: 2025-11-25 ``params.task.ttl`` in ms; at
    2026-07-28 the server decides); the :class:`TaskCall` of the answer."""
    _require_tasks(host, "requests", "tools/call as a task")
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = dict(arguments)
    if host.era is not Era.MODERN:
        params["task"] = {} if ttl is None else {"ttl": round(ttl * 1000)}
    return TaskCall.from_answer(host, host.task_request("tools/call", params, options), options)


def list_all_tasks(host: TaskHost, options: CallOptions) -> list[TaskState]:
    """Every task ``tasks/list`` shows, page after page (2025-11-25 only)."""
    if host.era is Era.MODERN:
        raise CapabilityError("tasks/list does not exist at 2026-07-28 (keep the task ids)")
    _require_tasks(host, "list", "tasks/list")
    tasks: list[TaskState] = []
    cursor: str | None = None
    while True:
        page = host.task_request(
            "tasks/list", {} if cursor is None else {"cursor": cursor}, options
        )
        tasks.extend(TaskState.from_wire(task) for task in page.get("tasks", []))
        cursor = page.get("nextCursor")
        if not cursor:
            return tasks


def _require_tasks(host: TaskHost, member: str, what: str) -> None:
    """:class:`~mcp_sync.errors.CapabilityError` (nothing sent) unless the server declared
    tasks: at 2025-11-25 ``tasks.<member>`` (``tasks.requests.tools.call`` for a call), at
    2026-07-28 the extension in ``server/discover``."""
    capabilities = host.server_capabilities
    if host.era is Era.MODERN:
        extensions = capabilities.get("extensions")
        if not (isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions):
            raise CapabilityError(
                f"{what}: the server does not offer the {TASKS_EXTENSION} extension"
            )
        return
    tasks = capabilities.get("tasks")
    declared = tasks.get(member) if isinstance(tasks, Mapping) else None
    if member == "requests":
        tools = declared.get("tools") if isinstance(declared, Mapping) else None
        declared = tools.get("call") if isinstance(tools, Mapping) else None
    if declared is None:
        raise CapabilityError(f"{what}: the server did not declare the 'tasks' capability for it")
