"""A deliberately MISBEHAVING MCP server, for ``mcp-sync check-cancel`` to catch.

Plain Python, no mcp_sync: JSON-RPC lines on stdin/stdout. It speaks just enough MCP
(``initialize``, ``ping``, ``tools/list``, ``tools/call``) and breaks the cancellation rules
on purpose:

* it ignores ``notifications/cancelled``: a cancelled ``slow`` call runs to the end and
  is still answered;
* it answers a malformed cancellation (no params, no ``requestId``, or one that is not a
  string or an integer) with a JSON-RPC error, although nobody may answer a notification.

Tool: ``slow(seconds)`` works for ``seconds`` in 10 steps, sending ``notifications/progress``
when the call carried a ``progressToken``.

    python tests/peers/bad_cancel_server.py
    python tests/peers/bad_cancel_server.py --exit-on-cancel   # worse: dies on a cancellation
                                                                  # (of anything but initialize)
    python tests/peers/bad_cancel_server.py --drop-cancelled-initialize
        # answers initialize after 1 s, unless it was cancelled meanwhile (allowed: a server may
        # act on the cancellation of initialize, which no client should send)
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

_out = threading.Lock()
_never = threading.Event()  # waited on as simulated work: never set
_initialize_id: list[Any] = [None]
_cancelled: set[Any] = set()

TOOLS = [
    {
        "name": "slow",
        "description": "Work for `seconds`; cannot be cancelled.",
        "inputSchema": {
            "type": "object",
            "properties": {"seconds": {"type": "number"}},
            "required": ["seconds"],
        },
    }
]


def send(message: dict[str, Any]) -> None:
    line = json.dumps({"jsonrpc": "2.0", **message}) + "\n"
    with _out:
        sys.stdout.write(line)
        sys.stdout.flush()


def slow(request_id: Any, params: dict[str, Any]) -> None:
    arguments = params.get("arguments") or {}
    seconds = float(arguments.get("seconds", 1))
    token = (params.get("_meta") or {}).get("progressToken")
    for step in range(1, 11):
        _never.wait(seconds / 10)  # simulated work that never looks for a cancellation
        if token is not None:
            send(
                {
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": step, "total": 10},
                }
            )
    send(
        {
            "id": request_id,
            "result": {"content": [{"type": "text", "text": f"slept {seconds}"}], "isError": False},
        }
    )


def initialize(request_id: Any, params: dict[str, Any], delay: float) -> None:
    if delay:
        _never.wait(delay)  # slow to answer, like a server that handles requests asynchronously
        if request_id in _cancelled:
            return  # it acts on the cancellation of initialize (allowed)
    send(
        {
            "id": request_id,
            "result": {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bad-cancel-server", "version": "0"},
            },
        }
    )


def handle_request(request_id: Any, method: str, params: dict[str, Any]) -> None:
    if method == "initialize":
        _initialize_id[0] = request_id
        if "--drop-cancelled-initialize" in sys.argv[1:]:
            threading.Thread(target=initialize, args=(request_id, params, 1.0), daemon=True).start()
        else:
            initialize(request_id, params, 0)
    elif method == "ping":
        send({"id": request_id, "result": {}})
    elif method == "tools/list":
        send({"id": request_id, "result": {"tools": TOOLS}})
    elif method == "tools/call" and params.get("name") == "slow":
        threading.Thread(target=slow, args=(request_id, params), daemon=True).start()
    else:
        send(
            {"id": request_id, "error": {"code": -32601, "message": f"Method not found: {method}"}}
        )


def handle_notification(method: str, params: Any) -> None:
    if method != "notifications/cancelled":
        return
    request_id = params.get("requestId") if isinstance(params, dict) else None
    valid = isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
    if valid:
        _cancelled.add(request_id)
    if (
        valid and request_id != _initialize_id[0] and "--exit-on-cancel" in sys.argv[1:]
    ):  # WRONG: dies
        sys.exit(3)
    if not valid:  # WRONG: a notification must never be answered
        send({"id": None, "error": {"code": -32602, "message": "Invalid params: bad cancellation"}})
    # WRONG: a valid cancellation is ignored; the call goes on and is answered


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            send({"id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        method = message.get("method")
        params = message.get("params") or {}
        if "id" in message and isinstance(method, str):
            handle_request(message["id"], method, params if isinstance(params, dict) else {})
        elif isinstance(method, str):
            handle_notification(method, message.get("params"))


if __name__ == "__main__":
    main()
