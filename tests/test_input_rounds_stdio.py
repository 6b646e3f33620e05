"""Input rounds end to end over stdio: ``tests/peers/input_rounds_server.py`` driven by a raw
2026-07-28 JSON-lines client (every request carries its own envelope), judged on the wire.

Also: a state refused when tampered with, expired or sealed by a foreign key ring (the
handler does not run: its entry count stays), two server processes sharing one key ring
through ``MCP_SYNC_STATE_KEYS`` (round 1 on one, the retry on the other), and the same
handlers on a 2025-11-25 session, where the input is a real server->client request.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.paths import PEERS, PYTHON
from support.processes import Proc, user_env

from mcp_sync.request_state import generate_key

SERVER = [PYTHON, str(PEERS / "input_rounds_server.py")]
WAIT = 20.0
MODERN = "2026-07-28"
ALL_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ADA = {"action": "accept", "content": {"name": "Ada"}}


def envelope(caps: dict[str, Any]) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-lines", "version": "1"},
    }


class JsonLines:
    """A raw client on a server process's stdin/stdout; records every message both ways."""

    def __init__(self, proc: Proc) -> None:
        self.proc = proc
        self.ids = itertools.count(1)
        self.read = 0
        self.sent: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        self.proc.write_line(json.dumps(message).encode())

    def next_message(self) -> dict[str, Any]:
        message = json.loads(self.proc.line_at("stdout", self.read, WAIT))
        self.read += 1
        self.received.append(message)
        return message

    def answer_to(self, request_id: Any, on_request: Any = None) -> dict[str, Any]:
        """Read until the response to ``request_id``; a server request goes to ``on_request``."""
        while True:
            message = self.next_message()
            if "method" in message and "id" in message:
                assert on_request is not None, f"unexpected server request {message}"
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": on_request(message)})
            elif message.get("id") == request_id and ("result" in message or "error" in message):
                return message

    def request(
        self,
        method: str,
        params: dict[str, Any],
        caps: dict[str, Any] | None = ALL_CAPS,
        on_request: Any = None,
    ) -> dict[str, Any]:
        request_id = next(self.ids)
        params = dict(params)
        if caps is not None:
            params["_meta"] = envelope(caps)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return self.answer_to(request_id, on_request)

    def entries(self) -> dict[str, int]:
        reply = self.request("tools/call", {"name": "entries", "arguments": {}})
        return json.loads(reply["result"]["content"][0]["text"])  # type: ignore[no-any-return]


@contextmanager
def serving(**env: str) -> Iterator[JsonLines]:
    with Proc(SERVER, env=user_env(**env), stdin=True) as proc:
        yield JsonLines(proc)
        proc.close_stdin()
        assert proc.finish(WAIT).code == 0


def retry(
    params: dict[str, Any], answer: dict[str, Any], responses: dict[str, Any]
) -> dict[str, Any]:
    return {**params, "inputResponses": responses, "requestState": answer["result"]["requestState"]}


BOOK = {"name": "book", "arguments": {"room": "A1"}}


def no_server_requests(client: JsonLines) -> None:
    assert [m for m in client.received if "method" in m and "id" in m] == []


# -- the rounds on the wire ------------------------------------------------------------------------


def test_a_tool_asks_through_input_required_and_the_retry_completes():
    with serving() as client:
        first = client.request("tools/call", BOOK)
        result = first["result"]
        assert result["resultType"] == "input_required"
        assert result["inputRequests"] == {
            "elicit-1": {
                "method": "elicitation/create",
                "params": {"message": "Your name?", "requestedSchema": NAME_FORM},
            }
        }
        assert isinstance(result["requestState"], str)
        assert "content" not in result and "isError" not in result
        done = client.request("tools/call", retry(BOOK, first, {"elicit-1": ADA}))
        assert done["id"] != first["id"]
        assert done["result"]["content"] == [{"type": "text", "text": "A1 booked for Ada"}]
        assert done["result"].get("isError") is not True
        assert done["result"]["resultType"] == "complete"
        assert client.entries() == {"book": 2}
        no_server_requests(client)


def test_three_kinds_of_input_in_three_rounds():
    plan = {"name": "plan", "arguments": {"topic": "lunch"}}
    with serving() as client:
        one = client.request("tools/call", plan)
        assert list(one["result"]["inputRequests"]) == ["elicit-1"]
        two = client.request("tools/call", retry(plan, one, {"elicit-1": ADA}))
        assert two["result"]["inputRequests"] == {"roots-1": {"method": "roots/list", "params": {}}}
        three = client.request(
            "tools/call", retry(plan, two, {"roots-1": {"roots": [{"uri": "file:///srv"}]}})
        )
        ((key, sampling),) = three["result"]["inputRequests"].items()
        assert key == "sampling-1" and sampling["method"] == "sampling/createMessage"
        assert sampling["params"]["maxTokens"] == 20
        sample = {
            "role": "assistant",
            "content": {"type": "text", "text": "soup"},
            "model": "m",
            "stopReason": "endTurn",
        }
        done = client.request("tools/call", retry(plan, three, {"sampling-1": sample}))
        assert done["result"]["content"][0]["text"] == "Ada plans soup in file:///srv"
        assert client.entries() == {"plan": 4}


def test_a_missing_answer_is_asked_for_again():
    with serving() as client:
        first = client.request("tools/call", BOOK)
        again = client.request("tools/call", retry(BOOK, first, {"something-else": ADA}))
        assert again["result"]["resultType"] == "input_required"
        assert again["result"]["inputRequests"] == first["result"]["inputRequests"]


def test_the_explicit_form_round_trips_its_state():
    deploy = {"name": "deploy", "arguments": {"env": "prod"}}
    with serving() as client:
        first = client.request("tools/call", deploy)
        assert list(first["result"]["inputRequests"]) == ["confirm"]
        done = client.request("tools/call", retry(deploy, first, {"confirm": ADA}))
        assert done["result"]["content"][0]["text"] == "deployed to prod by Ada"


def test_prompts_and_resources_take_rounds_too():
    with serving() as client:
        prompt = {"name": "greeting", "arguments": {}}
        first = client.request("prompts/get", prompt)
        assert first["result"]["resultType"] == "input_required"
        done = client.request("prompts/get", retry(prompt, first, {"elicit-1": ADA}))
        assert done["result"]["messages"][0]["content"]["text"] == "Say hello to Ada"
        memo = {"uri": "memo://today"}
        first = client.request("resources/read", memo)
        assert first["result"]["resultType"] == "input_required"
        assert "ttlMs" not in first["result"]
        done = client.request("resources/read", retry(memo, first, {"elicit-1": ADA}))
        assert done["result"]["contents"][0]["text"] == "memo for Ada"


def test_except_exception_in_a_tool_does_not_turn_the_signal_into_a_tool_error():
    with serving() as client:
        first = client.request("tools/call", {"name": "careless", "arguments": {}})
        assert first["result"]["resultType"] == "input_required"
        assert "isError" not in first["result"]
        done = client.request(
            "tools/call", retry({"name": "careless", "arguments": {}}, first, {"elicit-1": ADA})
        )
        assert done["result"]["content"][0]["text"] == "hello Ada"


def test_input_the_request_does_not_declare_is_32021_naming_the_capability():
    with serving() as client:
        refused = client.request("tools/call", BOOK, caps={"sampling": {}})
        assert refused["error"]["code"] == -32021
        assert refused["error"]["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}
        # nothing is inferred from an earlier request: declaring it on the next one works
        assert client.request("tools/call", BOOK)["result"]["resultType"] == "input_required"
        refused = client.request(
            "tools/call", {"name": "plan", "arguments": {"topic": "t"}}, caps={}
        )
        assert refused["error"]["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}


# -- refused states --------------------------------------------------------------------------------


def _tamper(state: str) -> str:
    version, key_id, payload, signature = state.split(".")
    return ".".join(
        [version, key_id, payload, ("A" if signature[0] != "A" else "B") + signature[1:]]
    )


def test_a_tampered_state_is_refused_and_the_handler_does_not_run():
    with serving() as client:
        first = client.request("tools/call", BOOK)
        forged = retry(BOOK, first, {"elicit-1": ADA})
        forged["requestState"] = _tamper(forged["requestState"])
        refused = client.request("tools/call", forged)
        assert refused["error"]["code"] == -32602
        assert refused["error"]["data"]["reason"] == "bad_signature"
        other_room = retry({"name": "book", "arguments": {"room": "B2"}}, first, {"elicit-1": ADA})
        assert (
            client.request("tools/call", other_room)["error"]["data"]["reason"] == "params_mismatch"
        )
        assert client.entries() == {"book": 1}


@pytest.fixture
def shared_ring() -> str:
    return f"k1:{generate_key()}"


def test_two_processes_sharing_a_key_ring_serve_the_rounds_between_them(shared_ring):
    with (
        serving(MCP_SYNC_STATE_KEYS=shared_ring) as a,
        serving(MCP_SYNC_STATE_KEYS=shared_ring) as b,
    ):
        first = a.request("tools/call", BOOK)
        assert first["result"]["resultType"] == "input_required"
        done = b.request("tools/call", retry(BOOK, first, {"elicit-1": ADA}))
        assert done["result"]["content"][0]["text"] == "A1 booked for Ada"
        assert a.entries() == {"book": 1} and b.entries() == {"book": 1}


def test_a_process_with_another_ring_or_a_later_clock_refuses_the_state(shared_ring):
    with (
        serving(MCP_SYNC_STATE_KEYS=shared_ring) as a,
        serving(MCP_SYNC_STATE_KEYS=f"k2:{generate_key()}") as foreign,
        serving(MCP_SYNC_STATE_KEYS=shared_ring, INPUT_ROUNDS_CLOCK_SKEW="601") as later,
        serving() as ephemeral,
    ):
        first = a.request("tools/call", BOOK)
        answer = retry(BOOK, first, {"elicit-1": ADA})
        assert foreign.request("tools/call", answer)["error"]["data"]["reason"] == "unknown_key"
        assert ephemeral.request("tools/call", answer)["error"]["data"]["reason"] == "unknown_key"
        expired = later.request("tools/call", answer)
        assert (
            expired["error"]["code"] == -32602 and expired["error"]["data"]["reason"] == "expired"
        )
        assert foreign.entries() == {} and later.entries() == {} and ephemeral.entries() == {}


# -- the same handlers at 2025-11-25 ----------------------------------------------------------------


def _initialize(client: JsonLines, caps: dict[str, Any]) -> None:
    init = client.request(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": caps,
            "clientInfo": {"name": "raw-lines", "version": "1"},
        },
        caps=None,
    )
    assert init["result"]["protocolVersion"] == "2025-11-25"
    client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def test_on_a_2025_session_the_same_calls_are_real_requests_to_the_client():
    asked: list[dict[str, Any]] = []

    def answer(message: dict[str, Any]) -> dict[str, Any]:
        asked.append(message)
        return ADA

    with serving() as client:
        _initialize(client, ALL_CAPS)
        done = client.request("tools/call", BOOK, caps=None, on_request=answer)
        assert done["result"]["content"][0]["text"] == "A1 booked for Ada"
        assert [m["method"] for m in asked] == ["elicitation/create"]
        assert asked[0]["params"] == {"message": "Your name?", "requestedSchema": NAME_FORM}
        assert "resultType" not in done["result"]
        # the explicit form is fulfilled with real requests as well, then the tool runs again
        deployed = client.request(
            "tools/call",
            {"name": "deploy", "arguments": {"env": "dev"}},
            caps=None,
            on_request=answer,
        )
        assert deployed["result"]["content"][0]["text"] == "deployed to dev by Ada"
        assert [m["method"] for m in asked] == ["elicitation/create", "elicitation/create"]
        assert asked[1]["params"]["message"] == "Deploy to dev?"


def test_parallel_calls_each_get_their_own_rounds():
    """Twelve calls in flight at once on one connection, each retried with its own answer: no
    answer or state reaches another call (a state only opens for the params it was sealed for)."""
    rooms = [f"R{i}" for i in range(12)]

    def call(params: dict[str, Any], request_id: int) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {**params, "_meta": envelope(ALL_CAPS)},
        }

    def gather(client: JsonLines, ids: list[int]) -> dict[int, dict[str, Any]]:
        got: dict[int, dict[str, Any]] = {}
        while len(got) < len(ids):
            message = client.next_message()
            assert "method" not in message, message
            got[message["id"]] = message
        return got

    with serving() as client:
        params = {room: {"name": "book", "arguments": {"room": room}} for room in rooms}
        for n, room in enumerate(rooms):
            client.send(call(params[room], 100 + n))
        firsts = gather(client, [100 + n for n in range(len(rooms))])
        for n, room in enumerate(rooms):
            answer = {"elicit-1": {"action": "accept", "content": {"name": f"who-{room}"}}}
            client.send(call(retry(params[room], firsts[100 + n], answer), 200 + n))
        # one more retry: call 0's answer with call 1's state is refused
        client.send(call(retry(params[rooms[0]], firsts[101], {"elicit-1": ADA}), 300))
        done = gather(client, [200 + n for n in range(len(rooms))] + [300])
        for n, room in enumerate(rooms):
            assert done[200 + n]["result"]["content"][0]["text"] == f"{room} booked for who-{room}"
        assert done[300]["error"]["data"]["reason"] == "params_mismatch"
        assert client.entries() == {"book": 2 * len(rooms)}
