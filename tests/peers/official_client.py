#!/usr/bin/env python
"""Command-line MCP client built with the official MCP Python SDK (mcp 2.3.x): the real peer
for mcp_sync's server in the interoperability tests. Adapted from the team's reference script.

Spawns a server over stdio, runs one scenario (or a script of several in ONE session, to pay
the SDK's start-up cost once) and prints ONE JSON object on stdout.

    python official_client.py [OPTIONS] SCENARIO [ARGS...] -- CMD [CMD_ARGS...]

Scenarios:
    list                               tools/list
    call NAME JSONARGS                 tools/call (with --progress: pass a progress callback,
                                       which makes the SDK add _meta.progressToken)
    cancel NAME JSONARGS               start tools/call (with a progress callback), cancel the
                                       calling task after the first progress notification or
                                       after --cancel-after seconds (whichever first), then
                                       watch the wire for --grace seconds
    timeout NAME JSONARGS SECONDS      tools/call with read_timeout_seconds=SECONDS
    ping                               ping
    resources                          resources/list and resources/templates/list
    read URI                           resources/read
    prompts                            prompts/list
    prompt NAME JSONARGS               prompts/get
    complete REFJSON ARGNAME VALUE [CONTEXTJSON]
                                       completion/complete (REFJSON: {"type": "ref/prompt",
                                       "name": ...} or {"type": "ref/resource", "uri": ...})
    script STEPSJSON                   run several steps in one session: a JSON list of
                                       {"op": SCENARIO, "args": [...], "progress": bool,
                                       "cancel_after": S, "grace": S}; the output has "steps",
                                       one result object per step (a failing step does not stop
                                       the others)

Options:
    --legacy                 mode="legacy": skip the server/discover probe, do initialize
    --mode MODE              "auto" (default: probe server/discover, fall back to initialize)
                             | "legacy" | "2026-07-28"
    --wire                   include the captured wire (both directions) in the output
                             (always included for cancel/timeout/script)
    --progress               pass a progress callback in "call"
    --cancel-after S         bounded wait before cancelling (default 1.0)
    --grace S                how long to watch for a late response after cancel (default 1.0)
    --final-grace S          keep the session open S seconds after the scenario (default 0)
    --roots URI[,URI...]     answer roots/list with these roots (declares roots capability)
    --sampling-text TEXT     answer sampling/createMessage with this text (declares sampling)
    --elicit-json JSON       answer elicitation/create with action=accept, content=JSON
                             (URL mode: action=accept without content); the request's
                             params are recorded in "callbacks"
    --callback-delay S       sleep S seconds inside those callbacks
    --roots-delays S[,S...]  per-call delay of the roots callback: the first roots/list waits
                             the first value, the second the second, ...; afterwards
                             --callback-delay applies. "callbacks" in the output records each
                             callback's request id and started/finished/cancelled times
    --env K=V                extra env var for the server (repeatable). PEER_* vars of this
                             process are forwarded automatically (the SDK otherwise only
                             inherits HOME, LOGNAME, PATH, SHELL, TERM, USER).
    --overall-timeout S      bound for the whole run incl. connect and close (default 60)

Output keys: ok, scenario, mode, protocolVersion, serverInfo, ... plus scenario specific keys.
Wire entries are {"dir": ">>" (client to server) | "<<" (server to client), "t", "msg"}.
Exit code 0 when ok, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

try:
    _ExceptionGroup = BaseExceptionGroup
except NameError:  # Python 3.10: anyio depends on the backport
    from exceptiongroup import BaseExceptionGroup as _ExceptionGroup

warnings.simplefilter("ignore")

T0 = time.monotonic()
SCENARIOS = [
    "list",
    "call",
    "cancel",
    "timeout",
    "ping",
    "resources",
    "read",
    "prompts",
    "prompt",
    "complete",
    "script",
]


def now() -> float:
    return round(time.monotonic() - T0, 4)


def dump(model: Any) -> Any:
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return model


class Tap:
    """Records every JSON-RPC message crossing the transport."""

    def __init__(self) -> None:
        self.wire: list[dict[str, Any]] = []

    def record(self, direction: str, item: SessionMessage | Exception) -> None:
        if isinstance(item, SessionMessage):
            msg = json.loads(item.message.model_dump_json(by_alias=True, exclude_unset=True))
        else:
            msg = {"exception": repr(item)}
        self.wire.append({"dir": direction, "t": now(), "msg": msg})

    @asynccontextmanager
    async def transport(self, params: StdioServerParameters | str):
        """The SDK's stdio transport (for server parameters) or Streamable HTTP (for a URL)."""
        inner = streamable_http_client(params) if isinstance(params, str) else stdio_client(params)
        async with inner as (read, write):
            in_send, in_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            out_send, out_recv = anyio.create_memory_object_stream[SessionMessage](0)

            async def pump_in() -> None:
                async with in_send:
                    async for item in read:
                        self.record("<<", item)
                        await in_send.send(item)

            async def pump_out() -> None:
                async with out_recv:
                    async for item in out_recv:
                        self.record(">>", item)
                        await write.send(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(pump_in)
                tg.start_soon(pump_out)
                try:
                    yield in_recv, out_send
                finally:
                    tg.cancel_scope.cancel()


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        raise SystemExit("usage: official_client.py [OPTIONS] SCENARIO [ARGS...] -- CMD [ARGS...]")
    i = argv.index("--")
    ours, cmd = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser()
    ap.add_argument("--legacy", action="store_true")
    ap.add_argument("--mode", default="auto")
    ap.add_argument("--wire", action="store_true")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--cancel-after", type=float, default=1.0)
    ap.add_argument("--grace", type=float, default=1.0)
    ap.add_argument("--final-grace", type=float, default=0.0)
    ap.add_argument("--roots")
    ap.add_argument("--sampling-text")
    ap.add_argument("--elicit-json")
    ap.add_argument("--callback-delay", type=float, default=0.0)
    ap.add_argument("--roots-delays", default="")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--overall-timeout", type=float, default=60.0)
    ap.add_argument("scenario", choices=SCENARIOS)
    ap.add_argument("args", nargs="*")
    ns = ap.parse_args(ours)
    if ns.legacy:
        ns.mode = "legacy"
    ns.roots_delays = [float(x) for x in ns.roots_delays.split(",") if x]
    return ns, cmd


CALLBACK_LOG: list[dict[str, Any]] = []


async def callback_delay(ctx: ClientRequestContext, method: str, delay: float) -> dict[str, Any]:
    """Optional artificial latency in server->client callbacks; records whether it was cancelled."""
    entry: dict[str, Any] = {
        "method": method,
        "request_id": ctx.request_id,
        "delay": delay,
        "started": now(),
    }
    CALLBACK_LOG.append(entry)
    try:
        if delay:
            await anyio.sleep(delay)
    except anyio.get_cancelled_exc_class():
        entry["cancelled"] = now()
        raise
    entry["finished"] = now()
    return entry


def build_callbacks(ns: argparse.Namespace) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    if ns.roots is not None:
        roots = [types.Root(uri=u) for u in ns.roots.split(",") if u]
        pending_delays = list(ns.roots_delays)

        async def list_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
            delay = pending_delays.pop(0) if pending_delays else ns.callback_delay
            await callback_delay(ctx, "roots/list", delay)
            return types.ListRootsResult(roots=roots)

        kw["list_roots_callback"] = list_roots
    if ns.sampling_text is not None:
        text = ns.sampling_text

        async def sampling(ctx: ClientRequestContext, params: types.CreateMessageRequestParams):
            await callback_delay(ctx, "sampling/createMessage", ns.callback_delay)
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=text),
                model="fake-model",
                stop_reason="endTurn",
            )

        kw["sampling_callback"] = sampling
    if ns.elicit_json is not None:
        content = json.loads(ns.elicit_json)

        async def elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams):
            entry = await callback_delay(ctx, "elicitation/create", ns.callback_delay)
            entry["params"] = dump(params)
            if getattr(params, "mode", None) == "url":
                return types.ElicitResult(action="accept")
            return types.ElicitResult(action="accept", content=content)

        kw["elicitation_callback"] = elicit
    return kw


async def run(ns: argparse.Namespace, cmd: list[str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k.startswith("PEER_")}
    for kv in ns.env:
        k, _, v = kv.partition("=")
        env[k] = v
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env)
    tap = Tap()
    out: dict[str, Any] = {"ok": False, "scenario": ns.scenario, "mode": ns.mode, "cmd": cmd}
    client = Client(tap.transport(params), mode=ns.mode, **build_callbacks(ns))
    # NB: don't wrap client.__aenter__() alone in fail_after/move_on_after: the Client opens
    # task groups inside __aenter__, and leaving a cancel scope around it (before __aexit__)
    # wedges anyio. Bound the whole connection instead.
    try:
        with anyio.fail_after(ns.overall_timeout):
            async with client:
                out["connected_at_s"] = now()
                out["protocolVersion"] = client.protocol_version
                out["serverInfo"] = dump(client.server_info)
                out["serverCapabilities"] = dump(client.server_capabilities)
                if ns.scenario == "script":
                    out["steps"] = []
                    for step in json.loads(ns.args[0]):
                        result = {"op": step["op"], "args": step.get("args", [])}
                        out["steps"].append(result)
                        await run_step(client, ns, step["op"], result["args"], step, result, tap)
                    out["ok"] = all(s.get("ok") for s in out["steps"])
                else:
                    await run_step(client, ns, ns.scenario, ns.args, {}, out, tap)
                if ns.final_grace:
                    await anyio.sleep(ns.final_grace)
    except BaseException as e:  # noqa: BLE001  (connect failure, timeout, ...)
        if isinstance(e, KeyboardInterrupt):
            raise
        leaf = e
        while isinstance(leaf, _ExceptionGroup) and leaf.exceptions:
            leaf = leaf.exceptions[0]
        err: dict[str, Any] = {"type": type(leaf).__name__, "message": str(leaf)}
        if isinstance(leaf, MCPError):
            err.update(code=leaf.code, data=leaf.error.data)
        err["during"] = "connect" if "connected_at_s" not in out else "scenario"
        out["ok"] = False
        out.setdefault("error", err)
    out["closed_at_s"] = now()
    if CALLBACK_LOG:
        out["callbacks"] = CALLBACK_LOG
    if ns.wire or ns.scenario in ("cancel", "timeout", "script") or not out["ok"]:
        out["wire"] = tap.wire
    return out


async def run_step(
    client: Client,
    ns: argparse.Namespace,
    op: str,
    a: list[Any],
    opts: dict[str, Any],
    out: dict[str, Any],
    tap: Tap,
) -> None:
    """Run one scenario; a failure from the server is recorded in out["error"], never raised."""
    out["started_at_s"] = now()
    try:
        await scenario(client, ns, op, a, opts, out, tap)
    except MCPError as e:
        out["error"] = {
            "type": "MCPError",
            "code": e.code,
            "message": e.error.message,
            "data": e.error.data,
        }
    except Exception as e:  # noqa: BLE001 - recorded for the test to judge
        out["error"] = {"type": type(e).__name__, "message": str(e)}


def _arg_json(a: list[Any], i: int) -> Any:
    if len(a) <= i:
        return {}
    return a[i] if isinstance(a[i], (dict, list)) else json.loads(a[i])


async def scenario(
    client: Client,
    ns: argparse.Namespace,
    op: str,
    a: list[Any],
    opts: dict[str, Any],
    out: dict[str, Any],
    tap: Tap,
) -> None:
    if op == "list":
        res = await client.list_tools(cache_mode="bypass")
        out["tools"] = [t.name for t in res.tools]
        out["result"] = dump(res)
    elif op == "ping":
        await client.send_ping()
    elif op == "resources":
        out["resources"] = dump(await client.list_resources(cache_mode="bypass"))
        out["templates"] = dump(await client.list_resource_templates(cache_mode="bypass"))
    elif op == "read":
        out["result"] = dump(await client.read_resource(a[0], cache_mode="bypass"))
    elif op == "prompts":
        out["result"] = dump(await client.list_prompts(cache_mode="bypass"))
    elif op == "prompt":
        out["result"] = dump(await client.get_prompt(a[0], _arg_json(a, 1)))
    elif op == "complete":
        ref_data = _arg_json(a, 0)
        ref: types.PromptReference | types.ResourceTemplateReference
        if ref_data.get("type") == "ref/prompt":
            ref = types.PromptReference(name=ref_data["name"])
        else:
            ref = types.ResourceTemplateReference(uri=ref_data["uri"])
        context = _arg_json(a, 3) if len(a) > 3 else None
        out["result"] = dump(
            await client.complete(ref, {"name": a[1], "value": a[2]}, context_arguments=context)
        )
    elif op == "call":
        name, args = a[0], _arg_json(a, 1)
        progress: list[Any] = []

        async def on_progress(p: float, total: float | None, msg: str | None) -> None:
            progress.append({"t": now(), "progress": p, "total": total, "message": msg})

        want_progress = opts.get("progress", ns.progress)
        res = await client.call_tool(
            name, args, progress_callback=on_progress if want_progress else None
        )
        out["result"] = dump(res)
        out["progress"] = progress
    elif op == "timeout":
        name, args, secs = a[0], _arg_json(a, 1), float(a[2])
        start = now()
        try:
            res = await client.call_tool(name, args, read_timeout_seconds=secs)
            out["result"] = dump(res)
            out["timed_out"] = False
        except MCPError as e:
            out["timed_out"] = e.code == types.REQUEST_TIMEOUT
            out["timeout_error"] = {"type": "MCPError", "code": e.code, "message": e.error.message}
        out["elapsed_s"] = round(now() - start, 4)
        await anyio.sleep(opts.get("grace", ns.grace))  # watch for a late response
        summarize_cancel(out, tap, start)
    elif op == "cancel":
        name, args = a[0], _arg_json(a, 1)
        progress = []
        first_progress = anyio.Event()

        async def on_progress(p: float, total: float | None, msg: str | None) -> None:
            progress.append({"t": now(), "progress": p, "total": total, "message": msg})
            first_progress.set()

        scope = anyio.CancelScope()
        outcome: dict[str, Any] = {}
        start = now()

        async def call() -> None:
            with scope:
                try:
                    r = await client.call_tool(name, args, progress_callback=on_progress)
                    outcome["result"] = dump(r)
                except MCPError as e:
                    outcome["error"] = {"code": e.code, "message": e.error.message}
            outcome["call_task_cancelled"] = scope.cancelled_caught

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.move_on_after(opts.get("cancel_after", ns.cancel_after)):
                await first_progress.wait()
            out["cancel_trigger"] = "progress" if first_progress.is_set() else "timer"
            out["cancelled_at_s"] = now()
            scope.cancel()
        await anyio.sleep(opts.get("grace", ns.grace))
        out["outcome"] = outcome
        out["progress"] = progress
        summarize_cancel(out, tap, start)
    else:
        raise SystemExit(f"unknown step {op!r}")
    out["ok"] = True


def summarize_cancel(out: dict[str, Any], tap: Tap, start: float) -> None:
    """Find the tools/call id, the notifications/cancelled we sent, and any response that arrived."""
    call_id = None
    for w in tap.wire:
        m = w["msg"]
        if w["dir"] == ">>" and m.get("method") == "tools/call" and w["t"] >= start:
            call_id = m.get("id")
    sent_cancel = [
        w["msg"]
        for w in tap.wire
        if w["dir"] == ">>"
        and w["msg"].get("method") == "notifications/cancelled"
        and w["t"] >= start
    ]
    responses = [
        w
        for w in tap.wire
        if w["dir"] == "<<"
        and w["msg"].get("id") == call_id
        and ("result" in w["msg"] or "error" in w["msg"])
    ]
    out["call_request_id"] = call_id
    out["sent_notifications_cancelled"] = sent_cancel
    out["response_arrived_on_wire"] = bool(responses)
    out["responses"] = responses


def render(out: dict[str, Any]) -> str:
    """Pretty JSON, but one line per wire entry so captures stay readable."""
    wire = out.pop("wire", None)
    text = json.dumps(out, indent=2)
    if wire is None:
        return text
    lines = ",\n".join("    " + json.dumps(w, separators=(",", ":")) for w in wire)
    body = '  "wire": [\n' + lines + "\n  ]" if wire else '  "wire": []'
    return text[:-2] + ",\n" + body + "\n}"


def main() -> None:
    ns, cmd = parse_args(sys.argv[1:])
    out = anyio.run(run, ns, cmd)
    out["total_s"] = now()
    print(render(out))
    sys.exit(0 if out.get("ok") else 1)


if __name__ == "__main__":
    main()
