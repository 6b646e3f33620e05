"""A child process that serves requests with an Endpoint over StdioTransport.

Usage: endpoint_peer.py [max_workers]

Methods: ``echo`` (returns params), ``upper`` (upper-cases ``text``), ``env`` (an environment
variable and the working directory), ``block`` (writes "started <id>" on stderr, then waits for
its cancellation), ``cancelled`` (the [id, reason] of every request cancelled so far), ``crash``
(exits at once with status 3, answering nothing).
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from mcp_sync.endpoint import Endpoint  # noqa: E402
from mcp_sync.errors import McpError  # noqa: E402
from mcp_sync.transports.stdio import StdioTransport  # noqa: E402

cancelled = []


def handle(req):
    method = req.method
    if method == "echo":
        return req.params
    if method == "upper":
        text = req.params["text"]
        return {"text": text.upper(), "length": len(text)}
    if method == "env":
        return {"value": os.environ.get(req.params["name"]), "cwd": os.getcwd()}
    if method == "block":
        # recorded on the reader thread, as the cancellation is processed
        req.token.add_callback(lambda token: cancelled.append([req.id, token.reason]))
        sys.stderr.write(f"started {req.id}\n")
        sys.stderr.flush()
        return {"fired": req.token.wait(10)}
    if method == "cancelled":
        return {"cancelled": list(cancelled)}
    if method == "crash":
        os._exit(3)
    raise McpError(-32601, f"Method not found: {method}")


def main() -> None:
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    endpoint = Endpoint(StdioTransport(), request_handler=handle, max_workers=workers, name="peer")
    endpoint.start()
    endpoint.wait_closed()
    stuck = endpoint.close(grace=5)
    sys.exit(1 if stuck else 0)


if __name__ == "__main__":
    main()
