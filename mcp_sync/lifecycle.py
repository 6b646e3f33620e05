"""The session lifecycle as a sans-IO state machine, for both protocol eras.

:class:`Lifecycle` knows which protocol era and version a connection speaks, which
capabilities each side declared, and which messages are legal in its current state. It does
no I/O, starts no threads and takes no locks: the session that owns it feeds it what crossed
the wire (or is about to) and acts on its answers. Every transition is in :meth:`Lifecycle._move`
and listed in :data:`TRANSITIONS`.

Two eras, one machine:

* **handshake era** (2024-11-05 .. 2025-11-25): ``initialize`` negotiates a version and both
  sides' capabilities once for the connection, then ``notifications/initialized``; states
  ``NEW -> INITIALIZING -> INITIALIZED -> READY -> CLOSED`` (a server goes from ``NEW`` straight
  to ``INITIALIZED`` when it answers ``initialize``);
* **modern era** (2026-07-28): no handshake; every request carries its version and the
  client's capabilities in ``params._meta`` (:class:`RequestEnvelope`). The first exchange pins
  the connection's era (``server/discover`` does not pin); state ``NEW -> MODERN -> CLOSED``.

Errors come in two kinds, as in h11:

* the **peer** broke the rules: on the receiving side of a request, an
  :class:`~mcp_sync.errors.McpError` carrying the JSON-RPC error owed to the peer (the server
  answers with it); for an answer the peer gave (the client's side of ``initialize``),
  :class:`~mcp_sync.errors.PeerMisbehaved`;
* **local** misuse (sending what the state does not allow, asking the peer for a capability
  it did not declare): :class:`RuntimeError`, or its subclass
  :class:`~mcp_sync.errors.CapabilityError`. Nothing is sent for these.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from .errors import CapabilityError, FeatureRemoved, McpError, PeerMisbehaved
from .jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)

__all__ = [
    "HANDSHAKE_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "MODERN_VERSIONS",
    "LATEST_MODERN_VERSION",
    "SUPPORTED_VERSIONS",
    "PROTOCOL_VERSION_KEY",
    "CLIENT_CAPABILITIES_KEY",
    "CLIENT_INFO_KEY",
    "LOG_LEVEL_KEY",
    "SERVER_INFO_KEY",
    "SUBSCRIPTION_ID_KEY",
    "RELATED_TASK_KEY",
    "TASKS_EXTENSION",
    "DISCOVER_METHOD",
    "LISTEN_METHOD",
    "ACKNOWLEDGED_METHOD",
    "REMOVED_AT_MODERN",
    "ALWAYS_ALLOWED",
    "MODERN_ERROR_CODES",
    "Era",
    "Role",
    "State",
    "TRANSITIONS",
    "RequestEnvelope",
    "Admission",
    "Lifecycle",
    "capability_declared",
    "era_of_version",
]

HANDSHAKE_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The revisions negotiated through ``initialize`` that mcp_sync speaks, newest first."""

LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[0]
"""What a client asks for in ``initialize``, and a server answers to a version it does not know."""

MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
"""The revisions with a per-request envelope (no handshake) mcp_sync speaks, newest first."""

LATEST_MODERN_VERSION = MODERN_VERSIONS[0]
"""The version a modern client puts in its requests' envelope by default."""

SUPPORTED_VERSIONS: tuple[str, ...] = MODERN_VERSIONS + HANDSHAKE_VERSIONS
"""Every revision mcp_sync speaks, both eras, newest first."""

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
"""``params._meta`` key of a modern request: its protocol version (required)."""

CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
"""``params._meta`` key of a modern request: the client's capabilities (required; ``{}`` = none)."""

CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
"""``params._meta`` key of a modern request: the client's name and version (optional)."""

LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
"""``params._meta`` key of a modern request: the least severe log level it wants (optional)."""

SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
"""``result._meta`` key of a modern result: the server's ``Implementation`` (name, version)."""

SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
"""``_meta`` key naming the ``subscriptions/listen`` stream a notification (or the closing
result) belongs to: the listen request's id."""

RELATED_TASK_KEY = "io.modelcontextprotocol/related-task"
"""(2025-11-25 tasks) ``_meta`` key tying a message to a task: ``{"taskId": ...}``."""

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""(2026-07-28) The tasks extension's identifier, declared under ``extensions``."""

DISCOVER_METHOD = "server/discover"
"""The modern-era request that asks a server what it serves; it never pins the era."""

LISTEN_METHOD = "subscriptions/listen"
"""The modern-era request that opens a notification stream."""

ACKNOWLEDGED_METHOD = "notifications/subscriptions/acknowledged"
"""The first message on a listen stream: the notification types the server agreed to send."""

REMOVED_AT_MODERN = frozenset(
    {
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "initialize",
        "notifications/initialized",
        "notifications/roots/list_changed",
    }
)
"""Methods of the handshake era that 2026-07-28 removed."""

ALWAYS_ALLOWED = frozenset({"initialize", "ping"})
"""Requests a handshake-era client may send before the handshake has completed."""

MODERN_ERROR_CODES = frozenset(
    {HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
)
"""Error codes only a modern-era server sends: an answer with one proves the server modern.
(-32602 does not: handshake-era servers answer unknown requests with it too.)"""


class Era(enum.Enum):
    """A protocol era: how version and capabilities are agreed."""

    HANDSHAKE = "handshake"
    """Through ``initialize``, once per connection (2024-11-05 .. 2025-11-25)."""
    MODERN = "modern"
    """In every request's ``params._meta`` (2026-07-28)."""


class Role(enum.Enum):
    """Which side of the connection a :class:`Lifecycle` keeps."""

    CLIENT = "client"
    SERVER = "server"


class State(enum.Enum):
    """Where a connection is in its lifecycle."""

    NEW = "new"
    """Nothing decided yet: no ``initialize``, no enveloped request."""
    INITIALIZING = "initializing"
    """(client) ``initialize`` was sent; its answer is awaited."""
    INITIALIZED = "initialized"
    """``initialize`` was answered; ``notifications/initialized`` has not been sent (client)
    or seen (server) yet. A server serves requests in this state."""
    READY = "ready"
    """The handshake is complete, ``notifications/initialized`` included."""
    MODERN = "modern"
    """Pinned to the modern era: every request stands on its own envelope."""
    CLOSED = "closed"
    """The connection has ended (final)."""


TRANSITIONS: Mapping[tuple[Role, State, str], State] = {
    # client, handshake era
    (Role.CLIENT, State.NEW, "send initialize"): State.INITIALIZING,
    (Role.CLIENT, State.INITIALIZING, "initialize answered"): State.INITIALIZED,
    (Role.CLIENT, State.INITIALIZING, "initialize failed"): State.NEW,
    (Role.CLIENT, State.INITIALIZING, "initialize refused"): State.CLOSED,
    (Role.CLIENT, State.INITIALIZED, "send initialized"): State.READY,
    # client, modern era
    (Role.CLIENT, State.NEW, "choose modern"): State.MODERN,
    # server, handshake era
    (Role.SERVER, State.NEW, "receive initialize"): State.INITIALIZED,
    (Role.SERVER, State.INITIALIZED, "receive initialized"): State.READY,
    # server, modern era
    (Role.SERVER, State.NEW, "receive enveloped request"): State.MODERN,
    **{(role, state, "close"): State.CLOSED for role in Role for state in State},
}
"""Every legal ``(role, state, event) -> new state``; anything else is refused."""


def era_of_version(version: str) -> Era | None:
    """The era of a version mcp_sync speaks, or ``None`` for one it does not."""
    if version in MODERN_VERSIONS:
        return Era.MODERN
    if version in HANDSHAKE_VERSIONS:
        return Era.HANDSHAKE
    return None


def capability_declared(
    capabilities: Mapping[str, Any], capability: str, sub: str | None = None
) -> bool:
    """True if ``capabilities`` declare ``capability`` (and ``sub`` inside it, if given).

    A capability is declared by presence: ``{"url": {}}`` counts; an absent or ``null``
    member does not (nor, for ``sub``, a ``false`` one).
    """
    value = capabilities.get(capability)
    if value is None:
        return False
    if sub is None:
        return True
    inner = value.get(sub) if isinstance(value, Mapping) else None
    return inner is not None and inner is not False


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, answered at once for a dict (what JSON decodes to): the
    ABC check costs ten times more, and admitting a 2026-07-28 request makes several."""
    return type(value) is dict or isinstance(value, Mapping)


def _meta_of(params: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    meta = params.get("_meta") if params is not None and _is_mapping(params) else None
    return meta if meta is not None and _is_mapping(meta) else None


def _capability_object(capability: str, sub: str | None) -> dict[str, Any]:
    return {capability: {} if sub is None else {sub: {}}}


@dataclass(frozen=True)
class RequestEnvelope:
    """What a modern (2026-07-28) request says about itself in ``params._meta``.

    Attributes:
        version: the protocol version the request speaks.
        client_capabilities: the client's capabilities, for this request only.
        client_info: the client's ``Implementation`` (``name``, ``version``), if sent.
        log_level: the least severe log level the request wants, or ``None`` for none.
    """

    version: str
    client_capabilities: Mapping[str, Any] = field(default_factory=dict)
    client_info: Mapping[str, Any] | None = None
    log_level: str | None = None

    def declares(self, capability: str, sub: str | None = None) -> bool:
        """True if this request declares the client ``capability`` (and ``sub`` in it)."""
        return capability_declared(self.client_capabilities, capability, sub)

    def require(self, capability: str, sub: str | None = None, *, what: str) -> None:
        """Raise the -32021 error owed to the client unless this request declares the capability.

        ``what`` names what needs it (for the message), e.g. ``"elicitation/create"``.
        """
        if not self.declares(capability, sub):
            needed = capability if sub is None else f"{capability}.{sub}"
            raise McpError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"{what} needs the client capability {needed!r}, which this request does not declare",
                {"requiredCapabilities": _capability_object(capability, sub)},
            )

    def to_meta(self) -> dict[str, Any]:
        """The ``_meta`` members of this envelope (to merge into a request's ``params._meta``)."""
        meta: dict[str, Any] = {
            PROTOCOL_VERSION_KEY: self.version,
            CLIENT_CAPABILITIES_KEY: dict(self.client_capabilities),
        }
        if self.client_info is not None:
            meta[CLIENT_INFO_KEY] = dict(self.client_info)
        if self.log_level is not None:
            meta[LOG_LEVEL_KEY] = self.log_level
        return meta


@dataclass(frozen=True)
class Admission:
    """How a server is to serve one inbound request (from :meth:`Lifecycle.admit`).

    Attributes:
        era: the era the request is served in.
        envelope: its :class:`RequestEnvelope` in the modern era, ``None`` in the handshake era.
    """

    era: Era
    envelope: RequestEnvelope | None = None


class Lifecycle:
    """One side of one connection's lifecycle (sans-IO; not thread-safe on its own).

    Args:
        role: :attr:`Role.CLIENT` or :attr:`Role.SERVER`.
        serve_modern: (server) whether modern-era requests are served; without it every
            request is taken in the handshake era, as a 2025-11-25 server does.

    Attributes:
        role: the side this machine keeps.
        state: the current :class:`State`.
        era: the pinned :class:`Era`, or ``None`` while nothing has pinned it.
        protocol_version: the negotiated (handshake era) or chosen (client, modern era)
            version; ``None`` before.
        peer_capabilities: what the peer declared in the handshake (a plain dict).
        peer_info: the peer's ``clientInfo``/``serverInfo`` from the handshake (a plain dict).
    """

    def __init__(self, role: Role, *, serve_modern: bool = False) -> None:
        self.role = role
        self.serve_modern = serve_modern
        self.state = State.NEW
        self.era: Era | None = None
        self.protocol_version: str | None = None
        self.peer_capabilities: dict[str, Any] = {}
        self.peer_info: dict[str, Any] = {}
        self._handshake_completed = False

    def __repr__(self) -> str:
        version = f" {self.protocol_version}" if self.protocol_version else ""
        return f"<Lifecycle {self.role.value} {self.state.value}{version}>"

    # -- the one place where the state changes --------------------------------------------------
    def _move(self, event: str) -> None:
        new = TRANSITIONS.get((self.role, self.state, event))
        if new is None:
            raise RuntimeError(
                f"{event!r} is not allowed for a {self.role.value} in state {self.state.value!r}"
            )
        self.state = new
        if new is State.READY or (new is State.INITIALIZED and self.role is Role.SERVER):
            self._handshake_completed = True
        if new is State.MODERN:
            self.era = Era.MODERN
        elif new in (State.INITIALIZING, State.INITIALIZED):
            self.era = Era.HANDSHAKE
        elif new is State.NEW:
            self.era = None

    @property
    def initialized(self) -> bool:
        """True once the handshake has completed (a server: ``initialize`` answered; a
        client: ``notifications/initialized`` sent), and still after the connection closed."""
        return self._handshake_completed

    @property
    def peer_confirmed(self) -> bool:
        """(server) True once the client's ``notifications/initialized`` has arrived."""
        return self.state is State.READY

    def close(self) -> None:
        """The connection ended (any state; idempotent)."""
        self._move("close")

    def peer_supports(self, capability: str, sub: str | None = None) -> bool:
        """True if the peer declared ``capability`` (and ``sub``) in the handshake."""
        return capability_declared(self.peer_capabilities, capability, sub)

    def require_peer_capability(self, capability: str, what: str) -> None:
        """Raise :class:`~mcp_sync.errors.CapabilityError` unless the peer declared
        ``capability`` in the handshake (local misuse: nothing is sent)."""
        if not self.peer_supports(capability):
            raise CapabilityError(
                f"{what} needs the peer's {capability!r} capability, which it did not declare"
            )

    # -- client, handshake era --------------------------------------------------------------------
    def send_initialize(self) -> None:
        """(client) ``initialize`` is about to be sent."""
        self._check_role(Role.CLIENT)
        if self.state is not State.NEW:
            raise RuntimeError(f"initialize cannot be sent in state {self.state.value!r}")
        self._move("send initialize")

    def initialize_answered(self, result: object) -> str:
        """(client) The server answered ``initialize`` with ``result``; the version it chose.

        Records the server's capabilities and ``serverInfo``. A version mcp_sync does not
        speak (or none) raises :class:`~mcp_sync.errors.PeerMisbehaved` and closes the machine:
        the client must hang up and not send ``notifications/initialized``.
        """
        self._check_role(Role.CLIENT)
        version = result.get("protocolVersion") if isinstance(result, Mapping) else None
        if not isinstance(version, str) or version not in HANDSHAKE_VERSIONS:
            self._move("initialize refused")
            raise PeerMisbehaved(
                f"the server answered protocol version {version!r}, which mcp_sync does not speak",
                "initialize result with an unsupported protocolVersion",
            )
        assert isinstance(result, Mapping)
        self._move("initialize answered")
        self.protocol_version = version
        caps, info = result.get("capabilities"), result.get("serverInfo")
        self.peer_capabilities = dict(caps) if isinstance(caps, Mapping) else {}
        self.peer_info = dict(info) if isinstance(info, Mapping) else {}
        return version

    def initialize_failed(self) -> None:
        """(client) ``initialize`` got an error, timed out or was abandoned: back to ``NEW``."""
        self._check_role(Role.CLIENT)
        if self.state is State.INITIALIZING:
            self._move("initialize failed")

    def send_initialized(self) -> None:
        """(client) ``notifications/initialized`` is about to be sent: the handshake is complete."""
        self._check_role(Role.CLIENT)
        self._move("send initialized")

    # -- client, modern era ------------------------------------------------------------------------
    def choose_modern(self, version: str = LATEST_MODERN_VERSION) -> None:
        """(client) Speak the modern era at ``version`` from now on (no handshake)."""
        self._check_role(Role.CLIENT)
        if version not in MODERN_VERSIONS:
            raise ValueError(
                f"{version!r} is not a modern protocol version mcp_sync speaks ({', '.join(MODERN_VERSIONS)})"
            )
        self._move("choose modern")
        self.protocol_version = version

    def discover_answered(self, result: object) -> Era:
        """(client) The server answered the ``server/discover`` probe with ``result``.

        If its ``supportedVersions`` name a modern version mcp_sync speaks, the newest such is
        chosen (:meth:`choose_modern`) and :attr:`Era.MODERN` returned; otherwise
        :attr:`Era.HANDSHAKE`: send ``initialize`` (the machine stays ``NEW``).
        """
        self._check_role(Role.CLIENT)
        offered = result.get("supportedVersions") if isinstance(result, Mapping) else None
        mutual = [v for v in MODERN_VERSIONS if isinstance(offered, list) and v in offered]
        if not mutual:
            return Era.HANDSHAKE
        self.choose_modern(mutual[0])
        return Era.MODERN

    def discover_refused(self, error: McpError) -> Era:
        """(client) The ``server/discover`` probe got the error ``error``.

        One of :data:`MODERN_ERROR_CODES` proves the server modern: -32022 chooses the newest
        version of its ``data.supported`` that mcp_sync speaks (and re-raises ``error`` if
        there is none: no fallback to ``initialize``), the others keep
        :data:`LATEST_MODERN_VERSION`; :attr:`Era.MODERN` is returned. Any other error means a
        handshake-era server (whatever its code): :attr:`Era.HANDSHAKE`, send ``initialize``.
        No answer within a bounded time means the same (nothing to tell the machine).
        """
        self._check_role(Role.CLIENT)
        if error.code not in MODERN_ERROR_CODES:
            return Era.HANDSHAKE
        version: str | None = LATEST_MODERN_VERSION
        if error.code == UNSUPPORTED_PROTOCOL_VERSION:
            version = self.retry_version(error.data)
        if version is None:
            raise error
        self.choose_modern(version)
        return Era.MODERN

    def retry_version(self, error_data: object) -> str | None:
        """(client) After a -32022 error: the newest modern version both sides speak (from its
        ``data.supported``) other than the one refused, or ``None`` if there is none."""
        self._check_role(Role.CLIENT)
        supported = error_data.get("supported") if isinstance(error_data, Mapping) else None
        if not isinstance(supported, list):
            return None
        for version in MODERN_VERSIONS:
            if version in supported and version != self.protocol_version:
                return version
        return None

    def envelope(
        self,
        capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any] | None = None,
        *,
        log_level: str | None = None,
    ) -> RequestEnvelope:
        """(client, modern era) The envelope of an outgoing request at the chosen version."""
        self._check_role(Role.CLIENT)
        if self.state is not State.MODERN or self.protocol_version is None:
            raise RuntimeError(
                f"no modern protocol version was chosen (state {self.state.value!r})"
            )
        return RequestEnvelope(self.protocol_version, dict(capabilities), client_info, log_level)

    def stamp(self, params: Mapping[str, Any] | None, envelope: RequestEnvelope) -> dict[str, Any]:
        """(client, modern era) ``params`` with ``envelope`` merged into its ``_meta`` (other
        ``_meta`` members, e.g. ``progressToken``, are kept; ``params`` is not changed)."""
        out = dict(params or {})
        own, stamped = _meta_of(params), envelope.to_meta()
        out["_meta"] = {**own, **stamped} if own else stamped
        return out

    def check_send_request(self, method: str) -> None:
        """(client) Raise :class:`RuntimeError` if ``method`` may not be sent now (nothing is sent).

        Handshake era: only ``initialize`` and ``ping`` before the handshake completed.
        Modern era: nothing the 2026-07-28 revision removed
        (:class:`~mcp_sync.errors.FeatureRemoved`, a :class:`RuntimeError`). Once the connection has closed,
        what was allowed before still passes (sending reports the closed connection).
        """
        self._check_role(Role.CLIENT)
        if self.era is Era.MODERN:
            if method in REMOVED_AT_MODERN:
                raise FeatureRemoved(method, self.protocol_version or LATEST_MODERN_VERSION)
        elif not self.initialized and method not in ALWAYS_ALLOWED:
            raise RuntimeError(
                "the client is not initialized; use Client.connect() or Client.stdio()"
            )

    # -- server -------------------------------------------------------------------------------------
    @staticmethod
    def classify(method: str, params: Mapping[str, Any] | None) -> Era:
        """The era an inbound request claims: modern if its ``_meta`` carries an envelope
        member (or it is ``server/discover``), handshake otherwise (``initialize`` always)."""
        if method == "initialize":
            return Era.HANDSHAKE
        if method == DISCOVER_METHOD:
            return Era.MODERN
        meta = _meta_of(params)
        if meta is not None and (PROTOCOL_VERSION_KEY in meta or CLIENT_CAPABILITIES_KEY in meta):
            return Era.MODERN
        return Era.HANDSHAKE

    def admit(self, method: str, params: Mapping[str, Any] | None) -> Admission:
        """(server) Judge an inbound request: how to serve it, or the error owed to the client.

        Pins the era on the first request that decides it (``initialize`` pins the handshake
        era through :meth:`receive_initialize`; an enveloped request other than
        ``server/discover`` pins the modern era). Raises :class:`~mcp_sync.errors.McpError`:

        * handshake era: a request other than ``initialize`` before it -> -32600; a second
          ``initialize`` -> -32600; an enveloped request -> -32600;
        * modern era: a missing or malformed envelope -> -32602; a version not served ->
          -32022 ``{supported, requested}``; ``initialize`` -> -32022 naming the served
          versions; a method removed at 2026-07-28 -> -32601.
        """
        self._check_role(Role.SERVER)
        if self.state is State.CLOSED:
            raise McpError(INVALID_REQUEST, f"{method} received after the connection closed")
        claimed = self.classify(method, params) if self.serve_modern else Era.HANDSHAKE
        if self.era is Era.MODERN:
            if method == "initialize":
                raise self._initialize_after_modern(params)
            return self._admit_modern(method, params)
        if self.era is Era.HANDSHAKE:
            if claimed is Era.MODERN:
                raise McpError(
                    INVALID_REQUEST,
                    f"{method} carries a 2026-07-28 envelope, but this connection was"
                    f" initialized at {self.protocol_version}",
                )
            return self._admit_handshake(method)
        if claimed is Era.MODERN:
            admission = self._admit_modern(method, params)
            if method != DISCOVER_METHOD:
                self._move("receive enveloped request")
            return admission
        return self._admit_handshake(method)

    def _admit_handshake(self, method: str) -> Admission:
        if method == "initialize":
            if self.state is not State.NEW:
                raise McpError(INVALID_REQUEST, "initialize was already received")
        elif not self.initialized:
            raise McpError(INVALID_REQUEST, f"{method} received before initialization completed")
        return Admission(Era.HANDSHAKE)

    def _admit_modern(self, method: str, params: Mapping[str, Any] | None) -> Admission:
        envelope = self.read_envelope(params)
        if method in REMOVED_AT_MODERN:
            raise McpError(
                METHOD_NOT_FOUND, f"Method not found: {method} (removed in protocol 2026-07-28)"
            )
        return Admission(Era.MODERN, envelope)

    @staticmethod
    def read_envelope(params: Mapping[str, Any] | None) -> RequestEnvelope:
        """The :class:`RequestEnvelope` of a modern request, or the error owed for it:
        -32602 for a missing or malformed member, -32022 for a version not served."""
        meta = _meta_of(params)
        if meta is None:
            raise McpError(
                INVALID_PARAMS,
                f"the request has no params._meta: {PROTOCOL_VERSION_KEY} and {CLIENT_CAPABILITIES_KEY} are required",
            )
        missing = [
            key for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if key not in meta
        ]
        if missing:
            raise McpError(
                INVALID_PARAMS,
                f"params._meta lacks {' and '.join(missing)}, which every request must carry",
            )
        version, capabilities = meta[PROTOCOL_VERSION_KEY], meta[CLIENT_CAPABILITIES_KEY]
        if not isinstance(version, str):
            raise McpError(INVALID_PARAMS, f"params._meta {PROTOCOL_VERSION_KEY} must be a string")
        if not _is_mapping(capabilities):
            raise McpError(
                INVALID_PARAMS, f"params._meta {CLIENT_CAPABILITIES_KEY} must be an object"
            )
        info = meta.get(CLIENT_INFO_KEY)
        if info is not None and not _is_mapping(info):
            raise McpError(INVALID_PARAMS, f"params._meta {CLIENT_INFO_KEY} must be an object")
        level = meta.get(LOG_LEVEL_KEY)
        if level is not None and not isinstance(level, str):
            raise McpError(INVALID_PARAMS, f"params._meta {LOG_LEVEL_KEY} must be a string")
        if version not in MODERN_VERSIONS:
            raise McpError(
                UNSUPPORTED_PROTOCOL_VERSION,
                f"Unsupported protocol version {version!r}",
                {"supported": list(MODERN_VERSIONS), "requested": version},
            )
        return RequestEnvelope(
            version, dict(capabilities), dict(info) if info is not None else None, level
        )

    @staticmethod
    def _initialize_after_modern(params: Mapping[str, Any] | None) -> McpError:
        requested = params.get("protocolVersion") if isinstance(params, Mapping) else None
        data: dict[str, Any] = {"supported": list(MODERN_VERSIONS)}
        if isinstance(requested, str):
            data["requested"] = requested
        return McpError(
            UNSUPPORTED_PROTOCOL_VERSION,
            f"initialize is not served on this connection, which speaks {', '.join(MODERN_VERSIONS)} (no handshake)",
            data,
        )

    def receive_initialize(self, params: Mapping[str, Any]) -> str:
        """(server) Take the client's ``initialize``: pins the handshake era; returns the
        version to answer (the client's if supported, else :data:`LATEST_HANDSHAKE_VERSION`).

        Records the client's capabilities and ``clientInfo``. A second ``initialize`` (or one
        on a modern connection) raises the error owed (see :meth:`admit`).
        """
        self._check_role(Role.SERVER)
        if self.era is Era.MODERN:
            raise self._initialize_after_modern(params)
        if self.state is not State.NEW:
            raise McpError(INVALID_REQUEST, "initialize was already received")
        requested = params.get("protocolVersion")
        version = (
            requested
            if isinstance(requested, str) and requested in HANDSHAKE_VERSIONS
            else LATEST_HANDSHAKE_VERSION
        )
        caps, info = params.get("capabilities"), params.get("clientInfo")
        self._move("receive initialize")
        self.protocol_version = version
        self.peer_capabilities = dict(caps) if isinstance(caps, Mapping) else {}
        self.peer_info = dict(info) if isinstance(info, Mapping) else {}
        return version

    def receive_notification(self, method: str) -> bool:
        """(server) Take an inbound lifecycle notification; False if it is to be dropped.

        ``notifications/initialized`` completes the handshake (dropped in any state but
        ``INITIALIZED``); on a modern connection the notifications 2026-07-28 removed are
        dropped. Every other notification is passed on (True).
        """
        self._check_role(Role.SERVER)
        if method == "notifications/initialized":
            if self.state is not State.INITIALIZED:
                return False
            self._move("receive initialized")
            return True
        return not (self.era is Era.MODERN and method in REMOVED_AT_MODERN)

    @staticmethod
    def check_served(method: str, declared: Mapping[str, Any] | Callable[[str], bool]) -> None:
        """(server) Raise -32601 if ``method`` belongs to a feature the server did not declare
        in ``declared`` (its capabilities, or a function that says whether it declares one):
        ``tools/*`` needs ``tools``, and so on."""
        capability = _SERVER_CAPABILITY_OF.get(method.partition("/")[0])
        if capability is None:
            return
        if not (declared(capability) if callable(declared) else capability in declared):
            raise McpError(
                METHOD_NOT_FOUND,
                f"{method}: this server did not declare the {capability!r} capability",
            )

    def _check_role(self, role: Role) -> None:
        if self.role is not role:
            raise RuntimeError(
                f"this is a {role.value}'s operation; the machine keeps the {self.role.value} side"
            )


_SERVER_CAPABILITY_OF: Mapping[str, str] = {
    "tools": "tools",
    "resources": "resources",
    "prompts": "prompts",
    "completion": "completions",
    "logging": "logging",
}
"""Method prefix -> the server capability it needs."""
