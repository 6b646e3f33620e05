"""Input while a task runs: the handler's ``ctx.session.elicit(...)``,
``create_message(...)`` and ``list_roots(...)`` inside a task.

The task moves to ``input_required`` while the handler waits, and back to ``working`` with
the answer:

* **2025-11-25**: the request really goes to the client, on the stream of a ``tasks/result``
  request waiting for the task (the spec's side channel: the requestor calls ``tasks/result``
  when it sees ``input_required``), with ``_meta["io.modelcontextprotocol/related-task"]``.
  The handler waits until such a ``tasks/result`` arrives.
* **2026-07-28**: nothing is sent. The question is stored in the task's ``inputRequests``
  (keys ``elicit-1``, ``sampling-1``, ``roots-1``..., unique for the task's lifetime), shown
  by ``tasks/get``; the client answers with ``tasks/update``, and the store's watch hands
  the answer to the handler, in whichever process it runs.

In both eras a cancelled task (or a stopped server) ends the wait: the call raises
:class:`~mcp_sync.errors.Cancelled`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from typing_extensions import Unpack

from ..call_options import CallOptions
from ..cancel import CancelToken
from ..errors import Cancelled, McpError
from ..jsonrpc import INVALID_PARAMS
from ..lifecycle import Admission, Era
from ..protocol import InboundRequest
from ..results import SERVER_REQUEST_RESULTS, parser_for
from . import tasks_wire
from .client_requests import create_message_params, elicit_params
from .scope import RequestScope

if TYPE_CHECKING:  # pragma: no cover
    import mcp_types

    from .dispatch import ServerSession
    from .tasks import RunningTask, TaskService

__all__ = ["TaskScope"]

_KEY_PREFIX = {
    "elicitation/create": "elicit",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


class TaskScope(RequestScope):
    """The scope of a handler running as a task: its requests to the client are the task's
    input (see the module's description). Log and progress messages are not sent."""

    def __init__(
        self,
        session: ServerSession,
        token: CancelToken,
        *,
        request: InboundRequest,
        admission: Admission | None,
        running: RunningTask,
        service: TaskService,
    ) -> None:
        super().__init__(session, token, request=request, admission=admission)
        self._running = running
        self._service = service

    def child(self, token: CancelToken) -> TaskScope:
        """The same task's scope, tied to ``token``."""
        assert self.request is not None
        return TaskScope(
            self.session,
            token,
            request=self.request,
            admission=self.admission,
            running=self._running,
            service=self._service,
        )

    @property
    def task_id(self) -> str:
        """The id of the task this handler runs as."""
        return self._running.task_id

    def send_log(self, level: str, data: Any, logger: str | None = None) -> bool:
        """Not sent: a task has no request stream to carry log messages (False)."""
        return False

    # -- input -------------------------------------------------------------------------------
    def _ask(
        self,
        method: str,
        params: dict[str, Any],
        capability: str,
        sub: str | None,
        options: CallOptions,
    ) -> Any:
        if self._running.era is Era.MODERN:
            envelope = self._running.envelope
            if envelope is not None:
                envelope.require(capability, sub, what=method)
            answer = self._ask_modern(method, params)
        else:
            self.session.require_capability(capability, method)
            answer = self._ask_legacy(method, params, options)
        return answer

    def _set_status(self, status: Any, **changes: Any) -> None:
        record = self._service.store.set_status(self.task_id, status, **changes)
        running = self._running
        with running.cond:  # the watch tells the same, perhaps later (another process's store)
            if record.version > running.latest.version:
                running.latest = record
        if record.terminal:
            raise Cancelled(record.status_message or f"the task is {record.status}")

    def _ask_legacy(self, method: str, params: dict[str, Any], options: CallOptions) -> Any:
        running = self._running
        self._set_status("input_required", message=f"waiting for the answer to {method}")
        # the side channel: the stream of a tasks/result request waiting on the task
        running.wait_for(lambda: bool(running.result_waiters))
        self._token.raise_if_cancelled()
        with running.cond:
            stream = running.result_waiters[-1] if running.result_waiters else None
        params["_meta"] = {**params.get("_meta", {}), **tasks_wire.related_meta(self.task_id)}
        scoped = dict(options)
        scoped["cancel_token"] = self._token
        call = self.session.submit(method, params, related_request=stream, **scoped)  # type: ignore[arg-type]
        result = call.decode_result_with(parser_for(SERVER_REQUEST_RESULTS[method])).result()
        self._set_status("working")
        return result

    def _ask_modern(self, method: str, params: dict[str, Any]) -> Any:
        running = self._running
        key = running.next_key(_KEY_PREFIX[method])
        with running.input_lock:  # several threads of one handler may ask at once
            running.pending_inputs[key] = {"method": method, "params": params}
            self._set_status(
                "input_required",
                message="waiting for input",
                input_requests=dict(running.pending_inputs),
            )

        def answered() -> bool:
            latest = running.latest
            return (
                key in running.answers or key in (latest.input_responses or {}) or latest.terminal
            )

        running.wait_for(answered)
        self._token.raise_if_cancelled()
        with running.input_lock:
            latest = running.latest
            if key not in running.answers and latest.terminal:
                raise Cancelled(latest.status_message or f"the task is {latest.status}")
            responses = dict(latest.input_responses or {})
            taken = [k for k in running.pending_inputs if k in responses]
            for k in taken:  # hand every answer that came to its call, then clear them
                running.answers[k] = responses[k]
                del running.pending_inputs[k]
            if taken:
                if running.pending_inputs:
                    self._set_status(
                        "input_required",
                        message="waiting for input",
                        input_requests=dict(running.pending_inputs),
                        taken_responses=taken,
                    )
                else:
                    self._set_status("working", taken_responses=taken)
            answer = running.answers.pop(key)
        with running.cond:
            running.cond.notify_all()  # another call's answer may be among those taken
        try:
            return parser_for(SERVER_REQUEST_RESULTS[method])(answer)
        except ValueError:
            raise McpError(
                INVALID_PARAMS, f"inputResponses[{key!r}] is not a valid result of {method}"
            ) from None

    def list_roots(self, **options: Unpack[CallOptions]) -> list[mcp_types.Root]:
        """Ask the client for its roots, as the task's input."""
        return list(self._ask("roots/list", {}, "roots", None, options).roots)

    def create_message(
        self,
        messages: Iterable[dict[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        extra_params: Mapping[str, Any] | None = None,
        **options: Unpack[CallOptions],
    ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools:
        """Ask the client to sample, as the task's input."""
        params = create_message_params(
            messages, max_tokens=max_tokens, system_prompt=system_prompt, extra_params=extra_params
        )
        return self._ask("sampling/createMessage", params, "sampling", None, options)  # type: ignore[no-any-return]

    def elicit(
        self,
        message: str,
        requested_schema: dict[str, Any] | None = None,
        *,
        url: str | None = None,
        elicitation_id: str | None = None,
        **options: Unpack[CallOptions],
    ) -> mcp_types.ElicitResult:
        """Ask the user through the client, as the task's input."""
        params = elicit_params(
            message,
            requested_schema,
            url=url,
            elicitation_id=elicitation_id,
            mint_id=self._running.era is not Era.MODERN,
        )
        return self._ask(  # type: ignore[no-any-return]
            "elicitation/create", params, "elicitation", "url" if url is not None else None, options
        )
