"""A stdio server whose tool writes to stdout, as careless handler code does."""

import os
import subprocess
import sys

from mcp_sync import Server

server = Server("chatty")


@server.tool()
def chatty(text: str) -> str:
    """Print to stdout (with and without a newline, and from a child process), then answer."""
    print("a print() in a handler")
    sys.stdout.write("no newline at the end")
    sys.stdout.flush()
    os.write(1, b"raw write to descriptor 1\n")
    subprocess.run([sys.executable, "-c", "print('a child process inherits stdout')"], check=True)
    return text


if __name__ == "__main__":
    server.run()
