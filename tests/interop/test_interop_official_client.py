"""The official ``mcp`` SDK's client against an mcp_sync server (``tests/peers/sync_server.py``).

The official client CLI (``tests/peers/official_client.py``) runs one script of steps in one session
and prints what happened, including its capture of the whole wire. Two runs are made, in
parallel, once per module: the default mode (the client probes ``server/discover`` first; our
dual-era server answers it, and the whole session speaks 2026-07-28) and ``--legacy`` mode
(plain ``initialize``, 2025-11-25). Every test judges one aspect of both runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.interop import SYNC_SERVER, OfficialClientRun, read_events, wait_for_marker
from support.messages import responses_to

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

MODES = ["auto", "legacy"]

STEPS: list[dict[str, Any]] = [
    {"label": "list", "op": "list"},
    {"label": "echo", "op": "call", "args": ["echo", {"text": "héllo ✓"}]},
    {"label": "add", "op": "call", "args": ["add", {"a": 2, "b": 40}]},
    {"label": "bad-args", "op": "call", "args": ["add", {"a": "two", "b": 40}]},
    {
        "label": "declared",
        "op": "call",
        "args": ["place", {"at": {"x": 1, "y": 2.5}, "label": "home"}],
    },
    {
        "label": "declared-bad",
        "op": "call",
        "args": ["place", {"at": {"x": 1, "y": 2, "z": 3}, "colour": "red"}],
    },
    {
        "label": "progress",
        "op": "call",
        "args": ["slow", {"seconds": 0.3, "steps": 3, "tag": "progress"}],
        "progress": True,
    },
    {"label": "ping", "op": "ping"},
    {"label": "resources", "op": "resources"},
    {"label": "read-static", "op": "read", "args": ["memo://readme"]},
    {"label": "read-template", "op": "read", "args": ["memo://notes/zed"]},
    {"label": "read-missing", "op": "read", "args": ["memo://nowhere"]},
    {"label": "prompts", "op": "prompts"},
    {"label": "prompt", "op": "prompt", "args": ["greet", {"name": "Bob", "style": "pirate"}]},
    {
        "label": "complete-prompt",
        "op": "complete",
        "args": [{"type": "ref/prompt", "name": "greet"}, "style", "p"],
    },
    {
        "label": "complete-template",
        "op": "complete",
        "args": [{"type": "ref/resource", "uri": "memo://notes/{name}"}, "name", "al"],
    },
    {"label": "roots", "op": "call", "args": ["ask_roots", {}]},
    {"label": "sampling", "op": "call", "args": ["ask_sample", {"prompt": "write a haiku"}]},
    {"label": "elicitation", "op": "call", "args": ["ask_elicit", {"message": "Your name?"}]},
    {
        "label": "elicitation-url",
        "op": "call",
        "args": ["ask_elicit_url", {"url": "https://example.com/auth"}],
    },
    # the official client's second roots/list callback sleeps 5 s (--roots-delays 0,5);
    # our tool gives up after 0.5 s and cancels its request
    {"label": "roots-timeout", "op": "call", "args": ["ask_roots_timeout", {"timeout": 0.5}]},
    {
        "label": "cancel",
        "op": "cancel",
        "args": ["slow", {"seconds": 20, "steps": 100, "tag": "cancel"}],
        "cancel_after": 5,
        "grace": 0.3,
    },
    {
        "label": "timeout",
        "op": "timeout",
        "args": ["slow", {"seconds": 20, "steps": 100, "tag": "timeout"}, 0.5],
        "grace": 0.3,
    },
    {
        "label": "after",
        "op": "call",
        "args": ["slow", {"seconds": 0.01, "steps": 1, "tag": "after"}],
    },
]
NEXT_MARKER = {"cancel": "STARTED slow timeout", "timeout": "STARTED slow after"}
"""For a cancelled step, a marker written by the step after it: our handler must have stopped
(its CANCELLED marker written) before the next step began, not merely when the session closed.
The peer runs slow calls one at a time (``SLOW_ONE_AT_A_TIME``), so the next step's marker
cannot race the cancelled handler's from another worker; a handler that did not stop would
write FINISHED only after its 20 s, and the next step's marker would follow that."""

ROOTS = "file:///tmp/interop-r1,file:///tmp/interop-r2"


@dataclass
class Run:
    mode: str
    out: dict[str, Any]
    events: Path
    stderr: str

    def step(self, label: str) -> dict[str, Any]:
        found = [
            s for s, spec in zip(self.out["steps"], STEPS, strict=False) if spec["label"] == label
        ]
        assert len(found) == 1, label
        return found[0]

    def ok_step(self, label: str) -> dict[str, Any]:
        step = self.step(label)
        assert step.get("ok"), f"step {label!r} failed in {self.mode} mode: {step.get('error')}"
        return step

    @property
    def wire(self) -> list[dict[str, Any]]:
        return self.out["wire"]

    def sent(self) -> list[dict[str, Any]]:
        """What the official client sent to our server."""
        return [w["msg"] for w in self.wire if w["dir"] == ">>"]

    def received(self) -> list[dict[str, Any]]:
        """What our server sent to the official client."""
        return [w["msg"] for w in self.wire if w["dir"] == "<<"]


def text_of(step: dict[str, Any]) -> str:
    return step["result"]["content"][0]["text"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    started: dict[str, tuple[OfficialClientRun, Path]] = {}
    try:
        for mode in MODES:  # both runs at once: each pays the SDK's start-up cost
            events = tmp_path_factory.mktemp(f"sync-server-{mode}") / "events.txt"
            args = [
                "--mode", mode,
                "--roots", ROOTS,
                "--roots-delays", "0,5",
                "--sampling-text", "sampled by the official client",
                "--elicit-json", json.dumps({"name": "Ada"}),
                "script", json.dumps(STEPS),
            ]  # fmt: skip
            started[mode] = (
                OfficialClientRun(args, SYNC_SERVER, env={"PEER_EVENTS_FILE": str(events)}),
                events,
            )
        results = {}
        for mode, (run, events) in started.items():
            out = run.result()
            results[mode] = Run(mode, out, events, run.stderr or "")
        yield results
    finally:
        for run, _ in started.values():
            run.kill()


@pytest.fixture(params=MODES)
def run(request: pytest.FixtureRequest, runs: dict[str, Run]) -> Run:
    result = runs[request.param]
    assert "error" not in result.out, (
        f"the official client failed in {request.param} mode: {result.out['error']}"
    )
    return result


# -- handshake ---------------------------------------------------------------------------------------
def test_handshake(run: Run) -> None:
    assert run.out["serverInfo"] == {"name": "mcp-sync-peer", "version": "0.1.0-peer"}
    assert {"tools", "resources", "prompts", "completions", "logging"} <= set(
        run.out["serverCapabilities"]
    )
    sent, received = run.sent(), run.received()
    if run.mode == "auto":
        # the probe is answered: the session speaks 2026-07-28, without initialize
        assert run.out["protocolVersion"] == "2026-07-28"
        probe = sent[0]
        assert probe["method"] == "server/discover"
        discovered = responses_to(received, probe["id"])[0]["result"]
        assert discovered["supportedVersions"][:2] == ["2026-07-28", "2025-11-25"]
        assert discovered["resultType"] == "complete"
        assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"] == run.out["serverInfo"]
        requests = [m for m in sent if "id" in m and "method" in m]
        assert not [m for m in requests if m["method"] == "initialize"]
        for message in requests:
            assert (
                message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
                == "2026-07-28"
            ), message
        for message in received:  # only responses and request-scoped notifications
            assert message.get("method") in (None, "notifications/progress"), (
                f"unexpected at 2026-07-28: {message}"
            )
        return
    assert run.out["protocolVersion"] == "2025-11-25"
    assert not [m for m in sent if m.get("method") == "server/discover"]
    initialize = sent[0]
    assert initialize["method"] == "initialize"
    assert initialize["params"]["protocolVersion"] == "2025-11-25"
    assert responses_to(received, initialize["id"])[0]["result"]["protocolVersion"] == "2025-11-25"
    assert sent[1] == {"jsonrpc": "2.0", "method": "notifications/initialized"}


def test_no_server_errors(run: Run) -> None:
    """Our server logged no traceback (its stderr goes to the official client's stderr)."""
    assert "Traceback" not in run.stderr, run.stderr
    failed = [
        spec["label"]
        for spec, step in zip(STEPS, run.out["steps"], strict=False)
        if not step.get("ok")
    ]
    # the only steps meant to fail (2026-07-28 has no ping)
    assert failed == (["ping", "read-missing"] if run.mode == "auto" else ["read-missing"])


# -- tools -------------------------------------------------------------------------------------------
def test_list_tools(run: Run) -> None:
    step = run.ok_step("list")
    assert step["tools"] == [
        "echo",
        "add",
        "place",
        "slow",
        "ask_roots",
        "ask_roots_timeout",
        "ask_sample",
        "ask_elicit",
        "ask_elicit_url",
    ]
    add = next(t for t in step["result"]["tools"] if t["name"] == "add")
    assert add["inputSchema"]["properties"]["a"]["type"] == "integer"
    assert add["inputSchema"]["required"] == ["a", "b"]


def test_call_tools(run: Run) -> None:
    assert text_of(run.ok_step("echo")) == "héllo ✓"
    add = run.ok_step("add")["result"]
    assert add["content"][0]["text"] == "42" and add["structuredContent"] == {"result": 42}
    assert text_of(run.ok_step("after")) == "slept 0.01"  # the session survived every cancellation


def test_invalid_arguments_are_a_tool_result_not_an_exception(run: Run) -> None:
    # 2025-11-25 (SEP-1303): the official client gets a CallToolResult with isError
    result = run.ok_step("bad-args")["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "Invalid arguments for tool 'add': a: Input should be a valid integer, unable to parse string as an integer (got 'two')"
    )


def test_a_declared_2020_12_schema_is_published_verbatim_and_enforced(run: Run) -> None:
    place = next(t for t in run.ok_step("list")["result"]["tools"] if t["name"] == "place")
    schema = place["inputSchema"]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["point"]["additionalProperties"] is False
    assert schema["properties"]["at"] == {"$ref": "#/$defs/point"}
    assert place["outputSchema"]["required"] == ["label", "x", "y"]
    # the official client validates structuredContent against the outputSchema it listed
    good = run.ok_step("declared")["result"]
    assert "isError" not in good or good["isError"] is False
    assert good["structuredContent"] == {"label": "home", "x": 1, "y": 2.5}
    bad = run.ok_step("declared-bad")["result"]
    assert bad["isError"] is True
    assert bad["content"][0]["text"] == (
        "Invalid arguments for tool 'place': "
        "arguments: Additional properties are not allowed ('colour' was unexpected); "
        "at: Additional properties are not allowed ('z' was unexpected)"
    )


def test_progress(run: Run) -> None:
    step = run.ok_step("progress")
    assert text_of(step) == "slept 0.3"
    assert [(p["progress"], p["total"], p["message"]) for p in step["progress"]] == [
        (1, 3, "step 1/3"),
        (2, 3, "step 2/3"),
        (3, 3, "step 3/3"),
    ]
    assert "FINISHED slow progress" in read_events(run.events)


def test_ping(run: Run) -> None:
    if run.mode == "auto":  # removed in 2026-07-28
        assert run.step("ping")["error"]["code"] == -32601
        return
    run.ok_step("ping")


# -- cancellation by the official client ----------------------------------------------------------------
def assert_handler_stopped(run: Run, tag: str) -> None:
    lines = wait_for_marker(run.events, f"CANCELLED slow {tag}")
    assert lines.index(f"STARTED slow {tag}") < lines.index(f"CANCELLED slow {tag}")
    assert f"FINISHED slow {tag}" not in lines


def assert_stopped_before_next_step(run: Run, tag: str) -> None:
    lines = wait_for_marker(run.events, NEXT_MARKER[tag])
    assert lines.index(f"CANCELLED slow {tag}") < lines.index(NEXT_MARKER[tag]), lines


def test_official_cancel_stops_our_handler(run: Run) -> None:
    step = run.ok_step("cancel")
    assert step["cancel_trigger"] == "progress"  # cancelled while our handler was running
    call_id = step["call_request_id"]
    assert step["sent_notifications_cancelled"] == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": call_id, "reason": "caller cancelled"},
        }
    ]
    assert_handler_stopped(run, "cancel")
    assert_stopped_before_next_step(run, "cancel")
    assert not responses_to(run.received(), call_id), "our server answered a cancelled request"


def test_official_timeout_stops_our_handler(run: Run) -> None:
    step = run.ok_step("timeout")
    assert step["timed_out"] and step["timeout_error"]["code"] == -32001
    call_id = step["call_request_id"]
    [note] = step["sent_notifications_cancelled"]
    assert note["params"]["requestId"] == call_id and "timed out" in note["params"]["reason"]
    assert_handler_stopped(run, "timeout")
    assert_stopped_before_next_step(run, "timeout")
    assert not responses_to(run.received(), call_id), "our server answered a timed-out request"


def test_no_response_to_any_cancelled_request(run: Run) -> None:
    """Over the whole session: every request the official client cancelled went unanswered."""
    cancelled = [
        m["params"]["requestId"] for m in run.sent() if m.get("method") == "notifications/cancelled"
    ]
    assert len(cancelled) == 2
    for request_id in cancelled:
        assert not responses_to(run.received(), request_id)


# -- our server's requests to the official client ------------------------------------------------------
# At 2026-07-28 a server sends no requests: ctx.session.list_roots/create_message/elicit are served
# by multi round-trip input (the call is answered input_required, the official client runs the
# same callback and retries), so the tools' results are the same in both runs.


def assert_input_round_at_2026(run: Run, method: str) -> list[dict[str, Any]]:
    """In the 2026-07-28 run: no request reached the client, and ``method`` was asked for in
    an ``input_required`` answer; those input requests (none in the legacy run)."""
    if run.mode != "auto":
        return []
    assert not [m for m in run.received() if "method" in m and "id" in m]
    asked = [
        request
        for m in run.received()
        if (m.get("result") or {}).get("resultType") == "input_required"
        for request in m["result"]["inputRequests"].values()
        if request["method"] == method
    ]
    assert asked, f"no input_required answer asked for {method}"
    return asked


def test_roots(run: Run) -> None:
    assert_input_round_at_2026(run, "roots/list")
    assert json.loads(text_of(run.ok_step("roots"))) == [
        {"uri": "file:///tmp/interop-r1"},
        {"uri": "file:///tmp/interop-r2"},
    ]


def test_sampling(run: Run) -> None:
    asked = assert_input_round_at_2026(run, "sampling/createMessage")
    assert text_of(run.ok_step("sampling")) == "sampled by the official client"
    if run.mode == "auto":
        [request] = asked
    else:
        [request] = [m for m in run.received() if m.get("method") == "sampling/createMessage"]
    assert request["params"]["maxTokens"] == 50


def test_elicitation(run: Run) -> None:
    assert_input_round_at_2026(run, "elicitation/create")
    assert text_of(run.ok_step("elicitation")) == "accept:Ada"
    form = [
        c["params"]
        for c in run.out["callbacks"]
        if c["method"] == "elicitation/create" and "url" not in c["params"]
    ]
    assert [p["message"] for p in form] == ["Your name?"]
    assert form[0]["requestedSchema"]["properties"] == {"name": {"type": "string"}}


def test_url_elicitation(run: Run) -> None:
    """The official client declares elicitation {"form": {}, "url": {}}: an empty object
    declares URL mode, and our server may use it."""
    assert_input_round_at_2026(run, "elicitation/create")
    assert text_of(run.ok_step("elicitation-url")) == "accept"
    [params] = [
        c["params"]
        for c in run.out["callbacks"]
        if c["method"] == "elicitation/create" and "url" in c["params"]
    ]
    assert params["mode"] == "url"
    assert params["url"] == "https://example.com/auth"
    assert params["elicitationId"] == "sync-1"


def test_our_timeout_cancels_our_roots_request(run: Run) -> None:
    """ctx.session.list_roots(timeout=0.5) against a slow roots callback: our server sends
    notifications/cancelled for its own request, the official client stops its callback
    and never answers, and the tool returns an error. At 2026-07-28 there is no request to
    time out: the roots arrive with the retry, after the slow callback."""
    if assert_input_round_at_2026(run, "roots/list"):
        assert json.loads(text_of(run.ok_step("roots-timeout")))
        assert not [m for m in run.received() if m.get("method") == "notifications/cancelled"]
        return
    step = run.ok_step("roots-timeout")
    assert step["result"]["isError"] is True
    assert "timed out" in text_of(step)
    received, sent = run.received(), run.sent()
    roots_requests = [m for m in received if m.get("method") == "roots/list"]
    assert len(roots_requests) == 2  # the "roots" step's, then this step's
    request_id = roots_requests[1]["id"]
    notes = [m for m in received if m.get("method") == "notifications/cancelled"]
    assert len(notes) == 1
    assert notes[0]["params"]["requestId"] == request_id
    assert "timed out" in notes[0]["params"]["reason"]
    # the official client understood the notification: it cancelled its callback ...
    [callback] = [
        c
        for c in run.out["callbacks"]
        if c["method"] == "roots/list" and c["request_id"] == request_id
    ]
    assert callback["delay"] == 5 and "cancelled" in callback and "finished" not in callback
    # ... and sent no response for the cancelled request
    assert not responses_to(sent, request_id)
    lines = read_events(run.events)
    assert "TIMEOUT ask_roots_timeout" in lines and "FINISHED ask_roots_timeout" not in lines


# -- resources, prompts, completion ---------------------------------------------------------------------
def test_resources(run: Run) -> None:
    step = run.ok_step("resources")
    assert step["resources"]["resources"] == [
        {
            "name": "readme",
            "uri": "memo://readme",
            "description": "The sync peer's readme",
            "mimeType": "text/plain",
        }
    ]
    assert [(t["uriTemplate"], t["name"]) for t in step["templates"]["resourceTemplates"]] == [
        ("memo://notes/{name}", "note")
    ]
    static = run.ok_step("read-static")["result"]["contents"]
    assert static == [{"uri": "memo://readme", "mimeType": "text/plain", "text": "sync readme"}]
    templated = run.ok_step("read-template")["result"]["contents"]
    assert templated == [{"uri": "memo://notes/zed", "mimeType": "text/plain", "text": "memo zed"}]
    missing = run.step("read-missing")
    # resource not found: -32602 at 2026-07-28, -32002 before
    assert missing["error"]["code"] == (-32602 if run.mode == "auto" else -32002)
    assert missing["error"]["data"] == {"uri": "memo://nowhere"}


def test_prompts(run: Run) -> None:
    prompts = run.ok_step("prompts")["result"]["prompts"]
    assert prompts == [
        {
            "name": "greet",
            "description": "Greet someone",
            "arguments": [{"name": "name", "required": True}, {"name": "style", "required": False}],
        }
    ]
    result = run.ok_step("prompt")["result"]
    assert result["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Hello Bob (pirate)"}}
    ]


def test_completion(run: Run) -> None:
    assert run.ok_step("complete-prompt")["result"]["completion"]["values"] == [
        "plain",
        "pirate",
        "poetic",
    ]
    assert run.ok_step("complete-template")["result"]["completion"]["values"] == ["alpha", "alps"]
