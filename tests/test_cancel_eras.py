"""The cancellation guarantees in both protocol eras, fed to the sans-IO core by hand.

A server runs two sans-IO machines: the :class:`~mcp_sync.lifecycle.Lifecycle` judges each
request's era (2025-11-25 after ``initialize``; 2026-07-28 from the request's own ``_meta``)
and the :class:`~mcp_sync.protocol.RequestRegistry` keeps each request's state. The
:class:`ServerCores` below composes them the way the server does (register, admit, start,
complete; ``notifications/cancelled`` straight to the registry) and every message goes in
as a JSON line through :func:`~mcp_sync.jsonrpc.decode`, as it would off the wire.

One table of interleavings (:data:`SEQUENCES`) runs once per era: the outcome of every step
must be the same in both, which is the 2025 behaviour of today. No threads, no sleeps.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from mcp_sync.cancel import CancelToken
from mcp_sync.errors import McpError
from mcp_sync.jsonrpc import (
    INVALID_REQUEST,
    ErrorResponse,
    InvalidMessage,
    Notification,
    Request,
    Response,
    decode,
)
from mcp_sync.lifecycle import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    LOG_LEVEL_KEY,
    PROTOCOL_VERSION_KEY,
    Era,
    Lifecycle,
    Role,
    State,
)
from mcp_sync.protocol import (
    NOT_RUNNING,
    CancelInbound,
    Dispatch,
    Dropped,
    InboundRequest,
    InboundState,
    RequestRegistry,
    Send,
)

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ERAS = (LEGACY, MODERN)

ENVELOPE = {
    PROTOCOL_VERSION_KEY: MODERN,
    CLIENT_CAPABILITIES_KEY: {},
    CLIENT_INFO_KEY: {"name": "by-hand", "version": "0"},
    LOG_LEVEL_KEY: "debug",
}
"""The ``_meta`` of every 2026 request here (the TypeScript client puts it on its cancels too)."""

UNKNOWN = "cancellation of an unknown or finished request"
MALFORMED = "malformed cancellation"


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode()


class EraClient:
    """Writes the client's side of the conversation, as JSON lines, for one era."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.modern = version == MODERN

    def opening(self) -> list[bytes]:
        """What precedes the first call: the handshake at 2025, nothing at 2026."""
        if self.modern:
            return []
        init = {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "by-hand", "version": "0"},
        }
        return [
            line({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": init}),
            line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ]

    def call(
        self, request_id: Any, *, progress_token: Any = None, method: str = "tools/call"
    ) -> bytes:
        params: dict[str, Any] = {"name": "work", "arguments": {}}
        meta: dict[str, Any] = dict(ENVELOPE) if self.modern else {}
        if progress_token is not None:
            meta["progressToken"] = progress_token
        if meta:
            params["_meta"] = meta
        return line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})

    def cancel(self, request_id: Any, *, meta: str = "none", reason: str | None = "stop") -> bytes:
        """``meta``: ``"none"`` (the official Python client), ``"envelope"`` (the TypeScript
        client's full envelope) or ``"empty"`` (``_meta: {}``)."""
        params: dict[str, Any] = {"requestId": request_id}
        if reason is not None:
            params["reason"] = reason
        if meta == "envelope":
            params["_meta"] = {k: v for k, v in ENVELOPE.items() if k != LOG_LEVEL_KEY}
        elif meta == "empty":
            params["_meta"] = {}
        return line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})


@dataclass
class ServerCores:
    """The server's two sans-IO machines, composed as the server composes them."""

    lifecycle: Lifecycle = field(default_factory=lambda: Lifecycle(Role.SERVER, serve_modern=True))
    core: RequestRegistry = field(default_factory=lambda: RequestRegistry(CancelToken))
    sent: list[Any] = field(default_factory=list)
    """Every message the server wrote, in order."""
    dropped: Counter[str] = field(default_factory=Counter)
    """Inbound messages ignored, by reason."""
    withheld: Counter[str] = field(default_factory=Counter)
    """Notifications of ours not written, by reason."""
    fired: list[tuple[Any, str | None]] = field(default_factory=list)
    """(request id, reason) of every token the peer's cancellation fired."""
    requests: dict[Any, InboundRequest] = field(default_factory=dict)
    cancelled_at: dict[Any, int] = field(default_factory=dict)
    """How many messages had been written when each request's cancellation won."""

    def _perform(self, actions: list[Any], counter: Counter[str]) -> list[Any]:
        for action in actions:
            if isinstance(action, Send):
                self.sent.append(action.message)
            elif isinstance(action, Dropped):
                counter[action.detail] += 1
            elif isinstance(action, CancelInbound):
                assert action.request.token.cancel(action.reason)
                self.fired.append((action.request.id, action.reason))
                self.cancelled_at[action.request.id] = len(self.sent)
        return actions

    def arrive(self, data: bytes) -> list[Any]:
        """One line from the client."""
        message = decode(data)
        if isinstance(message, Notification) and not self.lifecycle.receive_notification(
            message.method
        ):
            self.dropped["removed notification"] += 1
            return []
        actions = self.core.receive(message)
        self._perform([a for a in actions if not isinstance(a, Dispatch)], self.dropped)
        for action in actions:
            if isinstance(action, Dispatch):
                self.requests[action.request.id] = action.request
                self._admit(action.request)
        return actions

    def _admit(self, request: InboundRequest) -> None:
        """Arrival order, before the handler is scheduled: a refusal is the answer."""
        try:
            self.lifecycle.admit(request.method, request.params)
            if request.method == "initialize":
                version = self.lifecycle.receive_initialize(request.params)
                self.start(request.id)
                self.finish(request.id, {"protocolVersion": version, "capabilities": {"tools": {}}})
        except McpError as exc:
            self._perform(
                self.core.complete(request, ErrorResponse(request.id, exc.code, exc.message)),
                self.dropped,
            )

    def open(self, client: EraClient) -> None:
        for data in client.opening():
            self.arrive(data)
        # 2025: the handshake is complete; 2026: nothing is decided until the first request
        assert self.lifecycle.state is (State.NEW if client.modern else State.READY)
        self.sent.clear()

    # the handler's side
    def start(self, request_id: Any) -> bool:
        return self.core.start(self.requests[request_id])

    def finish(self, request_id: Any, result: Any = "done") -> list[Any]:
        request = self.requests[request_id]
        return self._perform(
            self.core.complete(request, Response(request.id, result)), self.withheld
        )

    def progress(self, request_id: Any, value: int) -> list[Any]:
        request = self.requests[request_id]
        token = request.progress_token
        note = Notification("notifications/progress", {"progressToken": token, "progress": value})
        return self._perform(self.core.notify_related(request, note), self.withheld)

    def log(self, request_id: Any, text: str) -> list[Any]:
        request = self.requests[request_id]
        note = Notification(
            "notifications/message", {"level": "info", "data": {"call": request_id, "text": text}}
        )
        return self._perform(self.core.notify_related(request, note), self.withheld)

    def written_about(self, request_id: Any) -> list[tuple[int, Any]]:
        """Everything the server wrote about ``request_id``, with its position: its answers,
        its progress (by its token) and its log messages (they name the call)."""
        request = self.requests[request_id]
        out = []
        for position, message in enumerate(self.sent):
            answer_id = getattr(message, "id", None)
            same_id = answer_id == request_id and type(answer_id) is type(request_id)
            if isinstance(message, (Response, ErrorResponse)) and same_id:
                out.append((position, message))
            elif isinstance(message, Notification):
                params = message.params or {}
                if (
                    message.method == "notifications/progress"
                    and params.get("progressToken") == request.progress_token
                ) or (
                    message.method == "notifications/message"
                    and params["data"].get("call") == request_id
                ):
                    out.append((position, message))
        return out


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(era: str) -> EraClient:
    return EraClient(era)


@pytest.fixture
def server(client: EraClient) -> ServerCores:
    cores = ServerCores()
    cores.open(client)
    return cores


def answers(server: ServerCores) -> list[tuple[Any, Any]]:
    """(id, result or error code) of every response the server wrote."""
    out: list[tuple[Any, Any]] = []
    for message in server.sent:
        if isinstance(message, Response):
            out.append((message.id, message.result))
        elif isinstance(message, ErrorResponse):
            out.append((message.id, message.code))
    return out


# =========================================================================================
# the table: (step, argument, expected outcome), run once per era
# =========================================================================================
# steps:   call ID            -> "queued" (registered, handler scheduled)
#          start ID           -> True / False (False: the handler never runs)
#          cancel ID[:META]   -> "fires" (the token fired) or the Dropped detail
#          progress ID / log ID -> "sent" / "withheld"
#          finish ID          -> "answered" / "silent"
SEQUENCES: dict[str, list[tuple[str, Any, Any]]] = {
    "cancel before start: the queued request never runs": [
        ("call", 1, "queued"),
        ("cancel", 1, "fires"),
        ("start", 1, False),
        ("progress", 1, "withheld"),
        ("finish", 1, "silent"),
    ],
    "cancel while running, then the handler completes: no response": [
        ("call", 1, "queued"),
        ("start", 1, True),
        ("progress", 1, "sent"),
        ("cancel", 1, "fires"),
        ("finish", 1, "silent"),
    ],
    "complete, then cancel: the cancel is ignored": [
        ("call", 1, "queued"),
        ("start", 1, True),
        ("finish", 1, "answered"),
        ("cancel", 1, UNKNOWN),
        ("progress", 1, "withheld"),
    ],
    "cancel, then progress and log for that id: dropped and counted": [
        ("call", 1, "queued"),
        ("start", 1, True),
        ("log", 1, "sent"),
        ("cancel", 1, "fires"),
        ("progress", 1, "withheld"),
        ("log", 1, "withheld"),
        ("progress", 1, "withheld"),
        ("finish", 1, "silent"),
    ],
    "cancel twice: the second is ignored": [
        ("call", 1, "queued"),
        ("start", 1, True),
        ("cancel", 1, "fires"),
        ("cancel", 1, UNKNOWN),
        ("finish", 1, "silent"),
    ],
    "cancel of an unknown id: ignored, the running call is untouched": [
        ("call", 1, "queued"),
        ("start", 1, True),
        ("cancel", 99, UNKNOWN),
        ("cancel", "1", UNKNOWN),
        ("progress", 1, "sent"),
        ("finish", 1, "answered"),
    ],
    "cancel with the TypeScript client's envelope": [
        ("call", 1, "queued"),
        ("start", 1, True),
        ("cancel", (1, "envelope"), "fires"),
        ("log", 1, "withheld"),
        ("finish", 1, "silent"),
    ],
    "cancel with an empty _meta": [
        ("call", 1, "queued"),
        ("cancel", (1, "empty"), "fires"),
        ("start", 1, False),
    ],
    "string and integer ids are different requests": [
        ("call", 7, "queued"),
        ("call", "7", "queued"),
        ("start", 7, True),
        ("start", "7", True),
        ("cancel", "7", "fires"),
        ("progress", 7, "sent"),
        ("progress", "7", "withheld"),
        ("finish", 7, "answered"),
        ("finish", "7", "silent"),
    ],
    "interleaved: one cancelled, one completed, one cancelled while queued": [
        ("call", 1, "queued"),
        ("call", 2, "queued"),
        ("call", 3, "queued"),
        ("start", 1, True),
        ("start", 2, True),
        ("cancel", 3, "fires"),
        ("progress", 1, "sent"),
        ("cancel", 1, "fires"),
        ("progress", 2, "sent"),
        ("finish", 2, "answered"),
        ("progress", 1, "withheld"),
        ("finish", 1, "silent"),
        ("cancel", 2, UNKNOWN),
        ("start", 3, False),
    ],
}


def run_step(server: ServerCores, client: EraClient, step: str, arg: Any) -> Any:
    if step == "call":
        actions = server.arrive(client.call(arg, progress_token=f"p-{arg!r}"))
        assert [type(a) for a in actions] == [Dispatch], actions
        assert server.requests[arg].state is InboundState.QUEUED
        return "queued"
    if step == "start":
        return server.start(arg)
    if step == "cancel":
        target, meta = arg if isinstance(arg, tuple) else (arg, "none")
        actions = server.arrive(client.cancel(target, meta=meta))
        assert len(actions) == 1, actions
        (action,) = actions
        if isinstance(action, CancelInbound):
            assert action.request.token.cancelled and action.reason == "stop"
            return "fires"
        assert isinstance(action, Dropped), action
        return action.detail
    if step in ("progress", "log"):
        actions = (
            server.progress(arg, 1 + len(server.sent))
            if step == "progress"
            else server.log(arg, "x")
        )
        (action,) = actions
        if isinstance(action, Send):
            return "sent"
        assert isinstance(action, Dropped) and action.detail == NOT_RUNNING, action
        return "withheld"
    if step == "finish":
        return "answered" if server.finish(arg) else "silent"
    raise AssertionError(step)


@pytest.mark.parametrize("name", list(SEQUENCES))
def test_sequence(name: str, server: ServerCores, client: EraClient) -> None:
    outcomes = [run_step(server, client, step, arg) for step, arg, _ in SEQUENCES[name]]
    assert outcomes == [expected for _, _, expected in SEQUENCES[name]]
    # what the outcomes imply about the wire, checked on the wire itself
    fired = {request_id for request_id, _ in server.fired}
    for request_id, request in server.requests.items():
        written = server.written_about(request_id)
        responses = [m for _, m in written if isinstance(m, (Response, ErrorResponse))]
        if request_id in fired:
            assert request.state is InboundState.CANCELLED
            assert responses == [], f"{request_id!r}: answered after its cancellation won"
            late = [m for position, m in written if position >= server.cancelled_at[request_id]]
            assert late == [], f"{request_id!r}: written after its cancellation won: {late}"
        else:
            assert len(responses) <= 1
    expected_withheld = sum(1 for step, _, out in SEQUENCES[name] if out == "withheld")
    assert sum(server.withheld.values()) == expected_withheld
    assert set(server.withheld) <= {NOT_RUNNING}
    # every inbound cancellation that was not accepted is counted, by reason
    ignored = Counter(
        out for step, _, out in SEQUENCES[name] if step == "cancel" and out != "fires"
    )
    assert server.dropped == ignored
    assert server.core.in_flight()[0] == sum(
        1
        for r in server.requests.values()
        if r.state in (InboundState.QUEUED, InboundState.RUNNING)
    )


def test_the_table_is_the_same_in_both_eras() -> None:
    """Everything the server writes is the same at 2025 and at 2026 (the era changes the
    requests' ``_meta``, never what is written about them)."""
    written: dict[str, list[list[Any]]] = {}
    for version in ERAS:
        written[version] = []
        for steps in SEQUENCES.values():
            client, server = EraClient(version), ServerCores()
            server.open(client)
            for step, arg, _ in steps:
                run_step(server, client, step, arg)
            written[version].append([m.to_json() for m in server.sent])
    assert written[LEGACY] == written[MODERN]


# =========================================================================================
# malformed and misdirected cancellations: ignored, and the request goes on
# =========================================================================================
MALFORMED_PARAMS = [
    {},
    {"reason": "no id"},
    {"requestId": None},
    {"requestId": True},
    {"requestId": 1.0},
    {"requestId": [1]},
    {"requestId": {"id": 1}},
]


@pytest.mark.parametrize("params", MALFORMED_PARAMS, ids=repr)
def test_malformed_cancel_is_ignored(
    params: dict[str, Any], server: ServerCores, client: EraClient
) -> None:
    """2026-07-28 requires ``requestId`` (2025-11-25 had it optional): without a usable one
    the cancel names nothing and is ignored in both eras."""
    server.arrive(client.call(1, progress_token="p"))
    assert server.start(1)
    actions = server.arrive(
        line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
    )
    assert [(type(a), a.detail) for a in actions] == [(Dropped, MALFORMED)]
    assert server.fired == [] and server.sent == []
    assert server.progress(1, 1)[0] == Send(server.sent[-1])
    server.finish(1, "still answered")
    assert answers(server) == [(1, "still answered")]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":[1]}',
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":"1"}',
    ],
    ids=["params-array", "params-string"],
)
def test_unreadable_cancel_is_ignored_and_answers_nothing(
    raw: bytes, server: ServerCores, client: EraClient
) -> None:
    """A notification gets no error response, however broken (JSON-RPC); the call goes on."""
    server.arrive(client.call(1))
    assert server.start(1)
    actions = server.arrive(raw)
    assert all(isinstance(a, Dropped) for a in actions), actions
    assert server.sent == [] and server.fired == []
    server.finish(1)
    assert answers(server) == [(1, "done")]


def test_a_cancel_without_a_reason_fires_with_none(server: ServerCores, client: EraClient) -> None:
    server.arrive(client.call(1))
    server.arrive(client.cancel(1, reason=None))
    assert server.fired == [(1, None)]
    assert server.requests[1].token.cancelled


def test_a_cancel_naming_a_request_refused_at_admission_is_ignored(
    server: ServerCores, client: EraClient
) -> None:
    """A request the lifecycle refuses is answered at once; a cancel that follows finds
    nothing. (Refused at 2025: an enveloped request on an initialized connection; at 2026: a
    version not served.)"""
    meta = {**ENVELOPE, PROTOCOL_VERSION_KEY: "2099-01-01"} if client.modern else dict(ENVELOPE)
    server.arrive(
        line(
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {"name": "w", "_meta": meta},
            }
        )
    )
    ((request_id, code),) = answers(server)
    assert request_id == 5 and code in (INVALID_REQUEST, -32022)
    server.arrive(client.cancel(5))
    assert server.dropped == Counter({UNKNOWN: 1})
    assert server.fired == [] and len(server.sent) == 1


def test_duplicate_id_in_flight_is_refused_and_the_cancel_reaches_the_first(
    server: ServerCores, client: EraClient
) -> None:
    server.arrive(client.call(1, progress_token="first"))
    first = server.requests[1]
    actions = server.core.receive(decode(client.call(1, progress_token="second")))
    refusal = ErrorResponse(1, INVALID_REQUEST, "request id is already in use")
    assert isinstance(actions[0], Send) and actions[0].message == refusal
    assert server.core.inbound(1) is first
    server.arrive(client.cancel(1))
    assert server.fired == [(1, "stop")] and first.token.cancelled
    # the id is free again once the first ended: a new request may reuse it
    server.arrive(client.call(1, progress_token="third"))
    assert server.requests[1] is not first and server.start(1)
    server.finish(1)
    assert answers(server) == [(1, "done")]


def test_connection_lost_fires_every_token_and_writes_nothing_more(
    server: ServerCores, client: EraClient
) -> None:
    for request_id in (1, 2):
        server.arrive(client.call(request_id, progress_token=request_id))
    assert server.start(1)
    for action in server.core.connection_lost():
        assert isinstance(action, CancelInbound)
        action.request.token.cancel(action.reason)
    assert server.requests[1].token.cancelled and server.requests[2].token.cancelled
    assert server.progress(1, 1)[0].detail == "connection closed"
    assert server.finish(1) == [] and server.sent == []


# =========================================================================================
# what the lifecycle does with a cancellation, per era
# =========================================================================================
def test_the_lifecycle_passes_cancellations_on_in_both_eras(
    server: ServerCores, client: EraClient
) -> None:
    assert server.lifecycle.receive_notification("notifications/cancelled")
    assert server.lifecycle.era is (None if client.modern else Era.HANDSHAKE)
    server.arrive(client.call(1))
    assert server.lifecycle.era is (Era.MODERN if client.modern else Era.HANDSHAKE)
    assert server.lifecycle.receive_notification("notifications/cancelled")


def test_a_cancel_before_anything_pins_nothing() -> None:
    """A stray cancel on a fresh connection leaves the era open: either era may follow."""
    for version in ERAS:
        client, server = EraClient(version), ServerCores()
        server.arrive(client.cancel(1))
        assert server.dropped == Counter({UNKNOWN: 1})
        assert server.lifecycle.state is State.NEW and server.lifecycle.era is None
        server.open(client)
        server.arrive(client.call(1))
        assert server.start(1)
        server.finish(1)
        assert answers(server) == [(1, "done")]


def test_initialize_cannot_be_cancelled() -> None:
    """(2025) The one request whose cancellation is ignored; it pins the handshake era."""
    server = ServerCores()
    data = EraClient(LEGACY).opening()[0]
    message = decode(data)
    assert isinstance(message, Request)
    (dispatch,) = server.core.receive(message)
    assert isinstance(dispatch, Dispatch)
    actions = server.arrive(EraClient(LEGACY).cancel("init"))
    assert [(type(a), a.detail) for a in actions] == [(Dropped, "initialize cannot be cancelled")]
    assert not dispatch.request.token.cancelled


def test_server_discover_can_be_cancelled_and_pins_nothing() -> None:
    """(2026) Nothing forbids cancelling ``server/discover``; a cancelled probe leaves the
    connection unpinned, and it gets no answer."""
    client, server = EraClient(MODERN), ServerCores()
    server.arrive(
        line(
            {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": ENVELOPE}}
        )
    )
    server.arrive(client.cancel(1, meta="envelope"))
    assert server.fired == [(1, "stop")]
    assert server.start(1) is False and server.finish(1, {"supportedVersions": [MODERN]}) == []
    assert server.sent == [] and server.lifecycle.era is None


def test_the_same_ids_in_both_eras_on_two_connections() -> None:
    """Two connections, one per era, fed the same ids interleaved: each keeps its own."""
    pairs = {version: (EraClient(version), ServerCores()) for version in ERAS}
    for client, server in pairs.values():
        server.open(client)
        server.arrive(client.call(1))
        server.start(1)
    _legacy_client, legacy = pairs[LEGACY]
    modern_client, modern = pairs[MODERN]
    modern.arrive(modern_client.cancel(1, meta="envelope"))
    legacy.finish(1)
    modern.finish(1)
    assert answers(legacy) == [(1, "done")] and answers(modern) == []
    assert legacy.fired == [] and modern.fired == [(1, "stop")]


def _all_ids() -> Iterator[Any]:
    yield from (0, -1, 2**53, "", "0", "a" * 200)


@pytest.mark.parametrize("request_id", list(_all_ids()), ids=repr)
def test_any_valid_id_is_cancelled_exactly(
    request_id: Any, server: ServerCores, client: EraClient
) -> None:
    server.arrive(client.call(request_id))
    assert server.start(request_id)
    server.arrive(client.cancel(request_id))
    assert server.fired == [(request_id, "stop")]
    assert server.finish(request_id) == [] and server.sent == []


def test_invalid_message_ids_do_not_count_as_requests(
    client: EraClient, server: ServerCores
) -> None:
    """A request with an invalid id is refused by the decoder; a cancel naming that id then
    finds nothing."""
    raw = line({"jsonrpc": "2.0", "id": 1.5, "method": "tools/call", "params": {}})
    assert isinstance(decode(raw), InvalidMessage)
    server.arrive(raw)
    server.arrive(client.cancel(1))
    assert server.dropped[UNKNOWN] == 1 and server.fired == []
