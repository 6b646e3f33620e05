"""The floor's client: sequential round trips to ``peers/bare_echo_server.py`` on command.

    python run_bare_echo.py --commands -- CMD ...

Spawns CMD with pipes (1 MiB pipe buffers, as mcp_sync asks for), prints "ready", then
answers each command line ("ping 400", "call_1k 400", "call_100k 100") with the calls per
second it measured, until "quit". One thread, blocking reads and writes, pydantic-core JSON:
what a round trip costs on this machine before any library runs.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys

import sequential  # benchmarks/ is this script's directory
from pydantic_core import SchemaSerializer, core_schema, from_json

to_json = SchemaSerializer(core_schema.any_schema()).to_json
KIB1, KIB100 = "x" * 1024, "x" * (100 * 1024)


def main() -> None:
    cmd = sys.argv[sys.argv.index("--") + 1 :]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    for pipe in (proc.stdin, proc.stdout):
        try:
            fcntl.fcntl(pipe.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
        except OSError:
            pass
    send = proc.stdin.write
    reader = open(proc.stdout.fileno(), "rb", closefd=False)
    ids = iter(range(1, 1 << 62))

    def call(method: str, params: dict[str, object] | None) -> object:
        message: dict[str, object] = {"jsonrpc": "2.0", "id": next(ids), "method": method}
        if params is not None:
            message["params"] = params
        send(to_json(message) + b"\n")
        return from_json(reader.readline())["result"]

    sequential.answer_commands(
        {
            "ping": lambda: call("ping", None),
            "call_1k": lambda: call("tools/call", {"name": "echo", "arguments": {"text": KIB1}}),
            "call_100k": lambda: call(
                "tools/call", {"name": "echo", "arguments": {"text": KIB100}}
            ),
        }
    )
    proc.stdin.close()
    proc.wait(10)


if __name__ == "__main__":
    main()
