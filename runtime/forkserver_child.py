"""The fork server's child: a forked process becomes the requested Python command.

`become` runs in the child right after the fork (runtime/forkserver_loop.py):
its own session, the client's stdin/stdout/stderr, the request's cwd, environment
and `sys.argv`, then the command runs as `__main__` and the process exits as
`python` would, without the interpreter's teardown (see `exit_without_teardown`).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def exit_code(code: Any) -> int:
    """What `python` exits with for `sys.exit(code)`; a message is printed, as Python does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def exit_without_teardown(code: int) -> None:
    """Python's exit minus the teardown of every module and object.

    What a command can rely on still happens: non-daemon threads are joined,
    atexit handlers run (logging's flush among them), stdout and stderr are
    flushed. What is skipped, freeing the objects of TensorFlow, Beam and TFX,
    cost ~2.1 s of CPU per process (measured: a fork of a preloaded server
    exiting with sys.exit vs os._exit, 2.1-2.2 s vs 0.03 s), and the process
    is about to vanish anyway.
    """
    import atexit

    shutdown = getattr(threading, "_shutdown", None)  # what Python's exit calls first
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()  # noqa: SLF001 - atexit has no public way to run its handlers before os._exit
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed or broken by the command
            stream.flush()
    os._exit(code)


def run_as_main(kind: str, target: str) -> None:
    """Runs `target` as `__main__` the way `python` would, then exits like it. Never returns.

    kind: "module" (`python -m target`), "script" (`python target`, a console
    script included) or "code" (`python -c target`). `sys.argv` is set by the
    caller. An uncaught exception prints its traceback and exits 1; SystemExit
    exits with its code; an uncaught KeyboardInterrupt ends the process by
    SIGINT, as Python 3.8+ does.
    """
    import runpy

    try:
        if kind == "module":
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        elif kind == "script":
            runpy.run_path(target, run_name="__main__")
        else:
            exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
        code = 0
    except SystemExit as e:
        code = exit_code(e.code)
    except KeyboardInterrupt as e:
        _report(e)
        _die_by_sigint()
    except BaseException as e:  # noqa: BLE001 - reported as Python would, then exit 1
        _report(e)
        code = 1
    exit_without_teardown(code)


def _report(e: BaseException) -> None:
    """The traceback Python prints, without this module's frame on top."""
    tb = e.__traceback__
    if tb is not None and tb.tb_next is not None:
        e = e.with_traceback(tb.tb_next)  # the default hook prints e.__traceback__
    sys.excepthook(type(e), e, e.__traceback__)


def _die_by_sigint() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    os._exit(130)  # not reached


def parse_command(argv: Sequence[str]) -> tuple[str, str, list[str]]:
    """(kind, target, sys.argv) for a Python command line, or ValueError.

    Understood: `python -m MOD ARGS`, `python -c CODE ARGS`, `python SCRIPT
    ARGS` (any interpreter path), and an executable Python script such as a
    console script (`.venv/bin/tfxp ARGS`). Interpreter options are not.
    """
    if not argv:
        raise ValueError("empty command")
    first = argv[0]
    if Path(first).name.startswith("python"):
        if len(argv) < 2 or (argv[1] in ("-m", "-c") and len(argv) < 3):
            raise ValueError(f"not a command the fork server runs: {list(argv)}")
        if argv[1] == "-m":
            return "module", argv[2], [argv[2], *argv[3:]]
        if argv[1] == "-c":
            return "code", argv[2], ["-c", *argv[3:]]
        if argv[1].startswith("-"):
            raise ValueError(f"interpreter options are not supported: {list(argv)}")
        return "script", argv[1], list(argv[1:])
    with contextlib.suppress(OSError), open(first, "rb") as f:
        line = f.readline()
        if line.startswith(b"#!") and b"python" in line:
            return "script", first, list(argv)
    raise ValueError(f"not a Python command: {list(argv)}")


def _reopen_std_streams(env: dict[str, str]) -> None:
    """New sys.stdin/stdout/stderr on fds 0-2, buffered as a fresh `python` would be.

    The server's objects would keep its buffering: a command started with
    PYTHONUNBUFFERED=1 (tests that read a child's output line by line) must
    not wait for a block to fill.
    """
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    encoding, _, errors = (env.get("PYTHONIOENCODING") or "utf-8").partition(":")
    stdin = io.BufferedReader(io.FileIO(0, "rb", closefd=False))
    # The child's own stdin, for what reads sys.__stdin__ too (typeshed calls it Final).
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(stdin, encoding or "utf-8", errors or "strict")  # type: ignore[misc]
    for fd, name in ((1, "stdout"), (2, "stderr")):
        raw = io.FileIO(fd, "wb", closefd=False)
        stream = io.TextIOWrapper(
            raw if unbuffered else io.BufferedWriter(raw),
            encoding=encoding or "utf-8",
            errors=errors or ("backslashreplace" if fd == 2 else "strict"),
            line_buffering=fd == 2 or os.isatty(fd),  # stderr: always, since Python 3.9
            write_through=unbuffered,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _die_with(server_pid: int) -> None:
    """Has the kernel SIGKILL this process when the server (its parent) ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != server_pid:  # it ended before the prctl: nothing would come
        os._exit(128 + signal.SIGKILL)


def become(
    request: dict[str, Any], fds: list[int], keep_closed: list[int], server_pid: int | None
) -> None:
    """In the forked child: become the request's command (ended with the server
    whose pid is `server_pid`, if one is given). Never returns."""
    try:
        os.setsid()  # own session and group: a signal to its group cannot reach the server
        if server_pid is not None:
            _die_with(server_pid)
        for fd in keep_closed:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds):
            if fd > 2:
                os.close(fd)
        env = request["env"]
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # recomputed from TMPDIR on first use, as in a fresh python
        _reopen_std_streams(env)
        kind, target, argv = request["parsed"]
        sys.argv = argv
        # sys.path[0] as `python` sets it; PYTHONPATH entries after it.
        first = "" if kind != "script" else os.path.dirname(os.path.abspath(target))
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:1] = [first, *[p for p in extra if p not in sys.path]]
    except BaseException:  # noqa: BLE001 - the command never started: say why
        sys.excepthook(*sys.exc_info())
        os._exit(127)
    run_as_main(kind, target)
