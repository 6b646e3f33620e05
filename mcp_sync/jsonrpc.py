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
from dataclasses import dataclass, field
from typing import Any, Union

from pydantic_core import SchemaSerializer, core_schema, from_json
from typing_extensions import TypeGuard

__all__ = [
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "RESOURCE_NOT_FOUND",
    "URL_ELICITATION_REQUIRED",
    "RequestId",
    "Request",
    "Notification",
    "Response",
    "ErrorResponse",
    "InvalidMessage",
    "Message",
    "decode",
    "encode",
    "is_valid_id",
    "id_key",
    "error_object",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002
URL_ELICITATION_REQUIRED = -32042

RequestId = Union[int, str]

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
    ``detail`` says what was wrong, for logs.
    """

    detail: str
    reply: ErrorResponse | None = None
    raw: Any = field(default=None, repr=False)


Message = Union[Request, Notification, Response, ErrorResponse]


def _invalid_request(detail: str, raw: Any, msg_id: Any = None) -> InvalidMessage:
    reply_id = msg_id if is_valid_id(msg_id) else None
    return InvalidMessage(detail, ErrorResponse(reply_id, INVALID_REQUEST, detail), raw)


def decode(line: bytes | str) -> Message | InvalidMessage:
    """Decode one line (without its newline) into a message or an :class:`InvalidMessage`."""
    try:
        if isinstance(line, (bytes, bytearray)):
            try:
                obj = from_json(line)  # pydantic-core's parser: strict UTF-8, and fast
            except ValueError:
                # what it refuses that JSON allows (an escaped lone surrogate, say); strict
                # UTF-8 here too: json.loads(bytes) would also accept UTF-16/32
                obj = json.loads(line.decode("utf-8"))
        else:
            obj = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        return InvalidMessage(
            f"parse error: {exc}", ErrorResponse(None, PARSE_ERROR, "Parse error"), line
        )
    return decode_object(obj)


def decode_object(obj: Any) -> Message | InvalidMessage:
    """Classify an already-parsed JSON value (see :func:`decode`)."""
    if type(obj) is not dict:
        if type(obj) is list:
            return _invalid_request("batches are not supported", obj)
        return _invalid_request("a message must be a JSON object", obj)
    msg_id = obj.get("id")
    if obj.get("jsonrpc") != "2.0":
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
            return InvalidMessage("a response has both result and error", None, obj)
        if "error" in obj:
            error = obj["error"]
            if (
                type(error) is not dict
                or type(error.get("code")) is not int
                or type(error.get("message")) is not str
            ):
                return InvalidMessage("malformed error object", None, obj)
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
    written as ``null``.
    """
    obj = message if isinstance(message, dict) else message.to_json()
    try:
        return _to_json(obj) + b"\n"
    except (ValueError, TypeError):
        pass
    try:
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(obj, separators=(",", ":")) + "\n").encode()
