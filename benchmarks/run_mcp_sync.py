"""Benchmark scenarios with the mcp_sync client.

python run_mcp_sync.py SPAWN_TIME N (--url URL | -- CMD ...)
    every scenario but the sequential round trips; prints one JSON object
python run_mcp_sync.py --commands (--url URL | -- CMD ...)
    connects, prints "ready", then runs sequential round trips on command (see
    benchmarks/sequential.py): one line in ("ping 400"), one rate out, until "quit"
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable

COMMANDS = sys.argv[1] == "--commands"
T_START = 0.0 if COMMANDS else float(sys.argv[1])
N = 0 if COMMANDS else int(sys.argv[2])

import sequential  # noqa: E402  (benchmarks/ is this script's directory)

from mcp_sync import Client  # noqa: E402  (imported after noting the start, as users would)
from mcp_sync.lifecycle import Era  # noqa: E402

KIB1, KIB100 = "x" * 1024, "x" * (100 * 1024)


PROTOCOL = os.environ.get("BENCH_PROTOCOL", "auto")
"""The client's ``protocol=`` over HTTP ("legacy", "2026-07-28"; set by bench.py)."""


def probe_started(client: Client) -> int:
    """How many ``probe`` handlers the server has started."""
    return int(client.call_tool("probe_started").structured_content["result"])  # type: ignore[index]


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


def concurrent_rate(clients: list[Client], count: int) -> float:
    """One thread per entry of ``clients`` (the same client may appear several times), all
    started together, share ``count`` calls of the 1 KiB echo; returns calls/s."""
    per = max(1, count // len(clients))
    barrier = threading.Barrier(len(clients) + 1)

    def worker(client: Client) -> None:
        barrier.wait()
        for _ in range(per):
            client.call_tool("echo", {"text": KIB1})

    threads = [threading.Thread(target=worker, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return per * len(clients) / (time.perf_counter() - start)


def concurrent_clients(url: str) -> Callable[[int], float]:
    """The concurrent scenario: ``CONCURRENT_CLIENTS`` clients (connected on first use, each
    with its own connection), one thread each, share COUNT calls; returns calls/s."""
    clients: list[Client] = []

    def run(count: int) -> float:
        if not clients:
            clients.extend(
                Client.http(url, protocol=PROTOCOL) for _ in range(sequential.CONCURRENT_CLIENTS)
            )
        return concurrent_rate(clients, count)

    run.clients = clients  # type: ignore[attr-defined]
    return run


def serve_commands(client: Client, url: str | None) -> None:
    """Sequential round trips on command: "SCENARIO COUNT" in, calls per second out."""
    batches = {"concurrent_32": concurrent_clients(url)} if url is not None else {}
    try:
        sequential.answer_commands(
            {
                **({} if client.era is Era.MODERN else {"ping": client.ping}),  # no ping at 2026
                "call_1k": lambda: client.call_tool("echo", {"text": KIB1}),
                "call_100k": lambda: client.call_tool("echo", {"text": KIB100}),
            },
            batches,
        )
    finally:
        for batch in batches.values():
            for other in batch.clients:  # type: ignore[attr-defined]
                other.close()


def main() -> None:
    args = sys.argv[2:] if COMMANDS else sys.argv[3:]
    if args[0] == "--url":
        client = Client.http(args[1], protocol=PROTOCOL)
        transport = "http"
    else:
        # stdio is compared at 2025-11-25, the revision the official client speaks there
        client = Client.stdio(args[args.index("--") + 1 :], stderr="discard", protocol="legacy")
        transport = "stdio"
    out: dict[str, object] = {"connect_init_s": time.time() - T_START}
    with client:
        if COMMANDS:
            serve_commands(client, args[1] if transport == "http" else None)
            return
        if client.era is not Era.MODERN:
            client.ping()
        if transport == "stdio":
            out["concurrent8_rps"] = concurrent_rate([client] * 8, N)  # 8 callers, one connection

        # cancellation latency: cancel -> the handler observes it
        cancel_times: list[int] = []
        for _ in range(max(20, N // 50)):
            before = probe_started(client)
            call = client.call_tool_future("probe", {})
            deadline = time.monotonic() + 10
            while probe_started(client) == before:  # progress does not reach every client
                if time.monotonic() > deadline:
                    raise RuntimeError("probe did not start")
            cancel_times.append(time.monotonic_ns())
            call.cancel("benchmark")
        observed: list[int] = []
        deadline = time.monotonic() + 10
        while len(observed) < len(cancel_times) and time.monotonic() < deadline:
            observed = client.call_tool("probe_times").structured_content["result"]  # type: ignore[index]
        lat = [
            (o - c) / 1e6
            for o, c in zip(observed[-len(cancel_times) :], cancel_times, strict=False)
        ]
        out["cancel_median_ms"] = statistics.median(lat)
        out["cancel_p95_ms"] = statistics.quantiles(lat, n=20)[-1]

        if transport == "stdio":
            # 1,000 calls in flight
            threads_before = threading.active_count()
            tracemalloc.start()
            base = tracemalloc.take_snapshot()
            rss0 = rss_kib()
            calls = [client.call_tool_future("hold", {}) for _ in range(1000)]
            snap = tracemalloc.take_snapshot()
            grown = sum(s.size_diff for s in snap.compare_to(base, "filename"))
            out["inflight_kib_per_call"] = grown / 1000 / 1024
            out["inflight_rss_kib_per_call"] = (rss_kib() - rss0) / 1000
            out["inflight_threads"] = threading.active_count()
            out["threads_before"] = threads_before
            tracemalloc.stop()
            for call in calls:
                call.cancel("benchmark done")
    print(json.dumps(out))


main()
