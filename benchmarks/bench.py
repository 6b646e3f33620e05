"""Measure mcp_sync against the official MCP Python SDK, side by side, in one run.

    python benchmarks/bench.py [--calls N] [--http] [--json FILE]

Each client runs in a fresh subprocess against a fresh server process (stdio) or a server
on a free loopback port (Streamable HTTP, with --http), so import and start-up costs are
counted the same way for both. mcp_sync's client talks to mcp_sync's server and the
official client to the official server. Prints a table; nothing is asserted: this is a
measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable

ROWS = [
    ("connect_init_s", "connect + initialize (s, incl. imports)", "lower"),
    ("ping_rps", "sequential ping round trips/s", "higher"),
    ("call_1k_rps", "sequential tools/call, 1 KiB argument /s", "higher"),
    ("call_100k_rps", "sequential tools/call, 100 KiB argument /s", "higher"),
    ("concurrent8_rps", "tools/call with 8 concurrent callers /s", "higher"),
    ("cancel_median_ms", "cancel -> handler observes it, median (ms)", "lower"),
    ("cancel_p95_ms", "cancel -> handler observes it, p95 (ms)", "lower"),
    ("inflight_kib_per_call", "client memory per pending call, 1,000 in flight (KiB, tracemalloc)", "lower"),
    ("inflight_rss_kib_per_call", "client RSS growth per pending call (KiB)", "lower"),
    ("inflight_threads", "client threads with 1,000 calls in flight", "lower"),
]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, limit: float = 60.0) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def _run(runner: str, target: list[str], calls: int) -> dict[str, float]:
    cmd = [PY, str(HERE / runner), repr(time.time()), str(calls), *target]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{runner} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(transport: str, calls: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for name, runner, server in (
        ("mcp_sync", "run_mcp_sync.py", HERE / "peers" / "sync_server.py"),
        ("official", "run_official.py", HERE / "peers" / "official_server.py"),
    ):
        print(f"  {transport}: {name} ...", file=sys.stderr, flush=True)
        if transport == "stdio":
            results[name] = _run(runner, ["--", PY, str(server)], calls)
            continue
        port = _free_port()
        proc = subprocess.Popen([PY, str(server), "--http", str(port)], env=_env(), stderr=subprocess.DEVNULL)
        try:
            _wait_port(port)
            results[name] = _run(runner, ["--url", f"http://127.0.0.1:{port}/mcp"], calls)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return results


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def table(title: str, results: dict[str, dict[str, float]]) -> str:
    ours, theirs = results["mcp_sync"], results["official"]
    lines = [title, "", f"| {'measure':<66} | {'mcp_sync':>10} | {'official SDK':>12} | {'ratio':>7} |", f"|{'-' * 68}|{'-' * 12}|{'-' * 14}|{'-' * 9}|"]
    for key, label, better in ROWS:
        a, b = ours.get(key), theirs.get(key)
        if a is None and b is None:
            continue
        ratio = "-"
        if a and b:
            r = a / b if better == "higher" else b / a
            ratio = f"{r:.1f}x"
        lines.append(f"| {label:<66} | {_fmt(a):>10} | {_fmt(b):>12} | {ratio:>7} |")
    lines.append("")
    lines.append("ratio: how many times better mcp_sync is (>1 is better for mcp_sync).")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="round trips per sequential measurement")
    parser.add_argument("--http", action="store_true", help="also measure Streamable HTTP")
    parser.add_argument("--json", help="also write the raw numbers to this file")
    options = parser.parse_args()
    raw: dict[str, object] = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "calls": options.calls}
    print(f"Python {raw['python']}, {raw['cpus']} CPUs, {options.calls} calls per sequential measure", file=sys.stderr)
    stdio = measure("stdio", options.calls)
    raw["stdio"] = stdio
    print(table("stdio (client and server of the same library)", stdio))
    if options.http:
        http = measure("http", max(200, options.calls // 4))
        raw["http"] = http
        print()
        print(table("Streamable HTTP (client and server of the same library)", http))
    if options.json:
        Path(options.json).write_text(json.dumps(raw, indent=2))


if __name__ == "__main__":
    main()
