#!/usr/bin/env python
"""A command-line MCP client built with the official MCP Python SDK (``mcp`` 2.3.x), in its
default negotiation mode (``mode="auto"``: ``server/discover`` first, ``initialize`` as the
fallback). It connects to a server over stdio (a command after ``--``) or Streamable HTTP
(``--url``), runs a list of steps on one connection and prints ONE JSON object per line for
every event it observes.

    python official_client_2026.py [OPTIONS] STEPS_JSON -- CMD [ARGS...]
    python official_client_2026.py [OPTIONS] --url URL STEPS_JSON

STEPS_JSON is a JSON list of steps:
    {"op": "list"}                                  tools/list
    {"op": "call", "name": N, "arguments": {...}}   tools/call (the SDK drives input_required
                                                    rounds through the elicitation callback)
    {"op": "cancel", "name": N, "arguments": {...}, "after_marker": LINE}
                                                    start tools/call, cancel the calling task
                                                    once LINE appears in $PEER_EVENTS_FILE
                                                    (bounded by --marker-timeout)
    {"op": "wait_marker", "marker": LINE}           wait (bounded) for LINE in $PEER_EVENTS_FILE
    {"op": "listen", "tools": B, "resources": [URI...], "events": N}
                                                    client.listen(...): emit "acknowledged",
                                                    then a "listen_event" per event; leave the
                                                    stream (which cancels it) after N events, or
                                                    with N = 0 read until the server ends it
                                                    ("listen_ended")

Options:
    --mode M              "auto" (default), "legacy" or a version such as "2026-07-28"
    --url URL             Streamable HTTP instead of a command
    --elicit-json JSON    answer every elicitation/create with action "accept" and this content
    --marker-timeout S    bound of every marker wait (default 20)
    --overall-timeout S   bound of the whole run (default 60)
PEER_* variables of this process are passed to the server (the SDK forwards only a few others).

Events (key "event"): "connected" {protocolVersion, serverInfo}, "wire" {dir: ">>" to the server
| "<<" from it, msg}, "elicitation" {params}, "tools" {step, tools}, "result" {step, result},
"cancelled" {step, call_task_cancelled} (we cancelled the call), "acknowledged" {step,
subscription_id, honored}, "listen_event" {step, kind, uri}, "listen_ended" {step}, "error"
{step, type, code?, message}, "done" {ok}.
"""

from __future__ import annotations

import argparse
import builtins
import json
import os
import sys
import time
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

warnings.simplefilter("ignore")

T0 = time.monotonic()


def emit(event: str, **fields: Any) -> None:
    line = {"event": event, "t_ms": round((time.monotonic() - T0) * 1000, 1), **fields}
    print(json.dumps(line), flush=True)


def dump(model: Any) -> Any:
    return (
        model.model_dump(mode="json", by_alias=True, exclude_none=True)
        if hasattr(model, "model_dump")
        else model
    )


def wire_message(item: SessionMessage | Exception) -> Any:
    if isinstance(item, SessionMessage):
        return json.loads(item.message.model_dump_json(by_alias=True, exclude_unset=True))
    return {"exception": repr(item)}


async def relay(source: Any, sink: Any, direction: str) -> None:
    """Pass every item from ``source`` to ``sink``, emitting it as a "wire" event first."""
    async for item in source:
        emit("wire", dir=direction, msg=wire_message(item))
        await sink.send(item)


@asynccontextmanager
async def tapped(target: StdioServerParameters | str) -> AsyncIterator[Any]:
    """The SDK's stdio transport (server parameters) or Streamable HTTP transport (a URL), with
    every message in both directions emitted as "wire"."""
    inner = streamable_http_client(target) if isinstance(target, str) else stdio_client(target)
    async with inner as (read, write):
        to_client, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_server, from_client = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tg, to_client, from_client:
            tg.start_soon(relay, read, to_client, "<<")
            tg.start_soon(relay, from_client, write, ">>")
            try:
                yield from_server, to_server
            finally:
                tg.cancel_scope.cancel()


def marker_present(marker: str) -> bool:
    path = os.environ.get("PEER_EVENTS_FILE")
    if not path:
        return False
    try:
        return marker in Path(path).read_text(encoding="utf-8").split("\n")
    except FileNotFoundError:
        return False


async def wait_marker(marker: str, timeout: float) -> None:
    """Another process writes the file: poll with a short pause, bounded by ``timeout``."""
    with anyio.fail_after(timeout):
        while not marker_present(marker):
            await anyio.sleep(0.01)


def error_fields(error: BaseException) -> dict[str, Any]:
    fields: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    if isinstance(error, MCPError):
        fields.update(code=error.code, data=error.error.data)
    return fields


async def listen_step(client: Client, step: dict[str, Any], tag: dict[str, Any]) -> None:
    """One ``subscriptions/listen`` stream: leaving the ``async with`` cancels it."""
    wanted = step.get("events", 1)
    filters = {
        "tools_list_changed": step.get("tools", False),
        "resource_subscriptions": step.get("resources", []),
    }
    async with client.listen(**filters) as sub:
        emit("acknowledged", **tag, subscription_id=sub.subscription_id, honored=dump(sub.honored))
        seen = 0
        async for event in sub:
            emit("listen_event", **tag, kind=type(event).__name__, uri=getattr(event, "uri", None))
            seen += 1
            if seen == wanted:
                return
        emit("listen_ended", **tag)


async def run_step(
    client: Client, step: dict[str, Any], index: int, ns: argparse.Namespace
) -> bool:
    tag = {"step": index, "op": step["op"]}
    try:
        if step["op"] == "list":
            listed = await client.list_tools(cache_mode="bypass")
            emit("tools", **tag, tools=[t.name for t in listed.tools])
        elif step["op"] == "call":
            emit(
                "result",
                **tag,
                result=dump(await client.call_tool(step["name"], step.get("arguments", {}))),
            )
        elif step["op"] == "cancel":
            scope = anyio.CancelScope()
            outcome: dict[str, Any] = {}

            async def call() -> None:
                with scope:
                    try:
                        outcome["result"] = dump(
                            await client.call_tool(step["name"], step.get("arguments", {}))
                        )
                    except MCPError as e:
                        outcome["error"] = error_fields(e)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                if "after_marker" in step:
                    await wait_marker(step["after_marker"], ns.marker_timeout)
                scope.cancel()
            emit("cancelled", **tag, call_task_cancelled=scope.cancelled_caught, **outcome)
        elif step["op"] == "listen":
            await listen_step(client, step, tag)
        elif step["op"] == "wait_marker":
            await wait_marker(step["marker"], ns.marker_timeout)
            emit("marker", **tag, marker=step["marker"])
        else:
            raise ValueError(f"unknown op {step['op']!r}")
        return True
    except Exception as e:  # noqa: BLE001 - reported for the test to judge
        emit("error", **tag, **error_fields(e))
        return False


async def run(ns: argparse.Namespace, steps: list[dict[str, Any]], command: list[str]) -> bool:
    env = {k: v for k, v in os.environ.items() if k.startswith("PEER_")}
    target = (
        ns.url if ns.url else StdioServerParameters(command=command[0], args=command[1:], env=env)
    )
    callbacks: dict[str, Any] = {}
    if ns.elicit_json is not None:
        content = json.loads(ns.elicit_json)

        async def elicit(
            ctx: ClientRequestContext, params: types.ElicitRequestParams
        ) -> types.ElicitResult:
            emit("elicitation", params=dump(params))
            return types.ElicitResult(action="accept", content=content)

        callbacks["elicitation_callback"] = elicit
    ok = True
    try:
        with anyio.fail_after(ns.overall_timeout):
            async with Client(tapped(target), mode=ns.mode, **callbacks) as client:
                emit(
                    "connected",
                    protocolVersion=client.protocol_version,
                    serverInfo=dump(client.server_info),
                )
                for index, step in enumerate(steps):
                    ok = await run_step(client, step, index, ns) and ok
    except BaseException as e:  # noqa: BLE001 - connect failure or overall timeout
        if isinstance(e, KeyboardInterrupt):
            raise
        while isinstance(e, getattr(builtins, "BaseExceptionGroup", ())) and e.exceptions:  # 3.11+
            e = e.exceptions[0]
        emit("error", step="connect", **error_fields(e))
        ok = False
    emit("done", ok=ok)
    return ok


def main(argv: list[str]) -> int:
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="auto")
    parser.add_argument("--url")
    parser.add_argument("--elicit-json")
    parser.add_argument("--marker-timeout", type=float, default=20.0)
    parser.add_argument("--overall-timeout", type=float, default=60.0)
    parser.add_argument("steps")
    ns = parser.parse_args(argv[:split])
    if (ns.url is None) == (split == len(argv)):
        raise SystemExit(
            "usage: official_client_2026.py [OPTIONS] STEPS_JSON (-- CMD [ARGS...] | --url URL)"
        )
    return 0 if anyio.run(run, ns, json.loads(ns.steps), argv[split + 1 :]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
