"""Measure mcp_sync against the official MCP Python SDK, side by side, in one run.

    python benchmarks/bench.py [--calls N] [--rounds R] [--http] [--json FILE]

Each client runs in a fresh subprocess against a fresh server process (stdio) or a server
on a free loopback port (Streamable HTTP, with --http), so import and start-up costs are
counted the same way for both. mcp_sync's client talks to mcp_sync's server and the
official client to the official server.

Sequential round trips are measured interleaved (see ``sequential.py``): the clients take
turns, round after round, and each keeps its best round. Over stdio a third client takes
part, a bare JSON-lines echo in plain Python: the floor that this machine's pipes, process
wake-ups and JSON set before any library runs. Prints a table; nothing is asserted: this is
a measurement, not a test.
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

import sequential  # noqa: E402  (benchmarks/ is this script's directory)

SERVERS = {"mcp_sync": HERE / "peers" / "sync_server.py", "official": HERE / "peers" / "official_server.py"}
RUNNERS = {"mcp_sync": "run_mcp_sync.py", "official": "run_official.py"}

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


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def measure_stdio(calls: int, rounds: int) -> dict[str, dict[str, object]]:
    results = sequential.measure(sequential.stdio_clients(SERVERS, floor=True), _env(), calls, rounds, stdio=True)
    for name, runner in RUNNERS.items():
        print(f"  stdio: {name}, the other scenarios ...", file=sys.stderr, flush=True)
        results[name].update(_run(runner, ["--", PY, str(SERVERS[name])], calls))
    return results


def measure_http(calls: int, rounds: int) -> dict[str, dict[str, object]]:
    servers: dict[str, subprocess.Popen[bytes]] = {}
    urls: dict[str, str] = {}
    try:
        for name, script in SERVERS.items():
            port = _free_port()
            servers[name] = subprocess.Popen([PY, str(script), "--http", str(port)], env=_env(), stderr=subprocess.DEVNULL)
            _wait_port(port)
            urls[name] = f"http://127.0.0.1:{port}/mcp"
        results = sequential.measure(sequential.http_clients(urls), _env(), calls, rounds, stdio=False)
        for name, runner in RUNNERS.items():
            print(f"  http: {name}, the other scenarios ...", file=sys.stderr, flush=True)
            results[name].update(_run(runner, ["--url", urls[name]], calls))
        return results
    finally:
        for proc in servers.values():
            _stop(proc)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def table(title: str, results: dict[str, dict[str, object]]) -> str:
    ours, theirs, floor = results["mcp_sync"], results["official"], results.get("floor", {})
    head = f"| {'measure':<66} | {'mcp_sync':>10} | {'official SDK':>12} | {'ratio':>7} |"
    rule = f"|{'-' * 68}|{'-' * 12}|{'-' * 14}|{'-' * 9}|"
    if floor:
        head += f" {'bare echo (floor)':>17} |"
        rule += f"{'-' * 19}|"
    lines = [title, "", head, rule]
    for key, label, better in ROWS:
        a, b = _number(ours.get(key)), _number(theirs.get(key))
        if a is None and b is None:
            continue
        ratio = "-"
        if a and b:
            r = a / b if better == "higher" else b / a
            ratio = f"{r:.1f}x"
        line = f"| {label:<66} | {_fmt(a):>10} | {_fmt(b):>12} | {ratio:>7} |"
        if floor:
            line += f" {_fmt(_number(floor.get(key))):>17} |"
        lines.append(line)
    lines.append("")
    lines.append("ratio: how many times better mcp_sync is (>1 is better for mcp_sync).")
    lines.append("Sequential round trips: each client's best of the interleaved rounds; the ratio of")
    lines.append("each round's rates, round by round:")
    for key, label, _better in ROWS[1:4]:
        mine, other = ours.get(key + "_rounds"), theirs.get(key + "_rounds")
        if isinstance(mine, list) and isinstance(other, list):
            per_round = ", ".join(f"{m / o:.1f}x" for m, o in zip(mine, other))
            lines.append(f"  {label}: {per_round}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per measurement (sequential: a share of it per round)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of each sequential measurement")
    parser.add_argument("--http", action="store_true", help="also measure Streamable HTTP")
    parser.add_argument("--json", help="also write the raw numbers to this file")
    options = parser.parse_args()
    raw: dict[str, object] = {
        "python": sys.version.split()[0], "cpus": os.cpu_count(), "calls": options.calls, "rounds": options.rounds
    }
    print(f"Python {raw['python']}, {raw['cpus']} CPUs, --calls {options.calls}, --rounds {options.rounds}", file=sys.stderr)
    stdio = measure_stdio(options.calls, options.rounds)
    raw["stdio"] = stdio
    print(table("stdio (client and server of the same library)", stdio))
    if options.http:
        http = measure_http(max(200, options.calls // 4), options.rounds)
        raw["http"] = http
        print()
        print(table("Streamable HTTP (client and server of the same library)", http))
    if options.json:
        Path(options.json).write_text(json.dumps(raw, indent=2))


if __name__ == "__main__":
    main()
