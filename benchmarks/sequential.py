"""Sequential round trips, measured interleaved: every client takes turns on the same machine.

Each client runs in its own process with its own server (``run_mcp_sync.py --commands``,
``run_official.py --commands`` and, over stdio, the floor ``run_bare_echo.py``). All of them
connect first; then, for each scenario, each client runs one round of calls in turn, the order
rotating from round to round, for several rounds. A client's rate is its best round.

Around every round the parent also reads the CPU time (user and system, from ``/proc``) of
the client process and of its server's processes -- the server of an HTTP column, or the
client's child processes over stdio -- so that each scenario also reports the CPU it costs
per call on each side (all its rounds together: ``/proc`` counts in clock ticks, 10 ms
here, too coarse for one round). On a machine whose speed drifts, CPU per call varies much
less than calls per second.

Taking turns matters on a shared or virtual machine, where the speed of thread and process
wake-ups drifts over seconds: back-to-back runs of one library and then the other measure the
drift as much as the libraries. Interleaved rounds give every client the same conditions.
"""

from __future__ import annotations

import os
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


CPU_SCENARIOS = {"call_1k": "call_1k", "concurrent_32": "concurrent32"}
"""Scenarios whose CPU per call is reported, and the prefix of their result keys
(``<prefix>_client_cpu_us``, ``<prefix>_server_cpu_us``)."""

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """``(parent pid, CPU seconds)`` of process ``pid`` from ``/proc``, or ``None``."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS


def cpu_seconds(pid: int, *, own: bool = True, descendants: bool = False) -> float:
    """CPU time (user + system) of process ``pid`` (``own``) and/or of every process below
    it (``descendants``), from ``/proc``; 0.0 where ``/proc`` is not there."""
    stats: dict[int, tuple[int, float]] = {}
    if descendants:
        for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
            if entry.isdigit() and (stat := _stat(int(entry))) is not None:
                stats[int(entry)] = stat
    total = 0.0
    if own and (mine := stats.get(pid) or _stat(pid)) is not None:
        total += mine[1]
    if descendants:
        below: set[int] = set()
        frontier = {pid}
        while frontier:
            frontier = {child for child, (parent, _) in stats.items() if parent in frontier}
            frontier -= below
            below |= frontier
        total += sum(stats[child][1] for child in below)
    return total


def calls_done(command: str, count: int) -> int:
    """How many calls a round of ``count`` runs (a batch splits it evenly among its
    clients)."""
    if command == "concurrent_32":
        return max(1, count // CONCURRENT_CLIENTS) * CONCURRENT_CLIENTS
    return count


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
    clients: dict[str, list[str]],
    env: dict[str, str],
    calls: int,
    rounds: int,
    stdio: bool,
    servers: dict[str, int] | None = None,
) -> dict[str, dict[str, object]]:
    """Interleaved sequential rates: ``{client: {key: best rate, key + "_rounds": [...]}}``,
    and for :data:`CPU_SCENARIOS` the CPU per call of the client and of the server over all
    the rounds (microseconds).

    ``clients`` maps a name to the command line of its ``--commands`` process; ``servers``
    maps a name to the process id of its server (whose child processes count too); a
    client without one counts its own child processes as its server.
    """
    servers = servers or {}
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
            cpu: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
            for round_ in range(rounds):
                shift = round_ % len(names)
                for name in names[shift:] + names[:shift]:
                    before = _cpu_pair(drivers[name].proc.pid, servers.get(name))
                    rates[name].append(drivers[name].run(command, count))
                    after = _cpu_pair(drivers[name].proc.pid, servers.get(name))
                    cpu[name].append((after[0] - before[0], after[1] - before[1]))
            for name in names:
                measured = [rate for rate in rates[name] if rate == rate]  # nan: not measured
                results[name][key] = max(measured) if measured else None
                results[name][key + "_rounds"] = rates[name]
                prefix = CPU_SCENARIOS.get(command)
                if prefix is not None and measured:
                    done = calls_done(command, count) * rounds  # /proc counts in ticks:
                    for side, index in (("client", 0), ("server", 1)):  # sum all the rounds
                        spent = sum(pair[index] for pair in cpu[name])
                        results[name][f"{prefix}_{side}_cpu_us"] = spent / done * 1e6
        return results
    finally:
        for driver in drivers.values():
            driver.close()


def _cpu_pair(client: int, server: int | None) -> tuple[float, float]:
    """CPU seconds so far of a client process and of its server (see :func:`measure`)."""
    if server is None:
        return cpu_seconds(client), cpu_seconds(client, own=False, descendants=True)
    return cpu_seconds(client), cpu_seconds(server, descendants=True)


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
