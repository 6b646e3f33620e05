"""What ``mcp-sync`` prints: progress on stderr, and results on stdout.

* :class:`ProgressDisplay` draws ``notifications/progress`` as a bar redrawn in place when
  stderr is a terminal, and as plain lines otherwise -- at most one every
  :data:`LINE_INTERVAL` seconds, and the last one when the call ends -- so a cron log or a
  pipe stays readable; both show the time elapsed since the call was sent.
* :func:`content_lines` renders MCP content blocks (tool results, prompt messages, resource
  contents) as text: text is printed as it is, binary data (images, audio, blobs) is
  summarised by type and size. ``--raw`` prints the JSON instead.

Everything here works on wire objects (plain dicts with the protocol's camelCase names), so
it renders whatever a server sends, known block types or not.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

__all__ = ["ProgressDisplay", "content_lines", "describe_size", "print_json"]

BAR_WIDTH = 30
"""Characters of the progress bar between its brackets."""
LINE_INTERVAL = 1.0
"""Least seconds between two progress lines when stderr is not a terminal (the latest
notification in between is printed when the next line is due, or when the call ends)."""


def print_json(value: Any, out: TextIO) -> None:
    """Write ``value`` as indented JSON and a newline."""
    out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


class ProgressDisplay:
    """Shows progress of one call on ``stream`` (stderr).

    On a terminal one line is redrawn in place (``\\r`` and erase-to-end-of-line) for every
    notification, with a bar when the server gives a ``total``. Elsewhere a notification
    becomes a line of its own, at most one per ``line_interval`` seconds; the latest one
    held back is printed by :meth:`finish`. Call :meth:`finish` when the call ends.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        clock: Callable[[], float] = time.monotonic,
        line_interval: float = LINE_INTERVAL,
    ) -> None:
        self.stream = stream
        self.terminal = _isatty(stream)
        self._clock = clock
        self._started = clock()
        self._interval = line_interval
        self._last_line: float | None = None
        self._held: str | None = None
        self._drawn = False

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        now = self._clock()
        elapsed = now - self._started
        if self.terminal:
            self._draw(progress, total, message, elapsed)
        else:
            text = self._line(progress, total, message, elapsed)
            if self._last_line is None or now - self._last_line >= self._interval:
                self._last_line, self._held = now, None
                self.stream.write(text + "\n")
            else:
                self._held = text
        self.stream.flush()

    def _draw(
        self, progress: float, total: float | None, message: str | None, elapsed: float
    ) -> None:
        if total:
            fraction = max(0.0, min(1.0, progress / total))
            filled = int(BAR_WIDTH * fraction)
            text = f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {fraction * 100:3.0f}%"
        else:
            text = f"progress {progress:g}"
        text += f" {elapsed:5.1f} s"
        if message:
            text += f"  {message}"
        width = max(20, shutil.get_terminal_size((80, 24)).columns - 1)
        self.stream.write("\r" + text[:width] + "\x1b[K")
        self._drawn = True

    @staticmethod
    def _line(progress: float, total: float | None, message: str | None, elapsed: float) -> str:
        text = f"progress {progress:g}"
        if total:
            text += f"/{total:g} ({max(0.0, min(1.0, progress / total)) * 100:.0f}%)"
        text += f" after {elapsed:.1f} s"
        if message:
            text += f": {message}"
        return text

    def finish(self) -> None:
        """End the redrawn line (terminal), or print the progress line held back (elsewhere)."""
        if self._drawn:
            self.stream.write("\n")
            self._drawn = False
        if self._held is not None:
            self.stream.write(self._held + "\n")
            self._held = None
        self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real file
        return False


def describe_size(base64_data: str) -> str:
    """The decoded size of base64 text, for people (``"12 bytes"``, ``"3.4 KiB"``)."""
    data = base64_data.strip()
    size = len(data) * 3 // 4 - (data[-2:].count("=") if data else 0)
    if size < 1024:
        return f"{size} byte{'' if size == 1 else 's'}"
    value = size / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _resource_lines(resource: dict[str, Any]) -> Iterator[str]:
    """One resource contents object (text or blob)."""
    if isinstance(resource.get("text"), str):
        yield resource["text"]
    elif isinstance(resource.get("blob"), str):
        mime = resource.get("mimeType") or "binary"
        yield f"[resource {resource.get('uri', '?')}: {mime}, {describe_size(resource['blob'])}]"
    else:
        yield json.dumps(resource, ensure_ascii=False)


def content_lines(block: dict[str, Any]) -> Iterator[str]:
    """Text lines for one content block (or resource contents object) as sent on the wire.

    Text is yielded as it is; images, audio and blobs become a one-line summary such as
    ``[image: image/png, 1.2 KiB]``; a resource link names its URI; anything unknown is
    printed as compact JSON.
    """
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        yield block["text"]
    elif kind in ("image", "audio") and isinstance(block.get("data"), str):
        yield f"[{kind}: {block.get('mimeType') or 'unknown type'}, {describe_size(block['data'])}]"
    elif kind == "resource_link":
        name = block.get("name")
        yield f"[resource link: {block.get('uri', '?')}" + (f" ({name})" if name else "") + "]"
    elif kind == "resource" and isinstance(block.get("resource"), dict):
        yield from _resource_lines(block["resource"])
    elif kind is None and ("text" in block or "blob" in block):
        yield from _resource_lines(block)
    else:
        yield json.dumps(block, ensure_ascii=False)
