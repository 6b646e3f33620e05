"""Sequential round trips, measured interleaved: every client takes turns on the same machine.

Each client runs in its own process with its own server (``run_mcp_sync.py --commands``,
``run_official.py --commands`` and, over stdio, the floor ``run_bare_echo.py``). All of them
connect first; then, for each scenario, each client runs one round of calls in turn, the order
rotating from round to round, for several rounds. A client's rate is its best round.

Taking turns matters on a shared or virtual machine, where the speed of thread and process
wake-ups drifts over seconds: back-to-back runs of one library and then the other measure the
drift as much as the libraries. Interleaved rounds give every client the same conditions.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable

CONCURRENT_CLIENTS = 32
"""Clients (each its own connection) of the concurrent scenario over HTTP."""

SCENARIOS = (
    # (result key, command, calls per round as a share of --calls, where: "stdio", "http" or "both")
    ("ping_rps", "ping", 1 / 5, "both"),
    ("call_1k_rps", "call_1k", 1 / 5, "both"),
    ("call_100k_rps", "call_100k", 1 / 20, "stdio"),
    ("concurrent32_rps", "concurrent_32", 1 / 2, "http"),
)


def parse_command(line: str) -> tuple[str, int] | None:
    """One command line of the protocol: ``(scenario, count)``, or ``None`` for "quit" and
    for the end of input (an empty line read)."""
    name, _, count = line.strip().partition(" ")
    if not name or name == "quit":
        return None
    return name, int(count)


def answer_commands(
    scenarios: dict[str, Callable[[], object]],
    batches: dict[str, Callable[[int], float]] | None = None,
) -> None:
    """The client side of the protocol, for a blocking client: run every scenario once to
    warm it up, print "ready", then answer each "SCENARIO COUNT" line with the calls per
    second of COUNT sequential calls, until "quit" or the end of input.

    ``batches`` are scenarios that run COUNT calls their own way (several clients at once)
    and return the calls per second; they are warmed up (connected) before "ready" too."""
    batches = batches or {}
    for fn in scenarios.values():
        fn()
    for batch in batches.values():
        batch(CONCURRENT_CLIENTS)
    print("ready", flush=True)
    while (command := parse_command(sys.stdin.readline())) is not None:
        name, n = command
        if name in batches:
            print(batches[name](n), flush=True)
            continue
        fn = scenarios.get(name)
        if fn is None:
            print("nan", flush=True)  # not in this revision (ping at 2026-07-28)
            continue
        start = time.perf_counter()
        for _ in range(n):
            fn()
        print(n / (time.perf_counter() - start), flush=True)


class Driver:
    """One client process that runs sequential round trips on command."""

    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, bufsize=1
        )
        ready = self._line()
        if ready != "ready":
            raise RuntimeError(f"{argv[1]} did not start: {ready!r}")

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(30)
            raise RuntimeError(f"a benchmark client exited with {self.proc.returncode}")
        return line.strip()

    def run(self, command: str, count: int) -> float:
        """Run ``count`` sequential calls; returns calls per second."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{command} {count}\n")
        self.proc.stdin.flush()
        return float(self._line())

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def measure(
    clients: dict[str, list[str]], env: dict[str, str], calls: int, rounds: int, stdio: bool
) -> dict[str, dict[str, object]]:
    """Interleaved sequential rates: ``{client: {key: best rate, key + "_rounds": [...]}}``.

    ``clients`` maps a name to the command line of its ``--commands`` process.
    """
    drivers: dict[str, Driver] = {}
    try:
        for name, argv in clients.items():
            print(f"  sequential: starting {name} ...", file=sys.stderr, flush=True)
            drivers[name] = Driver(argv, env)
        results: dict[str, dict[str, object]] = {name: {} for name in drivers}
        names = list(drivers)
        for key, command, share, where in SCENARIOS:
            if where != "both" and where != ("stdio" if stdio else "http"):
                continue
            count = max(20, int(calls * share))
            print(
                f"  sequential: {command}, {rounds} rounds of {count} calls",
                file=sys.stderr,
                flush=True,
            )
            rates: dict[str, list[float]] = {name: [] for name in names}
            for round_ in range(rounds):
                shift = round_ % len(names)
                for name in names[shift:] + names[:shift]:
                    rates[name].append(drivers[name].run(command, count))
            for name in names:
                measured = [rate for rate in rates[name] if rate == rate]  # nan: not measured
                results[name][key] = max(measured) if measured else None
                results[name][key + "_rounds"] = rates[name]
        return results
    finally:
        for driver in drivers.values():
            driver.close()


def stdio_clients(servers: dict[str, Path], floor: bool) -> dict[str, list[str]]:
    """Command lines of the ``--commands`` clients over stdio (with the floor if asked)."""
    clients = {
        "mcp_sync": [
            PY,
            str(HERE / "run_mcp_sync.py"),
            "--commands",
            "--",
            PY,
            str(servers["mcp_sync"]),
        ],
        "official": [
            PY,
            str(HERE / "run_official.py"),
            "--commands",
            "--",
            PY,
            str(servers["official"]),
        ],
    }
    if floor:
        clients["floor"] = [
            PY,
            str(HERE / "run_bare_echo.py"),
            "--commands",
            "--",
            PY,
            str(HERE / "peers" / "bare_echo_server.py"),
        ]
    return clients


def http_clients(urls: dict[str, str]) -> dict[str, list[str]]:
    """Command lines of the ``--commands`` clients over Streamable HTTP: ``urls`` maps a
    column name to its server's URL; a name that starts with "official" gets the official
    client, any other mcp_sync's."""
    runner = {True: "run_official.py", False: "run_mcp_sync.py"}
    return {
        name: [PY, str(HERE / runner[name.startswith("official")]), "--commands", "--url", url]
        for name, url in urls.items()
    }
