"""Running tool calls as tasks: the server's :class:`TaskService`.

A ``tools/call`` that becomes a task (2025-11-25: the request carries ``params.task``;
2026-07-28: the request declares the tasks extension and the tool is ``task="optional"`` or
``"required"``) is created in the server's :class:`~mcp_sync.tasks.TaskStore` first (so a
``tasks/get`` from any process finds it), answered at once, and its handler runs on the
service's **bounded** pool (``Server(max_tasks=...)``, :data:`DEFAULT_MAX_TASKS`): a call
beyond the bound is refused with -32603 (``data.limit``) and nothing is created.

The store decides every race: the handler's completion is a :meth:`~TaskStore.finish`
compare-and-set, a ``tasks/cancel`` a :meth:`~TaskStore.cancel`; whichever comes first wins and
the task never leaves the terminal state it reached. The service watches the record of each
task it runs, so a cancel written by any process fires the handler's token (``ctx.cancelled``,
``ctx.wait()``), an input answer reaches the waiting handler, and every change is told to the
requestor (2025: ``notifications/tasks/status`` on the creating session; 2026: ``notifications/tasks``
on the ``subscriptions/listen`` streams that asked for the task).

Owners: at 2025-11-25 a task belongs to the session that created it; at 2026-07-28 to the
authenticated principal of the request, or -- on a server that authenticates nobody -- to the
one anonymous owner :data:`ANONYMOUS_OWNER`: there the task id itself (128 random bits or more,
from the store) is the capability that grants access.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .. import deadlines
from .._waiting import wait_for_condition
from ..cancel import CancelToken
from ..context import Context
from ..errors import McpError
from ..jsonrpc import INTERNAL_ERROR, Request
from ..lifecycle import Era, RequestEnvelope
from ..principal import Principal
from ..protocol import InboundRequest, InboundState
from ..tasks import TaskStoreFull
from ..tasks.store import TaskNotFound, TaskRecord, TaskStore
from ..workers import WorkerPool
from . import tasks_wire
from .records import RegisteredTool
from .scope import RequestScope

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession
    from .server import Server

__all__ = [
    "TaskMode",
    "TASK_MODES",
    "DEFAULT_MAX_TASKS",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_POLL_INTERVAL_MS",
    "DEFAULT_TTL_MS",
    "ANONYMOUS_OWNER",
    "RunningTask",
    "TaskService",
    "owner_of",
    "principal_of",
]

_log = logging.getLogger("mcp_sync.server")

TaskMode = Literal["forbidden", "optional", "required"]
"""How a tool may run as a task (``@server.tool(task=...)``)."""

TASK_MODES: frozenset[str] = frozenset({"forbidden", "optional", "required"})

DEFAULT_MAX_TASKS = 16
"""Default bound of task handlers running at once in one server process."""

DEFAULT_LEASE_SECONDS = 30.0
"""How long a worker's hold on a running task lasts unless renewed (renewed every third of it)."""

DEFAULT_POLL_INTERVAL_MS = 1000
"""The polling interval suggested to requestors."""

DEFAULT_TTL_MS = 3_600_000
"""The lifetime of a task whose requestor names none (one hour)."""

ANONYMOUS_OWNER = "anonymous"
"""(2026-07-28) The owner of every task created without an authenticated principal."""

_session_keys: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_session_keys_lock = threading.Lock()


def _session_key(session: ServerSession) -> str:
    with _session_keys_lock:
        key = _session_keys.get(session)
        if key is None:
            key = _session_keys[session] = secrets.token_hex(16)
        return key


def principal_of(scope: RequestScope) -> Principal | None:
    """The authenticated principal of the request of ``scope``, or ``None`` (the one place
    the task code reads it: :attr:`RequestScope.principal`)."""
    return scope.principal


def owner_of(scope: RequestScope) -> str:
    """The owner key of the tasks a request may see: its session at 2025-11-25; at
    2026-07-28 its principal, or :data:`ANONYMOUS_OWNER` without one."""
    if not scope.modern:
        return f"session:{_session_key(scope.session)}"
    principal = principal_of(scope)
    if principal is None:
        return ANONYMOUS_OWNER
    return f"principal:{principal.key}"


@dataclass(eq=False)
class RunningTask:
    """A task whose handler runs in this process.

    Attributes:
        task_id: the task's id.
        owner: its owner key.
        era: the era it was created in (its wire shapes).
        session: the connection that created it.
        token: fires when the task is cancelled (from any process) or the server stops.
        envelope: (2026-07-28) the creating request's envelope (the client's capabilities).
    """

    task_id: str
    owner: str
    era: Era
    session: ServerSession
    token: CancelToken
    envelope: RequestEnvelope | None
    latest: TaskRecord
    cond: threading.Condition = field(default_factory=threading.Condition)
    result_waiters: list[Any] = field(default_factory=list)
    """(2025) Ids of the ``tasks/result`` requests waiting on the task (the streams its
    requests to the client travel on)."""
    input_counts: dict[str, int] = field(default_factory=dict)
    input_lock: threading.Lock = field(default_factory=threading.Lock)
    """(2026) Held while the input bookkeeping below and the store's ``inputRequests`` change."""
    pending_inputs: dict[str, Any] = field(default_factory=dict)
    """(2026) The input requests outstanding (key -> ``{"method", "params"}``)."""
    answers: dict[str, Any] = field(default_factory=dict)
    """(2026) Answers taken from the store, not yet handed to their waiting call."""
    stop_watch: Callable[[], None] = lambda: None
    lease: deadlines.Deadline | None = None

    def next_key(self, prefix: str) -> str:
        """An input-request key unique for the task's lifetime (``elicit-1``, ``elicit-2``)."""
        with self.cond:
            number = self.input_counts.get(prefix, 0) + 1
            self.input_counts[prefix] = number
            return f"{prefix}-{number}"

    def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Block until ``predicate()`` (read under :attr:`cond`) or the token fires; at most
        until the task's TTL runs out (then -32603: the task fails, it cannot wait for ever)."""
        ttl_ms = self.latest.ttl_ms
        timeout = None if ttl_ms is None else self.latest.created_at + ttl_ms / 1000 - time.time()
        done = lambda: predicate() or self.token.cancelled  # noqa: E731
        if not wait_for_condition(self.cond, done, timeout):
            raise McpError(INTERNAL_ERROR, "no answer came before the task's TTL ran out")


class TaskService:
    """The tasks of one :class:`~mcp_sync.server.Server`: its store, its bounded pool and the
    tasks running here.

    Args:
        server: the server.
        store: where tasks live (a :class:`~mcp_sync.tasks.MemoryTaskStore` by default).
        max_tasks: the most task handlers running at once in this process.
        lease_seconds: how long this worker's hold on a task lasts unless renewed.
        poll_interval_ms: the polling interval suggested to requestors.
        default_ttl_ms: the lifetime of a task whose requestor names none.
    """

    def __init__(
        self,
        server: Server,
        store: TaskStore | None = None,
        *,
        max_tasks: int = DEFAULT_MAX_TASKS,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        poll_interval_ms: int = DEFAULT_POLL_INTERVAL_MS,
        default_ttl_ms: int | None = DEFAULT_TTL_MS,
    ) -> None:
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        if lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        self.server = server
        self._store = store
        self._own_store = store is None  # made here on first use: closed by shutdown()
        self.max_tasks = max_tasks
        self.lease_seconds = lease_seconds
        self.poll_interval_ms = poll_interval_ms
        self.default_ttl_ms = default_ttl_ms
        self.worker_id = f"{server.name}-{secrets.token_hex(8)}"
        """This process's id as a task worker (in the store's ``worker`` column)."""
        self._lock = threading.Lock()
        self._running: dict[str, RunningTask] = {}
        self._reserved = 0  # tasks being created (counted against max_tasks)
        self._pool = WorkerPool(max_tasks, f"mcp_sync-tasks-{server.name}")

    @property
    def store(self) -> TaskStore:
        """The task store (made on first use when none was given)."""
        with self._lock:
            if self._store is None:
                from ..tasks import MemoryTaskStore

                self._store = MemoryTaskStore()
            return self._store

    # -- what the server offers ------------------------------------------------------------
    def enabled(self) -> bool:
        """True when some tool may run as a task (the capabilities say so then)."""
        return any(tool.task_support != "forbidden" for tool in self.server.registry.tools())

    def running(self, task_id: str) -> RunningTask | None:
        """The task ``task_id`` if its handler runs in this process."""
        with self._lock:
            return self._running.get(task_id)

    def running_count(self) -> int:
        """How many task handlers run (or are about to) in this process."""
        with self._lock:
            return len(self._running) + self._reserved

    # -- creating and running ------------------------------------------------------------------
    def start(
        self,
        scope: RequestScope,
        request: InboundRequest,
        tool: RegisteredTool,
        arguments: Mapping[str, Any] | None,
        ttl_ms: int | None,
        run: Callable[[Context], dict[str, Any]],
    ) -> TaskRecord:
        """Create the task (durably) and queue its handler; returns the record as created.

        ``run(ctx)`` runs the tool and returns its ``CallToolResult``. Raises the -32603
        error owed when :attr:`max_tasks` handlers already run here (nothing is created).
        """
        with self._lock:
            if len(self._running) + self._reserved >= self.max_tasks:
                raise McpError(
                    INTERNAL_ERROR,
                    f"too many tasks running on this server (at most {self.max_tasks}); try again later",
                    {"limit": self.max_tasks},
                )
            self._reserved += 1
        try:
            era = Era.MODERN if scope.modern else Era.HANDSHAKE
            owner = owner_of(scope)
            store = self.store
            try:
                store.purge_expired()
            except Exception:
                _log.debug("purging expired tasks failed", exc_info=True)
            try:
                record = store.create(
                    owner=owner,
                    ttl_ms=ttl_ms if ttl_ms is not None else self.default_ttl_ms,
                    poll_interval_ms=self.poll_interval_ms,
                    worker=self.worker_id,
                    lease_seconds=self.lease_seconds,
                    meta={"method": request.method, "tool": tool.name, "era": era.value},
                )
            except TaskStoreFull as exc:
                raise McpError(
                    INTERNAL_ERROR, f"the task store is full ({exc}); try again later"
                ) from None
            running = RunningTask(
                task_id=record.task_id,
                owner=owner,
                era=era,
                session=scope.session,
                token=CancelToken(),
                envelope=scope.envelope,
                latest=record,
            )
            running.token.add_callback(lambda _t: self._wake(running))
            with self._lock:
                self._running[record.task_id] = running
        finally:
            with self._lock:
                self._reserved -= 1
        running.stop_watch = store.watch(record.task_id, lambda rec: self._changed(running, rec))
        self._arm_lease(running)
        ctx = Context(scope.session, _task_request(request, running, self), running.token)
        try:
            self._pool.submit(self._run, running, run, ctx)
        except RuntimeError as exc:  # the pool is shut down: the server is stopping
            self._end(running, "failed", {"error": {"code": INTERNAL_ERROR, "message": str(exc)}})
        return record

    def _run(
        self, running: RunningTask, run: Callable[[Context], dict[str, Any]], ctx: Context
    ) -> None:
        try:
            result = run(ctx)
        except McpError as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            self._end(running, "failed", {"error": error}, exc.message)
            return
        except BaseException as exc:  # run() turns handler failures into tool errors
            _log.error("task %s failed", running.task_id, exc_info=True)
            self._end(
                running,
                "failed",
                {"error": {"code": INTERNAL_ERROR, "message": str(exc) or type(exc).__name__}},
            )
            return
        # 2025-11-25: a tool error (isError) makes the task failed; 2026-07-28: completed
        status: Literal["completed", "failed"] = (
            "failed" if running.era is Era.HANDSHAKE and result.get("isError") else "completed"
        )
        self._end(running, status, {"result": result})

    def _end(
        self,
        running: RunningTask,
        status: Literal["completed", "failed"],
        outcome: Mapping[str, Any],
        message: str | None = None,
    ) -> None:
        """Record the outcome (unless the task ended first, e.g. cancelled) and let go."""
        try:
            self.store.finish(running.task_id, status, outcome, message=message)
        except TaskNotFound:  # deleted meanwhile (expired, or the store closed): nobody asks
            _log.debug("task %s: gone before its outcome was stored", running.task_id)
        except Exception:
            _log.warning("task %s: outcome not stored", running.task_id, exc_info=True)
        finally:
            self._release(running)

    def _release(self, running: RunningTask) -> None:
        with self._lock:
            self._running.pop(running.task_id, None)
        running.stop_watch()
        if running.lease is not None:
            running.lease.cancel()

    def _arm_lease(self, running: RunningTask) -> None:
        def renew() -> None:
            if self.running(running.task_id) is not running:
                return
            try:
                kept = self.store.renew_lease(
                    running.task_id, worker=self.worker_id, lease_seconds=self.lease_seconds
                )
            except Exception:
                _log.warning("task %s: lease not renewed", running.task_id, exc_info=True)
                kept = True  # try again next time
            if kept:
                self._arm_lease(running)

        running.lease = deadlines.schedule(self.lease_seconds / 3, renew)

    # -- changes from the store ---------------------------------------------------------------
    def _wake(self, running: RunningTask) -> None:
        with running.cond:
            running.cond.notify_all()

    def _changed(self, running: RunningTask, record: TaskRecord) -> None:
        """The store's watch callback: a change made by any process."""
        with running.cond:
            if record.version < running.latest.version:
                return
            running.latest = record
            running.cond.notify_all()
        if record.status == "cancelled":
            running.token.cancel(record.status_message or "the task was cancelled")
        self.announce(record, running.era, running.session)

    def announce(self, record: TaskRecord, era: Era, session: ServerSession | None) -> None:
        """Tell the requestor about a change: 2025 ``notifications/tasks/status`` on
        ``session``; 2026 ``notifications/tasks`` on the listen streams that asked."""
        if era is Era.MODERN:
            from .subscriptions import task_event

            self.server.listens.publish(
                task_event(record.task_id, tasks_wire.detailed_task(record))
            )
            return
        if session is None or session.closed:
            return
        params = tasks_wire.legacy_task(record)

        def send() -> None:
            try:
                session.send_notification("notifications/tasks/status", params)
            except Exception:
                _log.debug("task status not delivered", exc_info=True)

        try:
            session.endpoint.run_callback(send)
        except Exception:
            _log.debug("task status not queued", exc_info=True)

    # -- cancelling --------------------------------------------------------------------------
    def cancel(self, task_id: str, owner: str, message: str | None = None) -> TaskRecord:
        """Make the task ``cancelled`` in the store (raises ``TaskNotFound`` or
        ``TaskAlreadyTerminal``) and fire its handler's token if it runs here (the watch does
        it in whichever process runs it)."""
        record = self.store.cancel(task_id, owner=owner, message=message)
        running = self.running(task_id)
        if running is not None:
            running.token.cancel(record.status_message or "the task was cancelled")
        return record

    def end_session(self, session: ServerSession) -> None:
        """(2025) The session that owns its tasks closed: nobody can read them any more, so
        its running tasks are cancelled."""
        if not self._running:  # every 2026-07-28 request over HTTP ends a session of its own
            return
        with self._lock:
            mine = [
                r for r in self._running.values() if r.session is session and r.era is Era.HANDSHAKE
            ]
        for running in mine:
            try:
                self.cancel(running.task_id, running.owner, "the session ended")
            except Exception:  # already terminal, or gone
                running.token.cancel("the session ended")

    def shutdown(self, grace: float = 5.0) -> list[threading.Thread]:
        """Stop: the tasks still running here end ``failed`` ("server stopped"), their tokens
        fire, and the pool's threads are joined for up to ``grace`` seconds (the threads still
        alive are returned). A store the service made itself is closed. The service can
        serve again afterwards (with a new pool)."""
        with self._lock:
            running = list(self._running.values())
        for task in running:
            try:
                self.store.finish(
                    task.task_id,
                    "failed",
                    {"error": {"code": INTERNAL_ERROR, "message": "the server stopped"}},
                    message="the server stopped",
                )
            except Exception:
                _log.debug("task %s: not marked failed", task.task_id, exc_info=True)
            task.token.cancel("the server stopped")
        with self._lock:
            pool, self._pool = self._pool, WorkerPool(self.max_tasks, self._pool.name)
            store = self._store if self._own_store else None
            if store is not None:
                self._store = None
        left = pool.shutdown(grace)
        if store is not None:
            store.close()
        return left


def _task_request(
    request: InboundRequest, running: RunningTask, service: TaskService
) -> InboundRequest:
    """The handler's own view of the creating request: the same id, method and params, but
    already answered (progress and log messages about it are not sent: a task has no
    request stream), and its scope a :class:`~mcp_sync.server.tasks_input.TaskScope`."""
    from .tasks_input import TaskScope

    params = dict(request.params)
    meta = params.get("_meta")
    if isinstance(meta, dict):
        params["_meta"] = {k: v for k, v in meta.items() if k != "progressToken"}
    own = InboundRequest(Request(request.id, request.method, params), running.token)
    own.state = InboundState.COMPLETED
    parent = request.context
    admission = parent.admission if isinstance(parent, RequestScope) else None
    scope = TaskScope(
        running.session,
        running.token,
        request=own,
        admission=admission,
        running=running,
        service=service,
    )
    own.context = scope
    return own
