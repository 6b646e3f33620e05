"""Measure mcp_sync against the official MCP Python SDK, side by side, in one run.

    python benchmarks/bench.py [--calls N] [--rounds R] [--http] [--no-stdio] [--json FILE]

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

SERVERS = {
    "mcp_sync": HERE / "peers" / "sync_server.py",
    "official": HERE / "peers" / "official_server.py",
}
RUNNERS = {"mcp_sync": "run_mcp_sync.py", "official": "run_official.py"}

ROWS = [
    ("connect_init_s", "connect + initialize (s, incl. imports)", "lower"),
    ("ping_rps", "sequential ping round trips/s", "higher"),
    ("call_1k_rps", "sequential tools/call, 1 KiB argument /s", "higher"),
    ("call_100k_rps", "sequential tools/call, 100 KiB argument /s", "higher"),
    ("concurrent8_rps", "tools/call with 8 concurrent callers /s", "higher"),
    ("concurrent32_rps", "tools/call, 32 concurrent clients /s", "higher"),
    ("call_1k_client_cpu_us", "client CPU per sequential 1 KiB call (us)", "lower"),
    ("call_1k_server_cpu_us", "server CPU per sequential 1 KiB call (us)", "lower"),
    ("concurrent32_client_cpu_us", "client CPU per call, 32 concurrent clients (us)", "lower"),
    ("concurrent32_server_cpu_us", "server CPU per call, 32 concurrent clients (us)", "lower"),
    ("cancel_median_ms", "cancel -> handler observes it, median (ms)", "lower"),
    ("cancel_p95_ms", "cancel -> handler observes it, p95 (ms)", "lower"),
    (
        "inflight_kib_per_call",
        "client memory per pending call, 1,000 in flight (KiB, tracemalloc)",
        "lower",
    ),
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
    results = sequential.measure(
        sequential.stdio_clients(SERVERS, floor=True), _env(), calls, rounds, stdio=True
    )
    for name, runner in RUNNERS.items():
        print(f"  stdio: {name}, the other scenarios ...", file=sys.stderr, flush=True)
        results[name].update(_run(runner, ["--", PY, str(SERVERS[name])], calls))
    return results


PEERS = HERE / "peers"
HTTP_SERVERS: dict[str, list[str]] = {
    # column -> server command line ({port} filled in); run in benchmarks/peers/. A column
    # whose name starts with "official" is measured with the official client.
    "mcp_sync waitress": [
        PY,
        "-m",
        "waitress",
        "--listen=127.0.0.1:{port}",
        "--threads=40",
        # keep reading while a request runs: a closed stream is then seen at the next write
        "--channel-request-lookahead=1",
        "sync_wsgi:app",
    ],
    "mcp_sync gunicorn": [
        PY,
        "-m",
        "gunicorn",
        "--workers=1",
        "--worker-class=gthread",
        "--threads=40",
        "--keep-alive=30",
        "--bind=127.0.0.1:{port}",
        "--log-level=warning",
        "sync_wsgi:app",
    ],
    "official uvicorn": [PY, str(SERVERS["official"]), "--http", "{port}"],
}
HTTP_REFERENCE = "official uvicorn"
HTTP_ERAS = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}
"""Protocol revisions measured over HTTP, each with the ``protocol=``/``mode=`` its clients
are given (``BENCH_PROTOCOL``); every column is measured at each, and the table gets a
column per (server, revision)."""


def measure_http(calls: int, rounds: int, era: str) -> dict[str, dict[str, object]]:
    """Every HTTP column at protocol revision ``era``: sequential and concurrent rates,
    interleaved, then each column's other scenarios (cancellation latency)."""
    servers: dict[str, subprocess.Popen[bytes]] = {}
    urls: dict[str, str] = {}
    previous = os.environ.get("BENCH_PROTOCOL")
    os.environ["BENCH_PROTOCOL"] = HTTP_ERAS[era]
    try:
        for name, command in HTTP_SERVERS.items():
            port = _free_port()
            argv = [part.replace("{port}", str(port)) for part in command]
            servers[name] = subprocess.Popen(argv, cwd=PEERS, env=_env(), stderr=subprocess.DEVNULL)
            _wait_port(port)
            urls[f"{name} {era}"] = f"http://127.0.0.1:{port}/mcp"
        results = sequential.measure(
            sequential.http_clients(urls),
            _env(),
            calls,
            rounds,
            stdio=False,
            servers={f"{name} {era}": proc.pid for name, proc in servers.items()},
        )
        for name, url in urls.items():
            print(f"  http: {name}, the other scenarios ...", file=sys.stderr, flush=True)
            runner = RUNNERS["official" if name.startswith("official") else "mcp_sync"]
            results[name].update(_run(runner, ["--url", url], calls))
        return results
    finally:
        for proc in servers.values():
            _stop(proc)
        if previous is None:
            os.environ.pop("BENCH_PROTOCOL", None)
        else:
            os.environ["BENCH_PROTOCOL"] = previous


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
    lines.append(
        "Sequential round trips: each client's best of the interleaved rounds; the ratio of"
    )
    lines.append("each round's rates, round by round:")
    for key, label, _better in ROWS[1:4]:
        mine, other = ours.get(key + "_rounds"), theirs.get(key + "_rounds")
        if isinstance(mine, list) and isinstance(other, list):
            per_round = ", ".join(f"{m / o:.1f}x" for m, o in zip(mine, other, strict=True))
            lines.append(f"  {label}: {per_round}")
    return "\n".join(lines)


def wide_table(title: str, results: dict[str, dict[str, object]], reference: str) -> str:
    """One column per measured server (and revision), then each mcp_sync column's ratio
    to the ``reference`` column of the same revision."""
    columns = list(results)
    ratios = [
        (name, name.replace(name.rsplit(" ", 1)[0], reference, 1))
        for name in columns
        if not name.startswith(reference)
    ]
    ratios = [(name, ref) for name, ref in ratios if ref in results]

    def shown(name: str) -> str:  # "mcp_sync waitress 2025-11-25" -> "waitress 2025-11-25"
        return name.removeprefix("mcp_sync ")

    width = max(len(shown(c)) for c in columns + [f"{n} / ref" for n, _ in ratios])
    labels = [
        label
        for key, label, _ in ROWS
        if any(_number(results[c].get(key)) is not None for c in columns)
    ]
    label_width = max(len(label) for label in labels)
    head = f"| {'measure':<{label_width}} |" + "".join(f" {shown(c):>{width}} |" for c in columns)
    head += "".join(f" {shown(n) + ' / ref':>{width}} |" for n, _ in ratios)
    lines = [title, "", head, "|" + "-" * (len(head) - 2) + "|"]
    for key, label, better in ROWS:
        values = {c: _number(results[c].get(key)) for c in columns}
        if all(v is None for v in values.values()):
            continue
        line = f"| {label:<{label_width}} |" + "".join(
            f" {_fmt(values[c]):>{width}} |" for c in columns
        )
        for name, ref in ratios:
            a, b = values[name], values[ref]
            ratio = "-" if not (a and b) else f"{(a / b if better == 'higher' else b / a):.1f}x"
            line += f" {ratio:>{width}} |"
        lines.append(line)
    lines.append("")
    lines.append(
        f"ref: {reference} at the same revision; a ratio >1 is better for mcp_sync. Round by round:"
    )
    for key, label, _better in ROWS:
        for name, ref in ratios:
            mine, other = results[name].get(key + "_rounds"), results[ref].get(key + "_rounds")
            if results[name].get(key) is None or results[ref].get(key) is None:
                continue  # not measured at this revision (ping at 2026-07-28)
            if isinstance(mine, list) and isinstance(other, list):
                per_round = ", ".join(f"{m / o:.1f}x" for m, o in zip(mine, other, strict=True))
                lines.append(f"  {label}, {shown(name)}: {per_round}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--calls",
        type=int,
        default=2000,
        help="calls per measurement (sequential: a share of it per round)",
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved rounds of each sequential measurement"
    )
    parser.add_argument("--http", action="store_true", help="also measure Streamable HTTP")
    parser.add_argument(
        "--no-stdio", action="store_true", help="skip the stdio measurements (with --http)"
    )
    parser.add_argument("--json", help="also write the raw numbers to this file")
    options = parser.parse_args()
    raw: dict[str, object] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "calls": options.calls,
        "rounds": options.rounds,
    }
    print(
        f"Python {raw['python']}, {raw['cpus']} CPUs, --calls {options.calls}, --rounds {options.rounds}",
        file=sys.stderr,
    )
    if not options.no_stdio:
        stdio = measure_stdio(options.calls, options.rounds)
        raw["stdio"] = stdio
        print(table("stdio (client and server of the same library)", stdio))
    if options.http:
        http: dict[str, dict[str, object]] = {}
        for era in HTTP_ERAS:
            http.update(measure_http(max(200, options.calls // 4), options.rounds, era))
        raw["http"] = http
        print()
        title = "Streamable HTTP (each library's client against its server; mcp_sync's app under waitress and gunicorn)"
        print(wide_table(title, http, HTTP_REFERENCE))
    if options.json:
        Path(options.json).write_text(json.dumps(raw, indent=2))


if __name__ == "__main__":
    main()
