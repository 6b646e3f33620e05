"""A line echo child for transport tests.

Usage: echo_peer.py [echo|ignore-eof|ignore-term]

Writes "ready" on stdout once set up (after SIGTERM is ignored, in ``ignore-term`` mode) and a
few lines on stderr, then echoes every stdin line back on stdout. At stdin EOF it exits 0
(``echo``) or keeps running (``ignore-eof``, ``ignore-term``) until signalled.
"""

import signal
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "echo"
if mode == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

err = sys.stderr.buffer
err.write(b"peer ready\n")
err.write("st\u00f6rr \u65e5\u672c\n".encode("utf-8"))
err.flush()

out = sys.stdout.buffer
out.write(b"ready\n")
out.flush()
for line in sys.stdin.buffer:
    out.write(line)
    out.flush()

if mode in ("ignore-eof", "ignore-term"):
    while True:
        signal.pause()
sys.exit(0)
