"""The lifecycle markers the peer scripts write ("STARTED slow <tag>", "CANCELLED slow <tag>",
...), one line per event, appended to ``$PEER_EVENTS_FILE`` when it is set -- flushed and
fsynced at once, so a test reads every marker written before it looks -- and, with
``echo=True``, also printed on stderr.

The peers import it as a sibling module (a script's own folder is on ``sys.path``).
"""

from __future__ import annotations

import os
import sys

EVENTS_FILE = os.environ.get("PEER_EVENTS_FILE")


def event(*parts: str, echo: bool = False) -> None:
    """Write the marker made of the non-empty ``parts``, joined by spaces."""
    line = " ".join(p for p in parts if p)
    if echo:
        print(line, file=sys.stderr, flush=True)
    if not EVENTS_FILE:
        return
    with open(EVENTS_FILE, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
