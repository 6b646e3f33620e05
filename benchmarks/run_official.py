"""Benchmark scenarios with the official MCP SDK client: the scenarios and the command line
of ``run_mcp_sync.py``, with the official client in place of mcp_sync's."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import threading
import time
import tracemalloc
import warnings
from typing import Any

COMMANDS = sys.argv[1] == "--commands"
T_START = 0.0 if COMMANDS else float(sys.argv[1])
N = 0 if COMMANDS else int(sys.argv[2])

import anyio  # noqa: E402
import anyio.to_thread  # noqa: E402
import sequential  # noqa: E402  (benchmarks/ is this script's directory)
from mcp import Client, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

warnings.simplefilter("ignore")


MODERN = "2026-07-28"
MODE = os.environ.get("BENCH_PROTOCOL", "legacy")
"""The client's ``mode=`` over HTTP ("legacy", "2026-07-28"; set by bench.py)."""


async def probe_started(client: Client) -> int:
    """How many ``probe`` handlers the server has started."""
    result = await client.call_tool("probe_started", {})
    return int(result.structured_content["result"])


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


KIB1, KIB100 = "x" * 1024, "x" * (100 * 1024)


async def concurrent(clients: list[Client], count: int) -> float:
    """The concurrent scenario: the clients (one task each) share COUNT calls; calls/s."""
    per = max(1, count // len(clients))

    async def worker(other: Client) -> None:
        for _ in range(per):
            await other.call_tool("echo", {"text": KIB1})

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for other in clients:
            tg.start_soon(worker, other)
    return per * len(clients) / (time.perf_counter() - start)


async def serve_commands(client: Client, url: str | None) -> None:
    """Sequential round trips on command: "SCENARIO COUNT" in, calls per second out."""
    scenarios = {
        **({} if MODERN in MODE else {"ping": client.send_ping}),  # no ping at 2026-07-28
        "call_1k": lambda: client.call_tool("echo", {"text": KIB1}),
        "call_100k": lambda: client.call_tool("echo", {"text": KIB100}),
    }
    for fn in scenarios.values():
        await fn()  # warm up every path once
    async with contextlib.AsyncExitStack() as stack:
        clients: list[Client] = []
        if url is not None:  # the concurrent scenario's clients, each its own connection
            for _ in range(sequential.CONCURRENT_CLIENTS):
                clients.append(
                    await stack.enter_async_context(Client(streamable_http_client(url), mode=MODE))
                )
            await concurrent(clients, sequential.CONCURRENT_CLIENTS)
        await answer(scenarios, clients)


async def answer(scenarios: dict[str, Any], clients: list[Client]) -> None:
    print("ready", flush=True)
    # commands are read off the event loop, so nothing waits on the loop meanwhile
    while (
        command := sequential.parse_command(await anyio.to_thread.run_sync(sys.stdin.readline))
    ) is not None:
        name, n = command
        if name not in scenarios and name != "concurrent_32":
            print("nan", flush=True)  # not in this revision
            continue
        if name == "concurrent_32":
            print(await concurrent(clients, n), flush=True)
            continue
        fn = scenarios[name]
        start = time.perf_counter()
        for _ in range(n):
            await fn()
        print(n / (time.perf_counter() - start), flush=True)


async def main() -> None:
    args = sys.argv[2:] if COMMANDS else sys.argv[3:]
    if args[0] == "--url":
        transport, target = "http", streamable_http_client(args[1])
    else:
        cmd = args[args.index("--") + 1 :]
        transport = "stdio"
        target = stdio_client(StdioServerParameters(command=cmd[0], args=cmd[1:]))
    out: dict[str, object] = {}
    async with Client(target, mode=MODE if transport == "http" else "legacy") as client:
        out["connect_init_s"] = time.time() - T_START
        if COMMANDS:
            await serve_commands(client, args[1] if transport == "http" else None)
            return
        if MODERN not in MODE:
            await client.send_ping()
        if transport == "stdio":
            per = N // 8

            async def worker() -> None:
                for _ in range(per):
                    await client.call_tool("echo", {"text": KIB1})

            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(worker)
            out["concurrent8_rps"] = per * 8 / (time.perf_counter() - start)

        cancel_times: list[int] = []
        for _ in range(max(20, N // 50)):
            started = anyio.Event()

            async def on_progress(progress, total, message, started=started) -> None:
                started.set()

            async def call() -> None:
                await client.call_tool("probe", {}, progress_callback=on_progress)

            before = await probe_started(client)
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                with anyio.fail_after(10):
                    while not started.is_set() and await probe_started(client) == before:
                        pass  # progress does not reach every client: ask the server
                cancel_times.append(time.monotonic_ns())
                tg.cancel_scope.cancel()
        observed: list[int] = []
        deadline = time.monotonic() + 10
        while len(observed) < len(cancel_times) and time.monotonic() < deadline:
            result = await client.call_tool("probe_times", {})
            observed = result.structured_content["result"]
        lat = [
            (o - c) / 1e6
            for o, c in zip(observed[-len(cancel_times) :], cancel_times, strict=False)
        ]
        out["cancel_median_ms"] = statistics.median(lat)
        out["cancel_p95_ms"] = statistics.quantiles(lat, n=20)[-1]

        if transport == "stdio":
            threads_before = threading.active_count()
            tracemalloc.start()
            base = tracemalloc.take_snapshot()
            rss0 = rss_kib()
            async with anyio.create_task_group() as tg:
                for _ in range(1000):
                    tg.start_soon(client.call_tool, "hold", {})
                await anyio.sleep(1.0)  # let every task send its request
                snap = tracemalloc.take_snapshot()
                grown = sum(s.size_diff for s in snap.compare_to(base, "filename"))
                out["inflight_kib_per_call"] = grown / 1000 / 1024
                out["inflight_rss_kib_per_call"] = (rss_kib() - rss0) / 1000
                out["inflight_threads"] = threading.active_count()
                out["threads_before"] = threads_before
                tracemalloc.stop()
                tg.cancel_scope.cancel()
    print(json.dumps(out))


anyio.run(main)
