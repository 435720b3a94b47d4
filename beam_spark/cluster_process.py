"""The processes of a cluster as the operating system sees them: running, whose, their log.

Standard library only. (runtime/forkserver.py has its own `running`: the two
libraries import nothing of each other.)
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

LOG_TAIL_LINES = 30


def alive(pid: int) -> bool:
    """Whether `pid` runs: neither gone nor a zombie (reaped here if it is our child)."""
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: running, and not ours to signal
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): kill(0) is all there is
    # "pid (comm) S ...": the state follows the last ')' (comm may hold spaces and parens).
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def command_args(pid: int) -> list[str]:
    """The process's arguments ([] if it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return []
    except OSError:  # no /proc (macOS): ps, whose words may split a spaced argument
        done = subprocess.run(  # noqa: S603 - ps on a pid, no shell
            ["ps", "-ww", "-o", "command=", "-p", str(pid)],  # noqa: S607 - ps from PATH, as a user's shell finds it
            capture_output=True,
            text=True,
        )
        return done.stdout.split()
    return raw.decode(errors="replace").split("\0")


def carries_tag(pid: int, tag: str) -> bool:
    """Whether `tag` is one of `pid`'s arguments: the pid is still the process that was
    started, not a later one that reused the number."""
    return tag in command_args(pid)


def log_tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of a log, indented, or a note that it is missing."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        return f"    (cannot read {path}: {e.strerror})"
    return "\n".join(f"    {line}" for line in text.rstrip().splitlines()[-lines:])
