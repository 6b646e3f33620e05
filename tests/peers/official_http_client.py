#!/usr/bin/env python
"""The official MCP Python SDK's Streamable HTTP client (mcp 2.3.x), as a real peer for
mcp_sync's WSGI server. Adapted from the team's reference client script (which spawns stdio
servers); this one only speaks HTTP and runs a script of steps in ONE session, so the SDK's
start-up cost is paid once.

    python official_http_client.py URL STEPS_JSON [--mode auto|legacy] [--roots URI,...]
                                   [--callback-delay S] [--overall-timeout S]

STEPS_JSON is a JSON list of steps, each {"op": ..., ...}:

    {"op": "list"}                               tools/list
    {"op": "call", "name": N, "args": {...}, "progress": bool}
    {"op": "cancel", "name": N, "args": {...}, "cancel_after": S, "grace": S}
        start tools/call with a progress callback; cancel the calling task at the first
        progress notification (or after cancel_after seconds), then watch for `grace` s
    {"op": "wait_wire", "method": M, "count": N, "timeout": S}
        wait until N messages with method M have come from the server (fails after S s)

Prints ONE JSON object: {"ok", "protocolVersion", "serverInfo", "steps": [...],
"callbacks": [...], "wire": [...]}. Wire entries are {"dir": ">>" (to the server) |
"<<" (from the server), "t", "msg"}: the JSON-RPC messages crossing the SDK's transport.
"callbacks" records each roots/list callback: request id, started/finished/cancelled times.
On exit the SDK ends the session with DELETE (terminate_on_close).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

try:
    from builtins import BaseExceptionGroup
except ImportError:  # Python 3.10: anyio depends on the backport
    from exceptiongroup import BaseExceptionGroup

warnings.simplefilter("ignore")

# the wire tap, clock and dump helpers are shared with the stdio interop client (this folder)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from official_client import Tap, dump, now  # noqa: E402

CALLBACKS: list[dict[str, Any]] = []


def build_callbacks(ns: argparse.Namespace) -> dict[str, Any]:
    if ns.roots is None:
        return {}
    roots = [types.Root(uri=u) for u in ns.roots.split(",") if u]

    async def list_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
        entry: dict[str, Any] = {
            "method": "roots/list",
            "request_id": ctx.request_id,
            "started": now(),
        }
        CALLBACKS.append(entry)
        try:
            await anyio.sleep(ns.callback_delay)
        except anyio.get_cancelled_exc_class():
            entry["cancelled"] = now()
            raise
        entry["finished"] = now()
        return types.ListRootsResult(roots=roots)

    return {"list_roots_callback": list_roots}


async def run_step(client: Client, step: dict[str, Any], tap: Tap) -> dict[str, Any]:
    op = step["op"]
    out: dict[str, Any] = {"op": op, "started_at": now()}
    try:
        if op == "wait_wire":

            def seen() -> int:
                return sum(
                    1
                    for w in tap.wire
                    if w["dir"] == "<<" and w["msg"].get("method") == step["method"]
                )

            with anyio.fail_after(step.get("timeout", 5.0)):
                while seen() < step["count"]:
                    await anyio.sleep(0.01)
            out["seen"] = seen()
        elif op == "list":
            result = await client.list_tools()
            out["tools"] = [t.name for t in result.tools]
        elif op == "call":
            progress: list[Any] = []

            async def on_progress(p: float, total: float | None, msg: str | None) -> None:
                progress.append({"progress": p, "total": total, "message": msg})

            result = await client.call_tool(
                step["name"],
                step.get("args", {}),
                progress_callback=on_progress if step.get("progress") else None,
            )
            out["result"] = dump(result)
            out["progress"] = progress
        elif op == "cancel":
            first_progress = anyio.Event()

            async def on_first(p: float, total: float | None, msg: str | None) -> None:
                first_progress.set()

            scope = anyio.CancelScope()
            outcome: dict[str, Any] = {}

            async def call() -> None:
                with scope:
                    try:
                        r = await client.call_tool(
                            step["name"], step.get("args", {}), progress_callback=on_first
                        )
                        outcome["result"] = dump(r)
                    except MCPError as e:
                        outcome["error"] = {"code": e.code, "message": e.error.message}
                outcome["call_task_cancelled"] = scope.cancelled_caught

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                with anyio.move_on_after(step.get("cancel_after", 5.0)):
                    await first_progress.wait()
                out["cancel_trigger"] = "progress" if first_progress.is_set() else "timer"
                out["cancelled_at"] = now()
                scope.cancel()
            await anyio.sleep(step.get("grace", 0.5))  # watch the wire for a late response
            out["outcome"] = outcome
        else:
            raise ValueError(f"unknown op {op!r}")
        out["ok"] = True
    except MCPError as e:
        out["error"] = {"type": "MCPError", "code": e.code, "message": e.error.message}
    except Exception as e:
        out["error"] = {"type": type(e).__name__, "message": str(e)}
    out["ended_at"] = now()
    return out


async def run(ns: argparse.Namespace) -> dict[str, Any]:
    tap = Tap()
    out: dict[str, Any] = {"ok": False, "url": ns.url, "mode": ns.mode, "steps": []}
    client = Client(tap.transport(ns.url), mode=ns.mode, **build_callbacks(ns))
    try:
        with anyio.fail_after(ns.overall_timeout):
            async with client:
                out["protocolVersion"] = client.protocol_version
                out["serverInfo"] = dump(client.server_info)
                for step in json.loads(ns.steps):
                    out["steps"].append(await run_step(client, step, tap))
        out["ok"] = all(step.get("ok") for step in out["steps"])
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        leaf = e
        while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
            leaf = leaf.exceptions[0]
        out["error"] = {"type": type(leaf).__name__, "message": str(leaf)}
    out["callbacks"] = CALLBACKS
    out["wire"] = tap.wire
    out["closed_at"] = now()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("steps")
    ap.add_argument("--mode", default="auto")
    ap.add_argument("--roots")
    ap.add_argument("--callback-delay", type=float, default=0.0)
    ap.add_argument("--overall-timeout", type=float, default=60.0)
    ns = ap.parse_args()
    out = anyio.run(run, ns)
    print(json.dumps(out))
    sys.exit(0 if out.get("ok") else 1)


if __name__ == "__main__":
    main()
