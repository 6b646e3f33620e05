"""The client's driver of multi round-trip requests (2026-07-28).

At 2026-07-28 a server does not send requests to the client. When ``tools/call``,
``prompts/get`` or ``resources/read`` needs input (an elicitation, a sampling, the roots), the
server answers ``resultType: "input_required"`` with ``inputRequests`` and an opaque
``requestState``; the client answers each input request locally -- with the same handlers that
serve a 2025 server's requests -- and sends the request again, with a new id, the original
params, ``inputResponses`` keyed like the requests and ``requestState`` exactly as received.
:class:`InputRoundsCall` does this, round after round, until a final result:

* at most ``max_rounds`` rounds of input (then :class:`~mcp_sync.errors.PeerMisbehaved`);
* a round that carries only a ``requestState`` is retried after a short pause that grows
  with each such round in a row (:data:`STATE_ONLY_BACKOFF`);
* the call's ``timeout`` bounds the whole call, every round and the local input included;
* cancelling the call (or its timeout) cancels the round in flight on the wire
  (``notifications/cancelled`` on stdio), or -- between rounds -- sends nothing and fires the
  token the input handlers were given, so they stop;
* a result without ``resultType`` is complete; an unknown one, or ``"task"`` without the
  tasks extension, fails the call (see :mod:`mcp_sync.result_kinds`).

No thread is started per call: rounds settle on the connection's reader thread, the input
handlers run on the client's worker pool, the timeout is an entry of the shared deadline
scheduler.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Mapping
from typing import Any

from . import deadlines
from .call_options import USE_CLIENT_DEFAULT, CallOptions, resolve_timeout
from .cancel import CancelToken
from .endpoint import Endpoint, PendingCall
from .errors import Cancelled, ConnectionClosed, PeerMisbehaved, RequestTimeout
from .result_kinds import Complete, InputRequest, InputRequired, classify_result, retry_params

__all__ = [
    "MAX_INPUT_ROUNDS",
    "STATE_ONLY_BACKOFF",
    "AnswerInput",
    "SubmitRound",
    "InputRoundsCall",
]

MAX_INPUT_ROUNDS = 10
"""Default bound of ``input_required`` rounds of one call (``Client(max_input_rounds=...)``)."""

STATE_ONLY_BACKOFF: tuple[float, float] = (0.05, 0.25)
"""Pause before retrying a round that asked for nothing but carried a ``requestState``:
the first (seconds), doubled for each further such round in a row, up to the second."""

AnswerInput = Callable[[InputRequest, CancelToken], Any]
"""``answer(request, token) -> result``: answer one input request locally (the result as a
wire dict). ``token`` fires when the call is cancelled, times out or ends."""

SubmitRound = Callable[[dict[str, Any], CallOptions], PendingCall]
"""``submit(params, options) -> PendingCall``: send one round of the request (raw result)."""


class InputRoundsCall(PendingCall):
    """A request that may take several rounds: a :class:`~mcp_sync.endpoint.PendingCall` of
    its final result.

    Make it, then :meth:`start` it. :meth:`cancel` and ``result()`` behave as for any
    pending call; :attr:`request_id` is the id of the latest round.

    Args:
        endpoint: the connection (for waiting, as every pending call does).
        method: the request's method (``tools/call`` ...).
        params: its params, sent again with every retry.
        submit_round: sends one round (see :data:`SubmitRound`).
        answer: answers one input request (see :data:`AnswerInput`).
        run: runs a task on a worker thread (the client's pool); raises :class:`RuntimeError`
            when shutting down.
        options: the call's :class:`~mcp_sync.call_options.CallOptions`.
        max_rounds: the bound of ``input_required`` rounds.
        tasks_declared: the request declared the tasks extension (``resultType: "task"`` is
            then a final result).
        backoff: see :data:`STATE_ONLY_BACKOFF`.
        resend_after: ``resend_after(error) -> bool``, asked once per call when a round fails:
            True sends that round again (the client changed what it stamps on it, e.g. the
            protocol version after -32022).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        submit_round: SubmitRound,
        answer: AnswerInput,
        run: Callable[[Callable[[], None]], None],
        options: CallOptions,
        max_rounds: int = MAX_INPUT_ROUNDS,
        tasks_declared: bool = False,
        backoff: tuple[float, float] = STATE_ONLY_BACKOFF,
        resend_after: Callable[[BaseException], bool] | None = None,
    ) -> None:
        super().__init__(endpoint, method)
        if max_rounds < 0:
            raise ValueError(f"max_rounds must be >= 0, not {max_rounds}")
        self._params = dict(params or {})
        self._submit_round = submit_round
        self._answer = answer
        self._run = run
        self._max_rounds = max_rounds
        self._tasks_declared = tasks_declared
        self._backoff = backoff
        self._resend_after = resend_after
        self._sent_params = self._params
        self._lock = threading.Lock()
        self._finished = False
        self._round: PendingCall | None = None
        self._rounds = 0  # input_required answers taken
        self._state_only_in_a_row = 0
        parent = options.get("cancel_token")
        self._token = parent.child() if parent is not None else CancelToken()
        timeout = resolve_timeout(
            options.get("timeout", USE_CLIENT_DEFAULT), endpoint.default_timeout
        )
        reset = bool(options.get("reset_timeout_on_progress", False)) and timeout is not None
        max_total = deadlines.check_timeout(options.get("max_total_timeout"), "max_total_timeout")
        # with reset_timeout_on_progress each round has the timeout (restarted by its
        # progress); otherwise the timeout, like max_total_timeout, bounds the whole call
        whole = None if reset else timeout
        self._limit: float | None = (
            whole if max_total is None else max_total if whole is None else min(whole, max_total)
        )
        self._limit_is_total = max_total is not None and self._limit == max_total
        self._call_deadline: deadlines.Deadline | None = None
        self._round_options: CallOptions = {
            "timeout": timeout if reset else None,
            "reset_timeout_on_progress": reset,
            "on_progress": options.get("on_progress"),
            "cancel_token": self._token,
        }

    # -- what the caller sees ---------------------------------------------------------------------
    @property
    def request_id(self) -> int | None:
        """The JSON-RPC id of the latest round (each round has its own)."""
        current = self._round
        return None if current is None else current.request_id

    @property
    def rounds(self) -> int:
        """How many ``input_required`` answers were taken so far."""
        return self._rounds

    def _read_here(self) -> None:
        """The caller reads the answer of the round in flight, if a blocking method sent it
        (later rounds are sent by a worker and read by the transport's own threads)."""
        current = self._round
        if current is None:
            return
        try:
            current._read_here()
        except KeyboardInterrupt:
            self.cancel("interrupted")
            raise

    def running(self) -> bool:
        """True from the first round until the call has its outcome."""
        return self._round is not None and not self.done()

    def cancel(self, reason: str | None = None) -> bool:
        """Cancel the call: the round in flight is cancelled on the wire; between rounds
        nothing is sent and the input handlers' token fires. True if the call is cancelled
        (now or before), False if it had already ended otherwise."""
        self._token.cancel(reason or "cancelled")
        return self.cancelled()

    # -- the rounds ---------------------------------------------------------------------------------
    def start(self) -> InputRoundsCall:
        """Send the first round. Raises what sending raises (for example
        :class:`~mcp_sync.errors.ConnectionClosed`). Returns this call."""
        if self._token.cancelled:  # an already-cancelled cancel_token: nothing is sent
            self._finish(cancelled=True, reason=self._token.reason)
            return self
        self._token.add_callback(self._on_cancel)
        if self._limit is not None:
            self._call_deadline = deadlines.schedule(self._limit, self._on_timeout)
        self._send(self._params, first=True)
        return self

    def _send(self, params: dict[str, Any], *, first: bool = False) -> None:
        with self._lock:
            if self._finished:
                return
        self._sent_params = params
        try:
            call = self._submit_round(params, self._round_options)
        except BaseException as exc:
            self._finish(exception=exc)
            if first:
                raise
            return
        with self._lock:
            self._round = call
        call.add_done_callback(self._round_done)

    def _round_done(self, call: concurrent.futures.Future[Any]) -> None:
        """A round settled (on whichever thread settled it: never run user code here)."""
        try:
            raw = call.result(0)
        except Cancelled as exc:
            self._finish(cancelled=True, reason=self._token.reason or exc.reason)
            return
        except BaseException as exc:
            resend, self._resend_after = self._resend_after, None  # once per call
            if resend is not None and not self._token.cancelled and resend(exc):
                self._send(self._sent_params)
            else:
                self._finish(exception=exc)
            return
        try:
            kind = classify_result(self.method, raw, tasks_declared=self._tasks_declared)
        except PeerMisbehaved as exc:
            self._finish(exception=exc)
            return
        if isinstance(kind, Complete):
            self._finish(result=kind.result)
            return
        with self._lock:
            if self._finished:
                return
            self._rounds += 1
            too_many = self._rounds > self._max_rounds
        if too_many:
            self._finish(
                exception=PeerMisbehaved(
                    f"{self.method}: the server still asked for input after {self._max_rounds} rounds",
                    "too many input_required rounds",
                )
            )
            return
        try:
            self._run(lambda: self._gather(kind))
        except RuntimeError:
            self._finish(exception=ConnectionClosed("the client is closing"))

    def _gather(self, kind: InputRequired) -> None:
        """(worker) Answer every input request, in order, then send the retry."""
        if kind.state_only:
            self._state_only_in_a_row += 1
            first, most = self._backoff
            pause = min(first * 2 ** (self._state_only_in_a_row - 1), most)
            if self._token.wait(pause):
                return  # cancelled while pausing: _on_cancel settled the call
        else:
            self._state_only_in_a_row = 0
        responses: dict[str, Any] = {}
        for request in kind.requests:
            if self._token.cancelled:
                return
            try:
                responses[request.key] = self._answer(request, self._token)
            except Exception as exc:
                if (
                    not self._token.cancelled
                ):  # a handler stopping because it was asked to is no error
                    self._finish(exception=exc)
                return
        if not self._token.cancelled:
            self._send(retry_params(self._params, responses, kind.state))

    # -- the end --------------------------------------------------------------------------------------
    def _on_cancel(self, token: CancelToken) -> None:
        self._finish(cancelled=True, reason=token.reason)

    def _on_timeout(self) -> None:
        reason = (
            "maximum total timeout reached"
            if self._limit_is_total
            else f"timed out after {self._limit:g} s"
        )
        self._finish(exception=RequestTimeout(f"{self.method}: {reason}"), stop=reason)

    def _finish(
        self,
        *,
        result: Any = None,
        exception: BaseException | None = None,
        cancelled: bool = False,
        reason: str | None = None,
        stop: str = "the call ended",
    ) -> bool:
        """Settle the call once; then fire the token (``stop`` is its reason): a round still
        in flight is cancelled on the wire, input handlers stop, the link to the caller's
        ``cancel_token`` is removed. False if the call had already ended."""
        with self._lock:
            if self._finished:
                return False
            self._finished = True
            deadline, self._call_deadline = self._call_deadline, None
        if deadline is not None:
            deadline.cancel()
        self._conclude(result=result, exception=exception, cancelled=cancelled, reason=reason)
        self._token.cancel(stop)
        return True
