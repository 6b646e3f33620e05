"""A real redis-server for the tests: a process on a free loopback port that a test can kill
and start again (no persistence: a restart starts empty)."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from support.processes import Proc
from support.waiting import PEER_WAIT

REDIS_SERVER = shutil.which("redis-server")
"""The redis-server program, or ``None`` when it is not installed (.ci/run installs it)."""


def free_port() -> int:
    """A loopback port free at the time of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A redis-server process on a loopback port that a test can kill and start again."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: Proc | None = None

    def start(self) -> None:
        assert REDIS_SERVER is not None
        self.proc = Proc(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ]
        )
        self.proc.wait_for("stdout", "Ready to accept connections", PEER_WAIT)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.finish(PEER_WAIT)
            self.proc = None


@contextmanager
def running_redis() -> Iterator[RedisServer]:
    """A started :class:`RedisServer`, killed on leaving (the body of a fixture)."""
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.kill()
