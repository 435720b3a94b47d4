"""Reading a child process's output with a deadline, so a silent child fails the test.

`proc.stdout.readline()` and `for line in proc.stdout` block for as long as the
child keeps its pipe open and says nothing. These helpers read on a daemon
thread and give up at the deadline: the child is killed and the test fails
with what it had said so far. pytest-timeout is the last resort; these name
the step that hung.

Use: `line = child.readline(proc, timeout=60)`, or
`for line in child.lines(proc, timeout=300): ...` (one deadline for the loop).
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

_EOF = object()


class _Reader:
    """One daemon thread per stream, feeding a queue; shared by every call on that stream."""

    def __init__(self, stream) -> None:
        self.queue: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        try:
            for line in iter(stream.readline, "" if hasattr(stream, "encoding") else b""):
                self.queue.put(line)
        except (OSError, ValueError):  # closed underneath us
            pass
        self.queue.put(_EOF)


def _reader(proc: subprocess.Popen, stream) -> _Reader:
    readers = proc.__dict__.setdefault("_child_readers", {})  # kept with the process
    if id(stream) not in readers:
        readers[id(stream)] = _Reader(stream)
    return readers[id(stream)]


def _give_up(proc: subprocess.Popen, reader: _Reader, timeout: float, what: str):
    proc.kill()
    proc.wait(timeout=30)
    said = "".join(reader.seen)[-3000:]
    pytest.fail(f"child process said nothing {what} within {timeout:.0f} s; output so far:\n{said}")


def _drain_both(proc: subprocess.Popen) -> None:
    # A child blocked writing to a full stderr pipe would never finish its stdout.
    for s in (proc.stdout, proc.stderr):
        if s is not None:
            _reader(proc, s)


def readline(proc: subprocess.Popen, timeout: float, stream=None) -> str:
    """The next line of `stream` (default stdout); "" at end of file."""
    _drain_both(proc)
    reader = _reader(proc, stream if stream is not None else proc.stdout)
    try:
        line = reader.queue.get(timeout=timeout)
    except queue.Empty:
        _give_up(proc, reader, timeout, "more")
    if line is _EOF:
        reader.queue.put(_EOF)  # stays at end of file for later calls
        return ""
    reader.seen.append(line)
    return line


def lines(proc: subprocess.Popen, timeout: float, stream=None) -> Iterator[str]:
    """Lines of `stream` until end of file; the whole loop must end within `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            _give_up(proc, _reader(proc, stream or proc.stdout), timeout, "")
        line = readline(proc, left, stream)
        if line == "":
            return
        yield line


def read_rest(proc: subprocess.Popen, timeout: float, stream=None) -> str:
    """Everything `stream` still says until end of file, within `timeout`."""
    return "".join(lines(proc, timeout, stream))


def finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """Waits for the child within `timeout`: (rest of stdout, all unread stderr).

    Use instead of `communicate()` once these helpers have read from the child.
    """
    deadline = time.monotonic() + timeout
    _drain_both(proc)
    out = read_rest(proc, timeout) if proc.stdout is not None else ""
    left = max(1.0, deadline - time.monotonic())
    err = read_rest(proc, left, proc.stderr) if proc.stderr is not None else ""
    try:
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
        pytest.fail(f"child process did not exit within {timeout:.0f} s", pytrace=False)
    return out, err
