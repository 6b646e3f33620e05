"""2026-07-28 beside 2025-11-25 on a real stdio server process, judged on raw JSON lines.

The server is ``tests/peers/modern_server.py`` (an ordinary mcp_sync server, dual-era by
default). Each test writes requests as a 2026-07-28 client would (or a 2025 one) and reads
every line the server writes, so that what must *not* be written is checked too. A follow-up
request on a one-worker server orders the wire: once its answer is read, everything an earlier
request could still have produced would already have been written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.paths import PEERS, PYTHON
from support.processes import Proc

SERVER = PEERS / "modern_server.py"
MODERN = "2026-07-28"
LIMIT = 20.0
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
LEVEL = "io.modelcontextprotocol/logLevel"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def envelope(
    capabilities: dict | None = None, *, level: str | None = None, **extra: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        PV: MODERN,
        CAPS: capabilities or {},
        INFO: {"name": "raw-test", "version": "0.1"},
    }
    if level is not None:
        meta[LEVEL] = level
    meta.update(extra)
    return meta


class RawClient:
    """One connection to a server process: JSON lines in, every line out recorded."""

    def __init__(self, proc: Proc) -> None:
        self.proc = proc
        self.read = 0
        self.seen: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        self.proc.write_line(json.dumps({"jsonrpc": "2.0", **message}).encode())

    def next(self) -> dict[str, Any]:
        line = self.proc.line_at("stdout", self.read, LIMIT)
        self.read += 1
        message = json.loads(line)
        self.seen.append(message)
        return message

    def answer(self, request_id: Any) -> dict[str, Any]:
        """Read until the response to ``request_id``; return it."""
        while True:
            message = self.next()
            if "method" not in message and message.get("id") == request_id:
                return message

    def request(
        self, request_id: Any, method: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        self.send(
            {
                "id": request_id,
                "method": method,
                **({"params": params} if params is not None else {}),
            }
        )
        return self.answer(request_id)

    def modern(
        self, request_id: Any, method: str, params: dict[str, Any] | None = None, **meta: Any
    ) -> dict[str, Any]:
        """A 2026-07-28 request (the full envelope, ``meta`` merged into it)."""
        return self.request(request_id, method, {**(params or {}), "_meta": envelope(**meta)})

    def about(self, request_id: Any) -> list[dict[str, Any]]:
        """Everything read so far that concerns ``request_id``: its responses, and progress
        or log notifications (the server sends those only for requests in flight)."""
        return [m for m in self.seen if m.get("id") == request_id and "method" not in m]


@contextmanager
def connection(*args: str) -> Iterator[RawClient]:
    with Proc([PYTHON, str(SERVER), *args], stdin=True) as proc:
        proc.wait_for("stderr", "modern-probe starting", LIMIT)
        client = RawClient(proc)
        yield client
        proc.close_stdin()
        finished = proc.finish(LIMIT)
        assert finished.code == 0, finished.describe()


def result_of(message: dict[str, Any]) -> dict[str, Any]:
    assert "result" in message, message
    return message["result"]


def error_of(message: dict[str, Any]) -> dict[str, Any]:
    assert "error" in message, message
    return message["error"]


def text(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


def initialize(
    client: RawClient, request_id: Any = 0, capabilities: dict | None = None
) -> dict[str, Any]:
    answer = client.request(
        request_id,
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities or {},
            "clientInfo": {"name": "old", "version": "1"},
        },
    )
    client.send({"method": "notifications/initialized"})
    return result_of(answer)


# -- server/discover -----------------------------------------------------------------------------
def test_discover_names_both_eras_and_does_not_pin_the_connection():
    with connection() as c:
        found = result_of(c.modern(1, "server/discover"))
        assert found["supportedVersions"] == [
            MODERN,
            "2025-11-25",
            "2025-06-18",
            "2025-03-26",
            "2024-11-05",
        ]
        assert found["resultType"] == "complete"
        assert found["_meta"][SERVER_INFO] == {"name": "modern-probe", "version": "3.1.4"}
        assert found["instructions"] == "A probe server for the 2026-07-28 tests."
        assert (found["ttlMs"], found["cacheScope"]) == (60000, "public")
        capabilities = found["capabilities"]
        assert capabilities["extensions"] == {"io.example/probe": {"level": 1}}
        # change notifications are claimed: they travel on subscriptions/listen, which is served
        assert capabilities["tools"] == {"listChanged": True} and capabilities["prompts"] == {
            "listChanged": True
        }
        assert capabilities["resources"] == {"subscribe": True, "listChanged": True}
        assert "completions" in capabilities
        # the probe did not pin: a 2025 client goes on with initialize on the same connection
        init = initialize(c)
        assert init["protocolVersion"] == "2025-11-25" and "resultType" not in init
        assert result_of(c.request(2, "ping")) == {}
        listed = result_of(c.request(3, "tools/list"))
        assert "resultType" not in listed and "ttlMs" not in listed and "_meta" not in listed
        # ... and now the connection is a 2025 one: an enveloped request is refused
        assert error_of(c.modern(4, "tools/list"))["code"] == -32600


# -- the envelope ----------------------------------------------------------------------------------
def test_envelope_errors():
    with connection() as c:
        # half an envelope: -32602, before and after the connection was pinned
        no_caps = c.request(1, "tools/list", {"_meta": {PV: MODERN}})
        assert error_of(no_caps)["code"] == -32602
        no_version = c.request(2, "tools/list", {"_meta": {CAPS: {}}})
        assert error_of(no_version)["code"] == -32602
        unsupported = error_of(c.request(3, "tools/list", {"_meta": {PV: "2027-01-01", CAPS: {}}}))
        assert unsupported["code"] == -32022
        assert unsupported["data"] == {"supported": [MODERN], "requested": "2027-01-01"}
        bad_level = error_of(c.modern(4, "tools/list", level="verbose"))
        assert bad_level["code"] == -32602
        # a good request pins the connection to 2026-07-28
        assert result_of(c.modern(5, "tools/list"))["resultType"] == "complete"
        bare = error_of(c.request(6, "tools/list"))
        assert bare["code"] == -32602
        assert error_of(c.request(7, "tools/list", {"_meta": {PV: MODERN}}))["code"] == -32602
        # a client capability the request needs but does not declare: -32021, nothing asked
        undeclared = error_of(c.modern(8, "tools/call", {"name": "ask", "arguments": {}}))
        assert undeclared["code"] == -32021
        assert undeclared["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
        # declared: still no request to the client at 2026 (multi round-trip input answers it)
        declared = result_of(
            c.modern(
                9, "tools/call", {"name": "ask", "arguments": {}}, capabilities={"elicitation": {}}
            )
        )
        assert declared["resultType"] == "input_required" and list(declared["inputRequests"]) == [
            "elicit-1"
        ]
        assert result_of(
            c.modern(10, "tools/call", {"name": "echo", "arguments": {"text": "still"}})
        )["content"]
    # at 2026 the server wrote only responses: no request, no notification at all
    assert all("method" not in message for message in c.seen), c.seen


def test_removed_methods_and_initialize_after_the_pin():
    with connection() as c:
        # ping with an envelope is refused even before anything pinned the connection
        assert error_of(c.modern(1, "ping"))["code"] == -32601
        assert result_of(c.modern(2, "tools/list"))["tools"]
        for n, method in enumerate(
            ["ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"], 3
        ):
            params = (
                {"level": "info"} if method == "logging/setLevel" else {"uri": "mem://greeting"}
            )
            assert error_of(c.modern(n, method, params))["code"] == -32601, method
        refused = error_of(
            c.request(
                10,
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "x", "version": "1"},
                },
            )
        )
        assert refused["code"] == -32022 and refused["data"]["supported"] == [MODERN]
        assert refused["data"]["requested"] == "2025-11-25"
        assert (
            result_of(c.modern(11, "tools/call", {"name": "echo", "arguments": {"text": "ok"}}))[
                "resultType"
            ]
            == "complete"
        )


# -- resultType, serverInfo and the caching hints everywhere -------------------------------------
def test_every_result_says_what_it_is():
    with connection() as c:
        calls = [
            ("tools/list", {}, True),
            ("tools/call", {"name": "echo", "arguments": {"text": "x"}}, False),
            ("resources/list", {}, True),
            ("resources/templates/list", {}, True),
            ("resources/read", {"uri": "mem://greeting"}, True),
            ("resources/read", {"uri": "mem://items/a"}, True),
            ("prompts/list", {}, True),
            ("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}}, False),
            (
                "completion/complete",
                {
                    "ref": {"type": "ref/prompt", "name": "greet"},
                    "argument": {"name": "name", "value": "A"},
                },
                False,
            ),
            ("server/discover", {}, True),
        ]
        for n, (method, params, cacheable) in enumerate(calls, 1):
            result = result_of(c.modern(n, method, params))
            assert result["resultType"] == "complete", (method, result)
            assert result["_meta"][SERVER_INFO] == {"name": "modern-probe", "version": "3.1.4"}, (
                method
            )
            if cacheable:
                assert (result["ttlMs"], result["cacheScope"]) == (60000, "public"), method
            else:
                assert "ttlMs" not in result and "cacheScope" not in result, method
        assert (
            result_of(c.modern(20, "resources/read", {"uri": "mem://items/b"}))["contents"][0][
                "text"
            ]
            == "item b"
        )
        # an error carries none of it
        missing = c.modern(21, "resources/read", {"uri": "mem://nothing"})
        assert "result" not in missing and "resultType" not in missing["error"]


# -- the request's own context -------------------------------------------------------------------
def test_each_request_is_judged_by_its_own_envelope():
    with connection() as c:
        first = result_of(
            c.modern(
                1,
                "tools/call",
                {"name": "whoami", "arguments": {}},
                capabilities={"elicitation": {"form": {}}},
                level="info",
            )
        )
        second = result_of(c.modern(2, "tools/call", {"name": "whoami", "arguments": {}}))
    one, two = first["structuredContent"], second["structuredContent"]
    assert one == {
        "protocolVersion": MODERN,
        "era": "modern",
        "clientCapabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "raw-test", "version": "0.1"},
        "logLevel": "info",
        "sessionPeerCapabilities": {"elicitation": {"form": {}}},
        "sessionProtocolVersion": MODERN,
        "sessionSupportsElicitation": True,
    }
    # nothing carried over from the first request
    assert two["clientCapabilities"] == {} and two["sessionPeerCapabilities"] == {}
    assert two["logLevel"] is None and two["sessionSupportsElicitation"] is False


# -- log messages --------------------------------------------------------------------------------
def test_log_messages_only_when_the_request_asks_and_at_or_above_its_level():
    with connection() as c:
        quiet = result_of(c.modern(1, "tools/call", {"name": "chatty", "arguments": {}}))
        assert quiet["structuredContent"] == {"result": 0}
        loud = result_of(
            c.modern(2, "tools/call", {"name": "chatty", "arguments": {}}, level="error")
        )
        assert loud["structuredContent"] == {"result": 4}
    logs = [m for m in c.seen if m.get("method") == "notifications/message"]
    assert [m["params"]["level"] for m in logs] == ["error", "critical", "alert", "emergency"]
    # each came before its request's answer
    assert c.seen.index(logs[-1]) < next(i for i, m in enumerate(c.seen) if m.get("id") == 2)


# -- cancellation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("with_envelope", [False, True], ids=["bare", "enveloped"])
def test_a_cancelled_request_gets_nothing_more_not_even_progress_or_log(with_envelope):
    with connection("--workers", "1") as c:
        c.send(
            {
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": "stubborn",
                    "arguments": {"tag": "a"},
                    "_meta": envelope(level="debug", progressToken="p1"),
                },
            }
        )
        c.proc.wait_for("stderr", "STARTED stubborn a", LIMIT)
        cancel: dict[str, Any] = {"requestId": 1, "reason": "enough"}
        if with_envelope:
            cancel["_meta"] = envelope()
        c.send({"method": "notifications/cancelled", "params": cancel})
        finished = c.proc.wait_for("stderr", "FINISHED stubborn a", LIMIT)
        assert "progress=False log=False" in finished
        # one worker: this runs only after the stubborn request's handling has ended
        assert (
            text(
                result_of(
                    c.modern(2, "tools/call", {"name": "echo", "arguments": {"text": "after"}})
                )
            )
            == "after"
        )
    assert c.seen == [c.seen[-1]], c.seen  # the echo's answer is the only line ever written
    # cancels for an unknown id, a finished one, or without requestId are ignored silently
    with connection("--workers", "1") as c:
        c.modern(1, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
        for params in (
            {"requestId": 1},
            {"requestId": 99},
            {"reason": "no id"},
            {"requestId": None},
        ):
            c.send({"method": "notifications/cancelled", "params": params})
        assert (
            text(result_of(c.modern(2, "tools/call", {"name": "echo", "arguments": {"text": "y"}})))
            == "y"
        )
    assert [m["id"] for m in c.seen] == [1, 2]


def test_a_cooperative_handler_stops_and_the_connection_goes_on():
    with connection() as c:
        c.send(
            {
                "id": "s",
                "method": "tools/call",
                "params": {
                    "name": "slow",
                    "arguments": {"seconds": 30, "tag": "b"},
                    "_meta": envelope(),
                },
            }
        )
        c.proc.wait_for("stderr", "STARTED slow b", LIMIT)
        c.send({"method": "notifications/cancelled", "params": {"requestId": "s"}})
        c.proc.wait_for("stderr", "CANCELLED slow b", LIMIT)
        assert (
            text(
                result_of(
                    c.modern("e", "tools/call", {"name": "echo", "arguments": {"text": "next"}})
                )
            )
            == "next"
        )
    assert c.about("s") == []


# -- 2025 on its own connection, as before -----------------------------------------------------------
def test_2025_connection_is_served_as_before():
    with connection() as c:
        init = initialize(c, capabilities={"elicitation": {}})
        assert init["protocolVersion"] == "2025-11-25"
        assert init["capabilities"]["tools"] == {"listChanged": True}
        assert init["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}
        assert init["serverInfo"] == {"name": "modern-probe", "version": "3.1.4"}
        assert "_meta" not in init and "resultType" not in init
        assert result_of(c.request(1, "ping")) == {}
        assert result_of(c.request(2, "logging/setLevel", {"level": "warning"})) == {}
        called = result_of(c.request(3, "tools/call", {"name": "chatty", "arguments": {}}))
        assert called["structuredContent"] == {"result": 5} and "resultType" not in called
        who = result_of(c.request(4, "tools/call", {"name": "whoami", "arguments": {}}))[
            "structuredContent"
        ]
        assert who["era"] == "handshake" and who["protocolVersion"] == "2025-11-25"
        assert who["clientCapabilities"] == {"elicitation": {}} and who["logLevel"] == "warning"
        assert result_of(c.request(5, "resources/subscribe", {"uri": "mem://greeting"})) == {}
        # a server->client request is still a real request on a 2025 session
        c.send({"id": 6, "method": "tools/call", "params": {"name": "ask", "arguments": {}}})
        asked = c.next()
        assert asked["method"] == "elicitation/create" and "id" in asked
        c.send({"id": asked["id"], "result": {"action": "accept", "content": {"name": "Ada"}}})
        assert text(result_of(c.answer(6))) == "accept:Ada"
        refused = c.request(
            7,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"},
            },
        )
        assert error_of(refused)["code"] == -32600
    logs = [m["params"]["level"] for m in c.seen if m.get("method") == "notifications/message"]
    assert logs == ["warning", "error", "critical", "alert", "emergency"]
