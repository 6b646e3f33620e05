"""Multi round-trip input (revision 2026-07-28) for ``tools/call``, ``prompts/get`` and
``resources/read`` handlers.

At 2026-07-28 a server never sends its client a request. A handler that needs input -- an
answer from the user (``elicitation/create``), a sample from the client's model
(``sampling/createMessage``) or the client's roots (``roots/list``) -- has the request answered
with ``resultType: "input_required"``: the questions in ``inputRequests`` and a sealed
``requestState``. The client gathers the answers and sends the same request again, with a new
id, the answers in ``inputResponses`` and the state echoed byte for byte.

Two ways for a handler to take part, both served by :class:`InputRounds`:

* **implicit**: the handler calls ``ctx.session.elicit(...)``, ``create_message(...)`` or
  ``list_roots(...)`` as it does on a 2025-11-25 session. The *n*-th call of a kind in one run
  of the handler has a fixed key (``elicit-1``, ``sampling-2``, ``roots-1``). If the answer to
  that key is known (sealed in the state by an earlier round, or in this retry's
  ``inputResponses``), the call returns it; otherwise the call raises :class:`~mcp_sync.errors.InputNeeded`,
  which stops the handler, and the library answers ``input_required`` on its behalf. The
  retry runs the handler again from the top, so the same call now returns its answer. Code
  before such a call therefore **runs once per round**: keep it free of side effects, or
  make them idempotent, and make the calls in the same order every time.
* **explicit**: the handler returns :class:`InputRequired` (its own keys, its own state); on
  the retry it reads :attr:`InputRound.input_responses` and :attr:`InputRound.handler_state`
  (``ctx.input_responses``, ``ctx.request_state_payload``).

The state is sealed with :class:`~mcp_sync.request_state.StateSealer`, bound to the method, a
digest of the params and an expiry. It carries the round count, the keys asked (with a digest
of each question) and the answers gathered so far; a retry's answer counts only for a key that
was asked, and an answer is only reused for the same question (a handler that asks something
else under a key is asked again). A tampered, expired or foreign state is refused with a
-32602 error before the handler runs.

Only the kinds of input the request's own ``clientCapabilities`` declare are asked for; asking
for another answers the request with -32021 and ``data.requiredCapabilities``.

Bounds: at most :data:`MAX_INPUTS_PER_ROUND` input requests in one ``input_required`` answer,
and at most :data:`MAX_ROUNDS` ``input_required`` answers for one request (counted in the
state); past either the request fails with -32603.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CapabilityError, InputNeeded, McpError
from ..jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from ..lifecycle import capability_declared
from ..request_state import StateSealer, params_digest
from ..results import SERVER_REQUEST_RESULTS, parser_for

if TYPE_CHECKING:  # pragma: no cover
    from .scope import RequestScope

__all__ = [
    "INPUT_METHODS",
    "INPUT_REQUEST_METHODS",
    "MAX_INPUTS_PER_ROUND",
    "MAX_ROUNDS",
    "InputRequired",
    "InputRound",
    "InputRounds",
    "required_capability",
    "serve",
]

INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The only requests that may be answered ``input_required``."""

INPUT_REQUEST_METHODS = frozenset(SERVER_REQUEST_RESULTS) - {"ping"}
"""What an input request may ask: ``elicitation/create``, ``sampling/createMessage``, ``roots/list``."""

MAX_INPUTS_PER_ROUND = 16
"""The most input requests one ``input_required`` answer may carry."""

MAX_ROUNDS = 32
"""The most ``input_required`` answers one request may get before it fails with -32603."""

_STATE_FORMAT = 1
_KEY_PREFIX = {
    "elicitation/create": "elicit",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}
_IMPLICIT_KEY = re.compile(rf"(?:{'|'.join(_KEY_PREFIX.values())})-[0-9]+")


@dataclass(frozen=True)
class InputRequired:
    """What a handler returns to ask the client for input itself (the explicit form).

    Attributes:
        input_requests: key -> ``{"method": ..., "params": {...}}``, where the method is one of
            :data:`INPUT_REQUEST_METHODS` (the request as the client would receive it at
            2025-11-25, without ``jsonrpc`` and ``id``). Keys are the handler's own
            (non-empty strings, not of the form of the implicit keys: ``elicit-1``,
            ``sampling-1``, ``roots-1``); at most :data:`MAX_INPUTS_PER_ROUND`. May be empty when
            ``state`` alone is enough (the client retries at once).
        state: anything JSON-serialisable the handler wants back on the retry, as
            ``ctx.request_state_payload``. It is sealed (signed, readable by the client):
            never put secrets in it.

    On the retry the answers are in ``ctx.input_responses`` (key -> the client's result, as
    a JSON object), only for the keys asked in the round before.
    """

    input_requests: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    state: Any = None


def required_capability(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The client capability an input request needs, as ``requiredCapabilities`` spells it.

    ``elicitation/create`` in URL mode needs ``elicitation.url``, in form mode
    ``elicitation.form``; ``sampling/createMessage`` with ``tools`` or ``toolChoice`` needs
    ``sampling.tools``, otherwise ``sampling``; ``roots/list`` needs ``roots``.
    """
    if method == "elicitation/create":
        return {"elicitation": {"url": {}} if params.get("mode") == "url" else {"form": {}}}
    if method == "sampling/createMessage":
        return (
            {"sampling": {"tools": {}}}
            if "tools" in params or "toolChoice" in params
            else {"sampling": {}}
        )
    if method == "roots/list":
        return {"roots": {}}
    raise ValueError(
        f"{method!r} is not an input request ({', '.join(sorted(INPUT_REQUEST_METHODS))})"
    )


def _declares(capabilities: Mapping[str, Any], needed: Mapping[str, Any]) -> bool:
    """True if ``capabilities`` declare ``needed`` (one capability, at most one sub-capability).

    Form-mode elicitation is also declared by an ``elicitation`` object with neither ``form``
    nor ``url`` in it (the spec's implicit form-only declaration).
    """
    ((name, subs),) = needed.items()
    sub = next(iter(subs), None)
    if (
        name == "elicitation"
        and sub == "form"
        and capability_declared(capabilities, name)
        and not any(capability_declared(capabilities, name, mode) for mode in ("form", "url"))
    ):
        return True
    return capability_declared(capabilities, name, sub)


def _question(method: str, params: Mapping[str, Any]) -> str:
    """A digest of one input request, so an answer is reused only for the same question."""
    return params_digest({"method": method, "params": params})


def _bad_params(message: str) -> McpError:
    return McpError(INVALID_PARAMS, message)


class InputRound:
    """One run of a handler for one 2026-07-28 request: the answers known, the input asked.

    Made by :meth:`InputRounds.begin`; the handler's ``ctx.session`` asks through :meth:`ask`.
    Thread-safe (a handler may ask from several threads, though the keys then depend on the
    order of the calls).

    Attributes:
        method: the request's method.
        client_capabilities: what this request declares (its ``_meta`` envelope).
        rounds_before: how many ``input_required`` answers this request had before this run (0 for a
            first request).
        input_responses: this retry's answers to the keys asked in the round before (key ->
            the client's result as a JSON object); empty on a first request.
        handler_state: the ``state`` of the :class:`InputRequired` the handler returned in the
            round before, or ``None``.
        collects: True when the handler's ``ctx.session.elicit(...)`` (and the others) are
            answered by this round (2026-07-28); False on a 2025-11-25 session, where they
            are real requests to the client and the round only carries the explicit form's
            answers and state.
    """

    def __init__(
        self,
        method: str,
        client_capabilities: Mapping[str, Any],
        *,
        rounds_before: int = 0,
        answers: Mapping[str, Mapping[str, Any]] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        handler_state: Any = None,
        collects: bool = True,
    ) -> None:
        self.collects = collects
        self.method = method
        self.client_capabilities = client_capabilities
        self.rounds_before = rounds_before
        self.input_responses: Mapping[str, Any] = dict(input_responses or {})
        self.handler_state = handler_state
        self._answers: dict[str, Mapping[str, Any]] = dict(answers or {})
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._asked: dict[str, dict[str, Any]] = {}
        self._refusal: McpError | None = None

    @property
    def asked(self) -> Mapping[str, Mapping[str, Any]]:
        """The input requests of this run still unanswered (key -> ``{"method", "params"}``)."""
        with self._lock:
            return {
                key: {"method": entry["method"], "params": entry["params"]}
                for key, entry in self._asked.items()
            }

    @property
    def refusal(self) -> McpError | None:
        """The -32021 error owed to the client once the handler asked for undeclared input."""
        return self._refusal

    def _check_declared(self, method: str, params: Mapping[str, Any], what: str) -> bool:
        """Record the -32021 refusal unless this request declares what the input request
        needs; True once refused (call with the lock held)."""
        needed = required_capability(method, params)
        if self._refusal is None and not _declares(self.client_capabilities, needed):
            ((name, subs),) = needed.items()
            capability = name + "".join(f".{sub}" for sub in subs)
            self._refusal = McpError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"{what} needs the client capability {capability!r}, which this request does not declare",
                {"requiredCapabilities": needed},
            )
        return self._refusal is not None

    def ask(self, method: str, params: Mapping[str, Any]) -> Any:
        """The parsed answer to the next input request of kind ``method`` in this run.

        Returns the ``mcp_types`` model of the answer (``ElicitResult``,
        ``CreateMessageResult`` or ``CreateMessageResultWithTools``, ``ListRootsResult``).

        Raises:
            InputNeeded: no answer yet (the request is recorded for the ``input_required``
                answer), or the request's client capabilities do not cover it (a -32021
                answer is recorded: :attr:`refusal`).
        """
        question = _question(method, params)
        with self._lock:
            if self._check_declared(method, params, method):
                raise InputNeeded(method)
            prefix = _KEY_PREFIX[method]
            number = self._counters.get(prefix, 0) + 1
            self._counters[prefix] = number
            key = f"{prefix}-{number}"
            answer = self._answers.get(key)
            if answer is not None and answer["method"] == method and answer["question"] == question:
                return parser_for(SERVER_REQUEST_RESULTS[method])(answer["result"])
            self._asked[key] = {
                "method": method,
                "params": dict(params),
                "question": question,
                "implicit": True,
            }
        raise InputNeeded(key)

    def _ask_explicitly(self, returned: InputRequired) -> None:
        """Record the input requests of an :class:`InputRequired` the handler returned."""
        if not isinstance(returned.input_requests, Mapping):
            raise TypeError("InputRequired.input_requests must be a mapping of key -> request")
        for key, request in returned.input_requests.items():
            if not isinstance(key, str) or not key:
                raise ValueError(f"an input request key must be a non-empty string, not {key!r}")
            method = request.get("method") if isinstance(request, Mapping) else None
            params = request.get("params", {}) if isinstance(request, Mapping) else None
            if method not in INPUT_REQUEST_METHODS or not isinstance(params, Mapping):
                raise ValueError(
                    f"input request {key!r} must be {{'method': one of {sorted(INPUT_REQUEST_METHODS)}, 'params': {{...}}}}"
                )
            assert isinstance(method, str)
            if _IMPLICIT_KEY.fullmatch(key):
                raise ValueError(
                    f"input request key {key!r} has the form of the implicit keys (elicit-1, sampling-1, roots-1)"
                )
            with self._lock:
                self._check_declared(method, params, f"input request {key!r} ({method})")
                self._asked[key] = {
                    "method": method,
                    "params": dict(params),
                    "question": _question(method, params),
                    "implicit": False,
                }

    def _pending(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._asked)

    def _answers_to_keep(self) -> dict[str, Mapping[str, Any]]:
        with self._lock:
            return dict(self._answers)


class InputRounds:
    """The input rounds of one server: how states are sealed and how far rounds may go.

    Args:
        sealer: seals and opens the ``requestState`` strings.
        max_rounds: the most ``input_required`` answers one request may get
            (default :data:`MAX_ROUNDS`).
        max_inputs: the most input requests in one answer (default :data:`MAX_INPUTS_PER_ROUND`).
    """

    def __init__(
        self,
        sealer: StateSealer,
        *,
        max_rounds: int = MAX_ROUNDS,
        max_inputs: int = MAX_INPUTS_PER_ROUND,
    ) -> None:
        if max_rounds < 1 or max_inputs < 1:
            raise ValueError("max_rounds and max_inputs must be at least 1")
        self.sealer = sealer
        self.max_rounds = max_rounds
        self.max_inputs = max_inputs

    def begin(
        self, method: str, params: Mapping[str, Any] | None, client_capabilities: Mapping[str, Any]
    ) -> InputRound:
        """The round for one request: its ``requestState`` opened, its ``inputResponses`` checked.

        Raises:
            RequestStateError: the state does not open for this request (-32602).
            McpError: -32602 for ``inputResponses`` or ``requestState`` of the wrong type, or
                an answer that does not parse as the result of the request it answers.
        """
        params = params or {}
        if method not in INPUT_METHODS:
            raise ValueError(f"{method} cannot take input rounds")
        responses = params.get("inputResponses")
        if responses is not None and not isinstance(responses, Mapping):
            raise _bad_params("inputResponses must be an object")
        if "requestState" not in params:
            # without a state nothing was asked: answers are not taken on trust
            return InputRound(method, client_capabilities)
        payload = self.sealer.open(params["requestState"], method=method, params=params)
        if not (isinstance(payload, Mapping) and payload.get("format") == _STATE_FORMAT):
            raise _bad_params("Invalid requestState: not issued for input rounds")
        answers: dict[str, Mapping[str, Any]] = dict(payload.get("answers") or {})
        fresh: dict[str, Any] = {}
        for key, asked in (payload.get("asked") or {}).items():
            if responses is None or key not in responses:
                continue  # missing: the handler asks again
            result = responses[key]
            try:
                parser_for(SERVER_REQUEST_RESULTS[asked["method"]])(result)
            except ValueError:  # a pydantic ValidationError
                raise _bad_params(
                    f"inputResponses[{key!r}] is not a valid result of {asked['method']}"
                ) from None
            fresh[key] = result
            if asked.get("implicit"):
                answers[key] = {
                    "method": asked["method"],
                    "question": asked["question"],
                    "result": result,
                }
        return InputRound(
            method,
            client_capabilities,
            rounds_before=int(payload.get("round", 0)),
            answers=answers,
            input_responses=fresh,
            handler_state=payload.get("state"),
        )

    def run(
        self, current: InputRound, params: Mapping[str, Any] | None, call: Callable[[], Any]
    ) -> Any:
        """Run the handler (``call()``) in ``current`` and return what to answer.

        That is the handler's result, unless it asked for input: then the
        ``input_required`` result (a dict), or the -32021 error (raised) when the request's
        capabilities do not cover what it asked. An :class:`InputRequired` the handler returned
        is turned into an ``input_required`` result the same way.
        """
        try:
            result = call()
        except InputNeeded:
            result = None
        except Exception:
            if current.refusal is None and not current._pending():
                raise
            result = None  # a failure after a missing answer: asking for it comes first
        if isinstance(result, InputRequired):
            current._ask_explicitly(result)
            handler_state = result.state
        else:
            handler_state = None
        if current.refusal is not None:
            raise current.refusal
        pending = current._pending()
        if not pending and not isinstance(result, InputRequired):
            return result
        return self._input_required(current, params, pending, handler_state)

    def _input_required(
        self,
        current: InputRound,
        params: Mapping[str, Any] | None,
        pending: dict[str, dict[str, Any]],
        handler_state: Any,
    ) -> dict[str, Any]:
        if len(pending) > self.max_inputs:
            raise McpError(
                INTERNAL_ERROR,
                f"the handler asked for {len(pending)} inputs at once, more than {self.max_inputs}",
            )
        if current.rounds_before + 1 > self.max_rounds:
            raise McpError(
                INTERNAL_ERROR, f"the handler still needs input after {self.max_rounds} rounds"
            )
        payload: dict[str, Any] = {
            "format": _STATE_FORMAT,
            "round": current.rounds_before + 1,
            "answers": current._answers_to_keep(),
            "asked": {
                key: {
                    "method": entry["method"],
                    "question": entry["question"],
                    "implicit": entry["implicit"],
                }
                for key, entry in pending.items()
            },
        }
        if handler_state is not None:
            payload["state"] = handler_state
        try:
            state = self.sealer.seal(payload, method=current.method, params=params)
        except (TypeError, ValueError) as exc:  # PayloadTooLarge, or a state JSON cannot carry
            raise McpError(
                INTERNAL_ERROR, f"the request state could not be sealed: {exc}"
            ) from None
        return {
            "resultType": "input_required",
            "inputRequests": {
                key: {"method": entry["method"], "params": entry["params"]}
                for key, entry in pending.items()
            },
            "requestState": state,
        }


def serve(scope: RequestScope, call: Callable[[], Any]) -> Any:
    """Run the handler of a ``tools/call``, ``prompts/get`` or ``resources/read`` (``call()``)
    for the request of ``scope``, gathering the input it asks for; return what to answer.

    At 2026-07-28 (the request carries an envelope) the handler runs in an
    :class:`InputRound` of the server's :class:`InputRounds`: a missing answer is answered
    ``input_required``, a state that does not open is refused before the handler runs. On a
    2025-11-25 session the handler's requests to the client are real requests, and an
    :class:`InputRequired` it returns is fulfilled with real requests too: all of them at once,
    children of the handler's request; then the handler runs again with their answers.
    """
    request = scope.request
    assert request is not None, "run through dispatch: the scope of an inbound request"
    rounds: InputRounds = scope.session.server.input_rounds
    envelope = getattr(scope, "envelope", None)
    if envelope is not None:
        current = rounds.begin(request.method, request.params, envelope.client_capabilities)
        scope.input_round = current
        return rounds.run(current, request.params, call)
    return _serve_handshake_era(scope, rounds, call)


def _serve_handshake_era(scope: RequestScope, rounds: InputRounds, call: Callable[[], Any]) -> Any:
    request = scope.request
    assert request is not None
    capabilities = scope.session.peer_capabilities
    current = InputRound(request.method, capabilities, collects=False)
    for number in range(rounds.max_rounds + 1):
        scope.input_round = current
        result = call()
        if not isinstance(result, InputRequired):
            return result
        if number == rounds.max_rounds:
            break
        current._ask_explicitly(result)
        if current.refusal is not None:
            raise CapabilityError(current.refusal.message)
        asked = current.asked
        if len(asked) > rounds.max_inputs:
            raise McpError(
                INTERNAL_ERROR,
                f"the handler asked for {len(asked)} inputs at once, more than {rounds.max_inputs}",
            )
        pending = {
            key: scope.session.submit(
                entry["method"],
                dict(entry["params"]),
                related_request=request.id,
                cancel_token=scope.token,
            )
            for key, entry in asked.items()
        }
        answers = {key: call_.result() for key, call_ in pending.items()}
        current = InputRound(
            request.method,
            capabilities,
            rounds_before=number + 1,
            input_responses=answers,
            handler_state=result.state,
            collects=False,
        )
    raise McpError(
        INTERNAL_ERROR, f"the handler still needs input after {rounds.max_rounds} rounds"
    )
