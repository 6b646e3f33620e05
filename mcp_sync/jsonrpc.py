"""The JSON-RPC 2.0 wire envelope as MCP uses it: one JSON object per line.

:func:`decode` turns one line into a :class:`Request`, :class:`Notification`,
:class:`Response` or :class:`ErrorResponse` -- or into an :class:`InvalidMessage` that carries
the exact error owed to the peer. :func:`encode` turns a message back into one line of UTF-8
bytes with no embedded newline.

Request ids keep their JSON type: ``"7"`` and ``7`` are different ids. A boolean, ``null`` or a
fractional number is not a valid id. Use :func:`id_key` to key a dict by id.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from pydantic_core import SchemaSerializer, core_schema, from_json

__all__ = [
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "RESOURCE_NOT_FOUND",
    "URL_ELICITATION_REQUIRED",
    "HEADER_MISMATCH",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "MAX_NESTING_DEPTH",
    "RequestId",
    "Request",
    "Notification",
    "Response",
    "ErrorResponse",
    "InvalidMessage",
    "Message",
    "decode",
    "parse_first",
    "encode",
    "is_valid_id",
    "id_key",
    "valid_id_key",
    "error_object",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002
URL_ELICITATION_REQUIRED = -32042
HEADER_MISMATCH = -32020
"""(2026-07-28, HTTP) A routing header disagrees with the request body."""
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
"""(2026-07-28) The request needs a client capability its envelope does not declare."""
UNSUPPORTED_PROTOCOL_VERSION = -32022
"""(2026-07-28) The request's protocol version is not served (``data``: supported, requested)."""

RequestId = int | str

MAX_NESTING_DEPTH = 200
"""How deep a message may nest -- no value in it may sit more than this many levels of arrays
and objects below its top-level object (``{"params": {"a": [1]}}``: ``1`` is at level 3).

A deeper message is refused whole: a request gets a -32600 error that says so (with its id,
read from the raw line), a response fails the call it answers with
:class:`~mcp_sync.errors.PeerMisbehaved`, a notification is dropped. This is the limit of
pydantic-core's JSON parser, and mcp_sync enforces it on every decoding path, so nothing that
walks a decoded message later (validation, serialisation) can run out of stack.
"""

# pydantic-core's serializer for "any" value: the output of ``pydantic_core.to_json`` (models
# by their aliases, the wire names), but NaN and infinities as null, and about twice as fast
# on long ASCII strings (a 100 KiB tool argument: ~70 us, not ~150 us)
_ANY = SchemaSerializer(core_schema.any_schema())


def _to_json(obj: Any) -> bytes:
    return _ANY.to_json(obj, by_alias=True)


def is_valid_id(value: object) -> TypeGuard[RequestId]:
    """True for a JSON-RPC id MCP accepts: a string or an integer (never a bool or float)."""
    t = type(value)
    return t is str or t is int


def id_key(value: RequestId) -> tuple[type, RequestId]:
    """A hashable key that keeps ``"7"`` and ``7`` apart (and ``True`` away from ``1``).

    The key holds the value's type: ``(int, 1)`` and ``(bool, True)`` differ, although
    ``1 == True`` in Python.
    """
    return (type(value), value)


def valid_id_key(value: object) -> tuple[type, RequestId] | None:
    """:func:`id_key` of ``value`` if :func:`is_valid_id` accepts it, else ``None`` (the two
    in one step, for code that keys every message it routes)."""
    t = type(value)
    return (t, value) if t is str or t is int else None  # type: ignore[return-value]


def error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    """Build a JSON-RPC ``error`` member."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


@dataclass(frozen=True)
class Request:
    """A request: it has an ``id`` and expects exactly one response."""

    id: RequestId
    method: str
    params: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.id, "method": self.method}
        if self.params is not None:
            msg["params"] = self.params
        return msg


@dataclass(frozen=True)
class Notification:
    """A notification: no ``id``, never answered."""

    method: str
    params: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": self.method}
        if self.params is not None:
            msg["params"] = self.params
        return msg


@dataclass(frozen=True)
class Response:
    """A successful response."""

    id: RequestId
    result: Any

    def to_json(self) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": self.id, "result": self.result}


@dataclass(frozen=True)
class ErrorResponse:
    """An error response. ``id`` is ``None`` when the peer could not tell which request."""

    id: RequestId | None
    code: int
    message: str
    data: Any = None

    def to_json(self) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": self.id,
            "error": error_object(self.code, self.message, self.data),
        }


@dataclass(frozen=True)
class InvalidMessage:
    """A line that is not a valid message.

    ``reply`` is the :class:`ErrorResponse` owed to the peer, or ``None`` when nothing may be
    answered (for example a malformed response: answering a response would be wrong).
    ``detail`` says what was wrong, for logs. ``response_id`` is the id of an invalid
    *response* when it can be read: the call it answers has failed.
    """

    detail: str
    reply: ErrorResponse | None = None
    raw: Any = field(default=None, repr=False)
    response_id: RequestId | None = None


Message = Request | Notification | Response | ErrorResponse


def _invalid_request(detail: str, raw: Any, msg_id: Any = None) -> InvalidMessage:
    reply_id = msg_id if is_valid_id(msg_id) else None
    return InvalidMessage(detail, ErrorResponse(reply_id, INVALID_REQUEST, detail), raw)


def parse_first(data: bytes | str) -> Any:
    """The JSON value of ``data`` as :func:`decode` parses it first (pydantic-core's parser:
    strict UTF-8, depth-limited); :class:`ValueError` for anything that parser refuses
    (where :func:`decode` goes on with its fallbacks). For a value it returns,
    ``decode_object(value)`` is exactly what ``decode(data)`` returns: a caller that parsed
    a line this way for its own checks can hand the message on without parsing it again."""
    return from_json(data)


def decode(line: bytes | str) -> Message | InvalidMessage:
    """Decode one line (without its newline) into a message or an :class:`InvalidMessage`.

    A line nested deeper than :data:`MAX_NESTING_DEPTH` is refused with an error that says
    so, addressed to the id read from the raw line.
    """
    try:
        try:
            obj = parse_first(line)  # pydantic-core's parser: strict UTF-8, fast, depth-limited
        except ValueError as exc:
            if "recursion limit" in str(exc):
                return _too_deep(line)
            # what it refuses that JSON allows (an escaped lone surrogate, say); strict
            # UTF-8 here too: json.loads(bytes) would also accept UTF-16/32
            obj = json.loads(line.decode("utf-8") if isinstance(line, (bytes, bytearray)) else line)
            if _nested_deeper_than(obj, MAX_NESTING_DEPTH):
                return _too_deep(line)
    except RecursionError:
        return _too_deep(line)
    except (ValueError, UnicodeDecodeError):
        # one detail for every parse error: it keys the dropped-message counts, which must
        # not grow with what a peer sends (the line itself is logged at DEBUG)
        return InvalidMessage("parse error", ErrorResponse(None, PARSE_ERROR, "Parse error"), line)
    return decode_object(obj)


def _nested_deeper_than(obj: Any, limit: int) -> bool:
    """True if some value sits more than ``limit`` levels below ``obj`` (no recursion)."""
    if type(obj) not in (dict, list):
        return False
    stack = [(obj, 0)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if type(value) is dict else value
        if not children:
            continue
        if depth >= limit:  # its members sit at depth + 1
            return True
        stack.extend((child, depth + 1) for child in children if type(child) in (dict, list))
    return False


# a JSON string, or a run of brackets (a run's depth change is all that matters in valid JSON)
_SCAN_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]+')
_SCAN_COLON = re.compile(rb"\s*:")
_SCAN_SCALAR = re.compile(
    rb'\s*:\s*("[^"\\]*(?:\\.[^"\\]*)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)'
)
_SCAN_KEYS = ("id", "method", "result", "error")


def _top_level_members(data: bytes) -> dict[str, Any]:
    """Which of ``id``/``method``/``result``/``error`` the top-level object of ``data`` holds,
    without parsing it (it nests too deep to parse): a scan of strings and brackets. The
    value is kept for a scalar ``id``, ``...`` stands for anything else."""
    found: dict[str, Any] = {}
    depth = 0
    for match in _SCAN_TOKEN.finditer(data):
        token = match.group()
        if token[0] != 0x22:  # brackets
            depth += token.count(b"[") + token.count(b"{") - token.count(b"]") - token.count(b"}")
            if depth <= 0:
                break
            continue
        if depth != 1 or not _SCAN_COLON.match(data, match.end()):
            continue  # a string value, or a key of a nested object
        try:
            key = json.loads(token)
        except ValueError:
            continue
        if key not in _SCAN_KEYS or key in found:
            continue
        scalar = _SCAN_SCALAR.match(data, match.end()) if key == "id" else None
        found[key] = json.loads(scalar.group(1)) if scalar is not None else ...
        if "id" in found and len(found) > 1:
            break  # enough to know whom to answer
    return found


def _too_deep(line: bytes | str) -> InvalidMessage:
    data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else bytes(line)
    members = _top_level_members(data)
    msg_id = members.get("id")
    readable = msg_id if is_valid_id(msg_id) else None
    detail = f"nesting too deep: more than {MAX_NESTING_DEPTH} levels"
    if "method" in members:
        if "id" not in members:
            return InvalidMessage(detail, None, line)  # a notification: nothing may be answered
        return InvalidMessage(detail, ErrorResponse(readable, INVALID_REQUEST, detail), line)
    if "result" in members or "error" in members:
        return InvalidMessage(detail, None, line, response_id=readable)
    return InvalidMessage(detail, ErrorResponse(readable, INVALID_REQUEST, detail), line)


def decode_object(obj: Any) -> Message | InvalidMessage:
    """Classify an already-parsed JSON value (see :func:`decode`)."""
    if type(obj) is not dict:
        if type(obj) is list:
            return _invalid_request("batches are not supported", obj)
        return _invalid_request("a message must be a JSON object", obj)
    msg_id = obj.get("id")
    readable_id = msg_id if is_valid_id(msg_id) else None
    if obj.get("jsonrpc") != "2.0":
        if "method" not in obj and (
            "result" in obj or "error" in obj
        ):  # a response: never answered
            return InvalidMessage('"jsonrpc" must be "2.0"', None, obj, readable_id)
        return _invalid_request('"jsonrpc" must be "2.0"', obj, msg_id)
    if "method" in obj:
        method = obj["method"]
        if type(method) is not str:
            return _invalid_request('"method" must be a string', obj, msg_id)
        params = obj.get("params")
        has_id = "id" in obj
        if has_id and not is_valid_id(msg_id):
            return _invalid_request("the id must be a string or an integer", obj)
        if params is not None and type(params) is not dict:
            if not has_id:
                return InvalidMessage('"params" must be an object', None, obj)
            return _invalid_request('"params" must be an object', obj, msg_id)
        if has_id and is_valid_id(msg_id):
            return Request(msg_id, method, params)
        return Notification(method, params)
    if "result" in obj or "error" in obj:
        if "result" in obj and "error" in obj:
            return InvalidMessage("a response has both result and error", None, obj, readable_id)
        if "error" in obj:
            error = obj["error"]
            if (
                type(error) is not dict
                or type(error.get("code")) is not int
                or type(error.get("message")) is not str
            ):
                return InvalidMessage("malformed error object", None, obj, readable_id)
            if msg_id is not None and not is_valid_id(msg_id):
                return InvalidMessage("error response with an invalid id", None, obj)
            return ErrorResponse(msg_id, error["code"], error["message"], error.get("data"))
        if not is_valid_id(msg_id):
            return InvalidMessage("response with an invalid id", None, obj)
        return Response(msg_id, obj["result"])
    return _invalid_request("not a request, notification or response", obj, msg_id)


def encode(message: Message | dict[str, Any]) -> bytes:
    """Encode a message as one line of UTF-8 JSON, newline included.

    JSON escapes control characters inside strings, so the line never contains an embedded
    newline. Encoding uses pydantic-core's serializer (several times faster than
    :func:`json.dumps` on large messages); strings holding lone surrogates fall back to
    :mod:`json` with ASCII escapes. NaN and infinities, which JSON cannot express, are
    written as ``null``. A value nested too deep to serialise raises :class:`ValueError`.
    """
    obj = message if isinstance(message, dict) else message.to_json()
    try:
        return _to_json(obj) + b"\n"
    except (ValueError, TypeError):
        pass
    try:
        try:
            return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        except UnicodeEncodeError:
            return (json.dumps(obj, separators=(",", ":")) + "\n").encode()
    except RecursionError:
        raise ValueError("cannot encode the message: its values nest too deep") from None
