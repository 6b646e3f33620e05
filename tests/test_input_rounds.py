"""Input rounds without a connection: InputRounds.begin/run fed requests by hand, the way a
2026-07-28 client sends them (first request, then retries with inputResponses + requestState)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcp_sync.errors import (
    InputNeeded,
    McpError,
    RequestStateError,
    StateExpired,
    StateKeyUnknown,
    StateMismatch,
    StateReplayed,
    StateTampered,
)
from mcp_sync.request_state import KeyRing, MemoryReplayGuard, StateSealer
from mcp_sync.server.input_rounds import (
    MAX_ROUNDS,
    InputRequired,
    InputRound,
    InputRounds,
    required_capability,
)

ALL_CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}}
FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
PARAMS = {"name": "greet", "arguments": {"who": "x"}}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make_rounds(
    ring: KeyRing | None = None, clock: Clock | None = None, **options: Any
) -> InputRounds:
    sealer = StateSealer(ring or KeyRing.ephemeral(), ttl=60, clock=clock or Clock())
    return InputRounds(sealer, **options)


def elicit_params(message: str = "Your name?") -> dict[str, Any]:
    return {"mode": "form", "message": message, "requestedSchema": FORM}


class Handler:
    """A handler run by InputRounds.run; counts its entries."""

    def __init__(self, body: Callable[[InputRound], Any]) -> None:
        self.body = body
        self.entries = 0

    def serve(
        self,
        rounds: InputRounds,
        params: dict[str, Any],
        caps: dict[str, Any] = ALL_CAPS,
        method: str = "tools/call",
    ) -> Any:
        current = rounds.begin(method, params, caps)

        def call() -> Any:
            self.entries += 1
            return self.body(current)

        return rounds.run(current, params, call)


def retry(
    params: dict[str, Any], answer: dict[str, Any], responses: dict[str, Any]
) -> dict[str, Any]:
    """The client's retry of ``params`` after the input_required ``answer``."""
    again = {
        key: value for key, value in params.items() if key not in ("inputResponses", "requestState")
    }
    again["inputResponses"] = responses
    again["requestState"] = answer["requestState"]
    return again


def ask_name(current: InputRound) -> str:
    result = current.ask("elicitation/create", elicit_params())
    return f"hello {result.content['name']}" if result.action == "accept" else "declined"


ACCEPT_ADA = {"action": "accept", "content": {"name": "Ada"}}


# -- the implicit form -------------------------------------------------------------------------


def test_a_missing_answer_is_asked_for_and_the_retry_returns_it():
    rounds, handler = make_rounds(), Handler(ask_name)
    first = handler.serve(rounds, PARAMS)
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {
        "elicit-1": {"method": "elicitation/create", "params": elicit_params()}
    }
    assert isinstance(first["requestState"], str) and first["requestState"].startswith("v1.")
    assert handler.entries == 1
    assert handler.serve(rounds, retry(PARAMS, first, {"elicit-1": ACCEPT_ADA})) == "hello Ada"
    assert handler.entries == 2  # run again from the top


def test_answers_accumulate_over_rounds_and_keys_count_per_kind():
    seen: list[Any] = []

    def body(current: InputRound) -> str:
        name = current.ask("elicitation/create", elicit_params())
        roots = current.ask("roots/list", {})
        colour = current.ask("elicitation/create", elicit_params("Colour?"))
        seen.append((name.content, [str(r.uri) for r in roots.roots], colour.content))
        return "done"

    rounds, handler = make_rounds(), Handler(body)
    one = handler.serve(rounds, PARAMS)
    assert list(one["inputRequests"]) == ["elicit-1"]
    two = handler.serve(rounds, retry(PARAMS, one, {"elicit-1": ACCEPT_ADA}))
    assert two["inputRequests"] == {"roots-1": {"method": "roots/list", "params": {}}}
    three = handler.serve(
        rounds, retry(PARAMS, two, {"roots-1": {"roots": [{"uri": "file:///w"}]}})
    )
    assert list(three["inputRequests"]) == ["elicit-2"]
    # the answers of earlier rounds travel in the state: this retry only carries the new one
    done = handler.serve(
        rounds, retry(PARAMS, three, {"elicit-2": {"action": "accept", "content": {"name": "red"}}})
    )
    assert done == "done"
    assert seen == [({"name": "Ada"}, ["file:///w"], {"name": "red"})]
    assert handler.entries == 4


def test_a_missing_answer_is_asked_again_with_the_same_key():
    rounds, handler = make_rounds(), Handler(ask_name)
    first = handler.serve(rounds, PARAMS)
    again = handler.serve(rounds, retry(PARAMS, first, {}))
    assert again["inputRequests"] == first["inputRequests"]
    assert again["requestState"] != first["requestState"]
    assert handler.serve(rounds, retry(PARAMS, again, {"elicit-1": ACCEPT_ADA})) == "hello Ada"


def test_unexpected_keys_are_ignored_and_answers_without_a_state_are_not_trusted():
    rounds, handler = make_rounds(), Handler(ask_name)
    # a first request claiming answers: nothing was asked, so they are ignored
    forged = dict(PARAMS, inputResponses={"elicit-1": ACCEPT_ADA})
    assert handler.serve(rounds, forged)["resultType"] == "input_required"
    first = handler.serve(rounds, PARAMS)
    reply = handler.serve(
        rounds, retry(PARAMS, first, {"elicit-1": ACCEPT_ADA, "elicit-7": ACCEPT_ADA, "x": 1})
    )
    assert reply == "hello Ada"


def test_an_answer_is_reused_only_for_the_same_question():
    messages = iter(["Your name?", "Your full name?"])

    def body(current: InputRound) -> str:
        return str(current.ask("elicitation/create", elicit_params(next(messages))).content)

    rounds, handler = make_rounds(), Handler(body)
    first = handler.serve(rounds, PARAMS)
    second = handler.serve(rounds, retry(PARAMS, first, {"elicit-1": ACCEPT_ADA}))
    assert second["resultType"] == "input_required"
    assert second["inputRequests"]["elicit-1"]["params"]["message"] == "Your full name?"


def test_a_handler_that_swallows_the_signal_still_gets_input_required_answered():
    def body(current: InputRound) -> str:
        try:
            current.ask("sampling/createMessage", {"messages": [], "maxTokens": 5})
        except BaseException:  # noqa: BLE001 - what careless handler code does
            return "swallowed"
        return "answered"

    first = Handler(body).serve(make_rounds(), PARAMS)
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["sampling-1"]


def test_except_exception_in_handler_code_does_not_catch_the_signal():
    caught: list[BaseException] = []

    def body(current: InputRound) -> str:
        try:
            current.ask("roots/list", {})
        except Exception as exc:  # noqa: BLE001
            caught.append(exc)
        return "went on"

    assert Handler(body).serve(make_rounds(), PARAMS)["resultType"] == "input_required"
    assert caught == []
    assert issubclass(InputNeeded, BaseException) and not issubclass(InputNeeded, Exception)


def test_a_failure_after_a_missing_answer_still_asks_for_it():
    def body(current: InputRound) -> str:
        try:
            current.ask("roots/list", {})
        except BaseException:  # noqa: BLE001
            pass
        raise RuntimeError("no roots")

    assert Handler(body).serve(make_rounds(), PARAMS)["resultType"] == "input_required"


def test_a_failure_without_missing_input_propagates():
    def body(current: InputRound) -> str:
        raise McpError(-32602, "bad")

    with pytest.raises(McpError, match="bad"):
        Handler(body).serve(make_rounds(), PARAMS)


def test_an_answer_that_does_not_parse_is_invalid_params_and_the_handler_does_not_run():
    rounds, handler = make_rounds(), Handler(ask_name)
    first = handler.serve(rounds, PARAMS)
    with pytest.raises(McpError) as info:
        handler.serve(rounds, retry(PARAMS, first, {"elicit-1": {"action": "maybe"}}))
    assert info.value.code == -32602 and "elicit-1" in info.value.message
    with pytest.raises(McpError, match="inputResponses must be an object"):
        handler.serve(rounds, dict(retry(PARAMS, first, {}), inputResponses=[1]))
    assert handler.entries == 1


# -- the sealed state ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spoil, error",
    [
        (lambda s: s[:-2] + ("AA" if not s.endswith("AA") else "BB"), StateTampered),
        (lambda s: s.replace(".", ".x", 1), RequestStateError),
        (lambda s: 17, RequestStateError),
    ],
    ids=["bad-signature", "malformed", "not-a-string"],
)
def test_a_tampered_state_is_refused_before_the_handler_runs(spoil, error):
    rounds, handler = make_rounds(), Handler(ask_name)
    first = handler.serve(rounds, PARAMS)
    bad = retry(PARAMS, first, {"elicit-1": ACCEPT_ADA})
    bad["requestState"] = spoil(bad["requestState"])
    with pytest.raises(error) as info:
        handler.serve(rounds, bad)
    assert info.value.code == -32602
    assert handler.entries == 1


def test_an_expired_state_is_refused():
    clock = Clock()
    rounds, handler = make_rounds(clock=clock), Handler(ask_name)
    first = handler.serve(rounds, PARAMS)
    clock.now += 61
    with pytest.raises(StateExpired):
        handler.serve(rounds, retry(PARAMS, first, {"elicit-1": ACCEPT_ADA}))
    assert handler.entries == 1


def test_a_state_from_another_key_ring_is_refused_and_a_shared_ring_opens_it():
    ring = KeyRing.from_string("k1:" + "A" * 43)
    issuer, handler = make_rounds(ring), Handler(ask_name)
    first = handler.serve(issuer, PARAMS)
    with pytest.raises(StateKeyUnknown):
        handler.serve(make_rounds(), retry(PARAMS, first, {"elicit-1": ACCEPT_ADA}))
    with pytest.raises(StateTampered):  # same key id, another secret
        handler.serve(
            make_rounds(KeyRing.from_string("k1:" + "B" * 43)),
            retry(PARAMS, first, {"elicit-1": ACCEPT_ADA}),
        )
    assert handler.entries == 1
    other_process = make_rounds(KeyRing.from_string("k1:" + "A" * 43))
    assert (
        handler.serve(other_process, retry(PARAMS, first, {"elicit-1": ACCEPT_ADA})) == "hello Ada"
    )


def test_a_state_is_bound_to_the_method_and_the_params():
    rounds, handler = make_rounds(), Handler(ask_name)
    first = handler.serve(rounds, PARAMS)
    other_args = retry(dict(PARAMS, arguments={"who": "y"}), first, {"elicit-1": ACCEPT_ADA})
    with pytest.raises(StateMismatch, match="params"):
        handler.serve(rounds, other_args)
    with pytest.raises(StateMismatch, match="method"):
        handler.serve(rounds, retry(PARAMS, first, {"elicit-1": ACCEPT_ADA}), method="prompts/get")
    assert handler.entries == 1


def test_a_state_sealed_for_something_else_is_refused():
    sealer = StateSealer(KeyRing.ephemeral())
    rounds, handler = InputRounds(sealer), Handler(ask_name)
    params = dict(PARAMS, requestState=sealer.seal({"step": 2}, method="tools/call", params=PARAMS))
    with pytest.raises(McpError, match="not issued for input rounds") as info:
        handler.serve(rounds, params)
    assert info.value.code == -32602 and handler.entries == 0


# -- capabilities -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, params, caps, required",
    [
        ("elicitation/create", elicit_params(), {}, {"elicitation": {"form": {}}}),
        (
            "elicitation/create",
            elicit_params(),
            {"elicitation": {"url": {}}},
            {"elicitation": {"form": {}}},
        ),
        (
            "elicitation/create",
            {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e"},
            {"elicitation": {}},
            {"elicitation": {"url": {}}},
        ),
        (
            "sampling/createMessage",
            {"messages": [], "maxTokens": 5},
            {"roots": {}},
            {"sampling": {}},
        ),
        (
            "sampling/createMessage",
            {"messages": [], "maxTokens": 5, "tools": []},
            {"sampling": {}},
            {"sampling": {"tools": {}}},
        ),
        ("roots/list", {}, {"sampling": {}}, {"roots": {}}),
    ],
)
def test_undeclared_input_is_answered_with_32021_naming_the_capability(
    method, params, caps, required
):
    def body(current: InputRound) -> str:
        try:
            current.ask(method, params)
        except Exception:  # noqa: BLE001
            return "fallback"
        return "unreachable"

    with pytest.raises(McpError) as info:
        Handler(body).serve(make_rounds(), PARAMS, caps)
    assert info.value.code == -32021
    assert info.value.data == {"requiredCapabilities": required}
    assert required_capability(method, params) == required


@pytest.mark.parametrize(
    "caps",
    [{"elicitation": {}}, {"elicitation": {"form": {}}}, {"elicitation": {"form": {}, "url": {}}}],
    ids=["implicit-form", "form", "both"],
)
def test_form_elicitation_is_declared_explicitly_or_implicitly(caps):
    first = Handler(ask_name).serve(make_rounds(), PARAMS, caps)
    assert first["resultType"] == "input_required"


# -- the explicit form ---------------------------------------------------------------------------


def test_an_explicit_input_required_round_trips_the_handlers_state_and_answers():
    seen: list[tuple[Any, Any]] = []

    def body(current: InputRound) -> Any:
        seen.append((dict(current.input_responses), current.handler_state))
        if "login" not in current.input_responses:
            return InputRequired(
                {"login": {"method": "elicitation/create", "params": elicit_params("Login?")}},
                state={"step": 1},
            )
        return f"logged in as {current.input_responses['login']['content']['name']}"

    rounds, handler = make_rounds(), Handler(body)
    first = handler.serve(rounds, PARAMS)
    assert first["inputRequests"] == {
        "login": {"method": "elicitation/create", "params": elicit_params("Login?")}
    }
    done = handler.serve(rounds, retry(PARAMS, first, {"login": ACCEPT_ADA, "other": {"x": 1}}))
    assert done == "logged in as Ada"
    assert seen == [({}, None), ({"login": ACCEPT_ADA}, {"step": 1})]


def test_an_explicit_state_only_answer_carries_a_state_and_no_requests():
    def body(current: InputRound) -> Any:
        return "ready" if current.handler_state == "later" else InputRequired(state="later")

    rounds, handler = make_rounds(), Handler(body)
    first = handler.serve(rounds, PARAMS)
    assert first["inputRequests"] == {} and first["requestState"]
    assert handler.serve(rounds, retry(PARAMS, first, {})) == "ready"


def test_explicit_input_for_an_undeclared_capability_is_32021():
    def body(current: InputRound) -> Any:
        return InputRequired({"r": {"method": "roots/list", "params": {}}})

    with pytest.raises(McpError) as info:
        Handler(body).serve(make_rounds(), PARAMS, {"elicitation": {}})
    assert info.value.code == -32021 and info.value.data == {"requiredCapabilities": {"roots": {}}}


@pytest.mark.parametrize(
    "requests",
    [
        {"": {"method": "roots/list"}},
        {"k": {"method": "ping"}},
        {"k": {"method": "roots/list", "params": []}},
        {"k": "roots/list"},
        {"roots-1": {"method": "roots/list"}},
    ],
)
def test_a_malformed_explicit_request_is_a_server_bug(requests):
    with pytest.raises(ValueError):
        Handler(lambda current: InputRequired(requests)).serve(make_rounds(), PARAMS)


# -- bounds -----------------------------------------------------------------------------------


def test_more_inputs_in_one_round_than_the_bound_fail_with_32603():
    many = {f"k{i}": {"method": "roots/list", "params": {}} for i in range(4)}
    with pytest.raises(McpError) as info:
        Handler(lambda current: InputRequired(many)).serve(make_rounds(max_inputs=3), PARAMS)
    assert info.value.code == -32603


def test_more_rounds_than_the_bound_fail_with_32603():
    rounds, handler = (
        make_rounds(max_rounds=2),
        Handler(lambda current: InputRequired(state=current.rounds_before)),
    )
    params: dict[str, Any] = PARAMS
    for _ in range(2):
        params = retry(PARAMS, handler.serve(rounds, params), {})
    with pytest.raises(McpError) as info:
        handler.serve(rounds, params)
    assert info.value.code == -32603 and "2 rounds" in info.value.message
    assert MAX_ROUNDS >= 8


def test_only_the_three_input_methods_take_rounds():
    with pytest.raises(ValueError):
        make_rounds().begin("tools/list", {}, ALL_CAPS)


def test_with_a_replay_guard_a_retry_opens_its_state_once():
    sealer = StateSealer(KeyRing.ephemeral(), replay_guard=MemoryReplayGuard())
    rounds, handler = InputRounds(sealer), Handler(ask_name)
    first = handler.serve(rounds, PARAMS)
    answer = retry(PARAMS, first, {"elicit-1": ACCEPT_ADA})
    assert handler.serve(rounds, answer) == "hello Ada"
    with pytest.raises(StateReplayed):
        handler.serve(rounds, answer)
    assert handler.entries == 2
