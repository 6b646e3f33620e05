"""The floor of the round-trip measurements: a bare JSON-lines echo in plain Python.

No library and no threads: read a line from stdin, parse it, write the answer an MCP server
would give (an empty result for ``ping``, a text block echoing ``arguments.text`` for
``tools/call``), flush, repeat. JSON goes through pydantic-core, the fastest parser and
serializer among mcp_sync's dependencies, so this is the tightest floor those messages allow.
"""

from __future__ import annotations

import os
import sys

from pydantic_core import SchemaSerializer, core_schema, from_json

to_json = SchemaSerializer(core_schema.any_schema()).to_json


def main() -> None:
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    for line in sys.stdin.buffer:
        message = from_json(line)
        params = message.get("params") or {}
        if message.get("method") == "tools/call":
            text = params.get("arguments", {}).get("text", "")
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        else:
            result = {}
        out.write(to_json({"jsonrpc": "2.0", "id": message["id"], "result": result}) + b"\n")


if __name__ == "__main__":
    main()
