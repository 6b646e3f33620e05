"""What ``mcp-sync`` prints, without a server: progress on a terminal and in a log (with a
clock the test moves by hand), and content blocks rendered as text."""

from __future__ import annotations

import base64
import io

from mcp_sync.cli.output import ProgressDisplay, content_lines, describe_size


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_at_most_one_line_per_interval_and_the_last_one_at_the_end() -> None:
    clock, log = Clock(), io.StringIO()
    progress = ProgressDisplay(log, clock=clock, line_interval=1.0)
    for step in range(1, 13):  # 12 notifications, 0.25 s apart
        clock.now += 0.25
        progress(step, 12, f"step {step}")
    progress.finish()
    assert log.getvalue().splitlines() == [
        "progress 1/12 (8%) after 0.2 s: step 1",
        "progress 5/12 (42%) after 1.2 s: step 5",
        "progress 9/12 (75%) after 2.2 s: step 9",
        "progress 12/12 (100%) after 3.0 s: step 12",  # held back, printed by finish()
    ]


def test_a_log_line_without_total_or_message() -> None:
    clock, log = Clock(), io.StringIO()
    progress = ProgressDisplay(log, clock=clock)
    clock.now += 2.5
    progress(7, None, None)
    progress.finish()
    assert log.getvalue() == "progress 7 after 2.5 s\n"


def test_a_terminal_gets_every_notification_redrawn_on_one_line() -> None:
    clock, tty = Clock(), Terminal()
    progress = ProgressDisplay(tty, clock=clock)
    assert progress.terminal
    clock.now += 0.5
    progress(1, 4, "step 1 of 4")
    clock.now += 0.5
    progress(4, 4, "step 4 of 4")
    clock.now += 0.5
    progress(9, None, None)
    progress.finish()
    assert tty.getvalue() == (
        "\r[#######.......................]  25%   0.5 s  step 1 of 4\x1b[K"
        "\r[##############################] 100%   1.0 s  step 4 of 4\x1b[K"
        "\rprogress 9   1.5 s\x1b[K"
        "\n"
    )


def test_finish_without_progress_prints_nothing() -> None:
    for stream in (io.StringIO(), Terminal()):
        ProgressDisplay(stream).finish()
        assert stream.getvalue() == ""


def test_sizes() -> None:
    assert describe_size(base64.b64encode(b"x").decode()) == "1 byte"
    assert describe_size(base64.b64encode(b"x" * 70).decode()) == "70 bytes"
    assert describe_size(base64.b64encode(b"x" * 2048).decode()) == "2.0 KiB"
    assert describe_size(base64.b64encode(b"x" * (3 * 1024 * 1024 + 1)).decode()) == "3.0 MiB"


def test_content_blocks_as_text() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 66).decode()
    assert list(content_lines({"type": "text", "text": "two\nlines"})) == ["two\nlines"]
    assert list(content_lines({"type": "image", "data": png, "mimeType": "image/png"})) == [
        "[image: image/png, 70 bytes]"
    ]
    assert list(content_lines({"type": "audio", "data": png})) == [
        "[audio: unknown type, 70 bytes]"
    ]
    assert list(content_lines({"type": "resource_link", "uri": "file:///a.txt", "name": "a"})) == [
        "[resource link: file:///a.txt (a)]"
    ]
    blob = {"uri": "blob://x", "mimeType": "application/gzip", "blob": png}
    assert list(content_lines({"type": "resource", "resource": blob})) == [
        "[resource blob://x: application/gzip, 70 bytes]"
    ]
    assert list(
        content_lines({"type": "resource", "resource": {"uri": "t://x", "text": "hi"}})
    ) == ["hi"]
    assert list(content_lines(blob)) == [
        "[resource blob://x: application/gzip, 70 bytes]"
    ]  # resources/read contents
    assert list(content_lines({"type": "video", "url": "x"})) == ['{"type": "video", "url": "x"}']
