"""Python commands forked from a process that imported TensorFlow and TFX once.

A fresh interpreter spends ~10 s of CPU importing TensorFlow, Beam, TFMA and
TFX before a command does anything (`import pipeline.definition`: 10.3 s user
+ 1.2 s system here). Where one machine starts the same kind of Python
command many times (the test suite's workers and runner processes, a local
Kubeflow job's tasks, a Beam worker pool's SDK harnesses),
a server that imported them once can fork each command instead: the child is
a real process of its own (its own pid, session, signals, exit status, file
descriptors), started in ~0.1 s.

What a child shares with the server is what the preloaded modules did at
import; nothing in them starts TensorFlow's runtime (no session, no eager
context, no threads), which is what makes forking safe. What it does not
reproduce: a fresh interpreter. Environment variables that a module reads at
import (not at use) keep the server's values, and a module imported by the
server is not imported again from the child's `PYTHONPATH`. Use a plain
subprocess where that matters.

Protocol (`ForkServer.popen`): each command is one connection to the
server's Unix socket. The client sends a JSON line {"argv", "cwd", "env"} with
the child's stdin, stdout and stderr attached (SCM_RIGHTS); the server forks,
answers "pid N", and once the child has exited, "exit CODE" (as
`subprocess.Popen.returncode`: negative for a signal).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

_MAX_REQUEST = 1 << 22  # argv + environment; a few KB in practice
# `python -m tfxp.runtime.forkserver KILL_CHILDREN SOCKET ...`: the kernel ends every child
# with the server (ForkServer's kill_children_on_exit).
KILL_CHILDREN = "--kill-children-on-exit"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class ForkServerError(RuntimeError):
    """The server did not start, died, or refused a command; the message names its log."""


# --- the child: become the command ------------------------------------------


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
    atexit._run_exitfuncs()
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
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(stdin, encoding or "utf-8", errors or "strict")
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


def _become(
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


# --- the server ---------------------------------------------------------------


def serve(socket_path: str, preload: Sequence[str], kill_children: bool = False) -> None:
    """`python -m tfxp.runtime.forkserver [KILL_CHILDREN] SOCKET [MODULE ...]`: imports, then
    forks per connection.

    SOCKET appears once the server listens (it is bound under another name and
    renamed), so a client waits for the path, not for a message. The server
    exits when its stdin reaches end of file (its owner closed it or died); its
    children carry on, each in its own session, unless `kill_children`.
    """
    import importlib

    os.dup2(2, 1)  # whatever the imports print goes to the server's log
    for module in preload:
        importlib.import_module(module)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path + ".binding")
    listener.listen(64)
    os.rename(socket_path + ".binding", socket_path)
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, connection)
    while True:
        readable, _, _ = select.select([listener, sys.stdin, *children], [], [])
        if sys.stdin in readable and not sys.stdin.buffer.read1(4096):
            return  # the client is gone
        if listener in readable:
            conn, _ = listener.accept()
            try:
                _start_child(listener, conn, children, kill_children)
            except OSError:  # the client went away mid-request: nothing was started
                conn.close()
        for pidfd in [r for r in readable if isinstance(r, int)]:
            pid, conn = children.pop(pidfd)
            _, status = os.waitpid(pid, 0)
            os.close(pidfd)
            with contextlib.suppress(OSError):
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            conn.close()


def _start_child(
    listener: socket.socket,
    conn: socket.socket,
    children: dict[int, tuple[int, socket.socket]],
    kill_children: bool,
) -> None:
    data, fds, _, _ = socket.recv_fds(conn, _MAX_REQUEST, 3)
    while not data.endswith(b"\n"):
        more = conn.recv(_MAX_REQUEST)
        if not more:
            break
        data += more
    try:
        request = json.loads(data)
        request["parsed"] = parse_command(request["argv"])
        if len(fds) != 3:
            raise ValueError(f"expected stdin, stdout and stderr, got {len(fds)} descriptors")
    except ValueError as e:
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            conn.sendall(f"error {json.dumps(str(e))}\n".encode())
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    server_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        others = [c.fileno() for _, c in children.values()] + list(children)
        keep_closed = [listener.fileno(), conn.fileno(), 0, *others]
        _become(request, fds, keep_closed, server_pid if kill_children else None)
    for fd in fds:
        os.close(fd)
    children[os.pidfd_open(pid)] = (pid, conn)
    conn.sendall(f"pid {pid}\n".encode())


# --- the client ---------------------------------------------------------------


def running(pid: int) -> bool:
    """Whether `pid` runs: neither gone nor a zombie (a process that is not our child
    stays one until its own parent reaps it; a container's pid 1 may never)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


class ForkedProcess:
    """A command forked by the server, used like `subprocess.Popen`.

    pid, args, stdin/stdout/stderr (the parent's ends of PIPEs), returncode,
    poll(), wait(timeout), communicate(input, timeout), send_signal(),
    terminate(), kill(). It is the server's child, not ours: the server reaps
    it and reports its exit status over the connection.
    """

    def __init__(
        self,
        args: list[str],
        conn: socket.socket,
        pid: int,
        streams: tuple[IO | None, IO | None, IO | None],
        pending: bytes = b"",
    ) -> None:
        self.args, self.pid, self._conn = args, pid, conn
        self.stdin, self.stdout, self.stderr = streams
        self.returncode: int | None = None
        self._pending = pending  # what arrived after the "pid" line (a quick child's exit)

    def _read_status(self, timeout: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if b"\n" not in self._pending:
            ready, _, _ = select.select([self._conn], [], [], timeout)
            if not ready:
                return None
            while b"\n" not in self._pending:
                chunk = self._conn.recv(64)
                if not chunk:
                    raise ForkServerError(f"the fork server died while running {self.args}")
                self._pending += chunk
        word, _, value = self._pending.partition(b"\n")[0].decode().partition(" ")
        assert word == "exit", self._pending
        self.returncode = int(value)
        self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        return self._read_status(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._read_status(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # after exit the pid may belong to another process
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        """Writes `input`, reads stdout and stderr to their end, waits: as Popen's."""
        results: dict[str, Any] = {}

        def drain(name: str, stream: IO) -> None:
            results[name] = stream.read()
            stream.close()

        readers = [
            threading.Thread(target=drain, args=(name, s), daemon=True)
            for name, s in (("out", self.stdout), ("err", self.stderr))
            if s is not None
        ]
        for t in readers:
            t.start()
        if self.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                if input:
                    self.stdin.write(input)
                self.stdin.close()
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in readers:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self.wait(left)
        return results.get("out"), results.get("err")

    def __enter__(self) -> ForkedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        for s in (self.stdout, self.stderr, self.stdin):
            if s is not None:
                s.close()
        self.wait()


class ForkServer:
    """Starts the server (lazily, on first use, or at `start()`), forks commands from it, stops it.

    Other processes can fork from the same server: they `attach` to its
    `address()` (the socket's path and the server's pid), e.g. pytest-xdist
    workers to the server their controller started.
    """

    def __init__(
        self,
        preload: Sequence[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        log_path: str | None = None,
        start_timeout: float = 600,
        address: str | None = None,
        kill_children_on_exit: bool = False,
    ) -> None:
        """`address`: a server another process started (its `address()`) instead of a
        new one; such a client never starts or stops it (`attach`).
        `kill_children_on_exit`: the kernel SIGKILLs every child still running when the
        server ends (PR_SET_PDEATHSIG), as when its owner dies; otherwise they carry on."""
        self.preload, self.cwd, self.env = tuple(preload), cwd, env
        self.kill_children_on_exit = kill_children_on_exit
        self.start_timeout = start_timeout
        self._pid: int | None = None  # an attached client's server
        if address:
            self.socket_path, _, pid = address.rpartition(":")
            if not (self.socket_path and pid.isdigit()):
                raise ForkServerError(f"not a fork server's address (SOCKET:PID): {address!r}")
            self._dir, self._pid = "", int(pid)
            default_log = os.path.join(os.path.dirname(self.socket_path), "server.log")
        else:
            self._dir = tempfile.mkdtemp(prefix="tfxp-forkserver-")
            self.socket_path = os.path.join(self._dir, "socket")
            default_log = os.path.join(self._dir, "server.log")
        self.log_path = log_path or default_log
        self._proc: subprocess.Popen | None = None
        self._ready = False
        self._lock = threading.Lock()

    @classmethod
    def attach(cls, address: str) -> ForkServer:
        """A client of a server another process started (its `address()`); never stops it."""
        return cls((), address=address)

    def address(self) -> str:
        """What `attach` takes: the socket's path and the server's pid (starts the server)."""
        self.start()
        return f"{self.socket_path}:{self._pid or self._proc.pid}"  # type: ignore[union-attr]

    def start(self) -> None:
        """Starts the server's process if it is not running yet, without waiting for it."""
        if self._pid is not None or (self._proc is not None and self._proc.poll() is None):
            return
        if self._proc is not None:
            raise ForkServerError(f"the fork server exited; its log: {self.log_path}")
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tfxp.runtime.forkserver",
                    *([KILL_CHILDREN] if self.kill_children_on_exit else []),
                    self.socket_path,
                    *self.preload,
                ],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
            )

    def wait_exited(self, timeout: float = 0) -> int | None:
        """The server's exit status, waiting up to `timeout` s (its sockets close a moment
        before it can be reaped); None if it runs on or another process started it."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def _alive(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return running(self._pid)  # type: ignore[arg-type]

    def wait_ready(self) -> None:
        """Starts the server if needed and waits until it listens; ForkServerError
        (naming its log) if it exited or did not start within `start_timeout`."""
        with self._lock:
            if not self._ready:
                self.start()
                deadline = time.monotonic() + self.start_timeout
                while not os.path.exists(self.socket_path):  # it appears once listening
                    if not self._alive() or time.monotonic() > deadline:
                        if self._proc is not None:
                            self._proc.kill()
                            self._proc.wait()
                        raise ForkServerError(
                            f"the fork server did not start; its log: {self.log_path}"
                        )
                    time.sleep(0.05)
                self._ready = True
            if not self._alive():
                raise ForkServerError(f"the fork server exited; its log: {self.log_path}")

    def popen(
        self,
        args: Sequence[str],
        *,
        cwd: str | os.PathLike | None = None,
        env: dict[str, str] | None = None,
        stdin: Any = None,
        stdout: Any = None,
        stderr: Any = None,
        text: bool = False,
    ) -> ForkedProcess:
        """As `subprocess.Popen(args, ...)` for a Python command (see `parse_command`).

        stdin/stdout/stderr: None (this process's), subprocess.PIPE,
        subprocess.DEVNULL, subprocess.STDOUT (stderr only), a file object or a
        descriptor.
        """
        args = [os.fspath(a) for a in args]
        parse_command(args)  # a clear error here, not a dead child
        self.wait_ready()
        ours: list[IO | None] = [None, None, None]
        theirs: list[int] = []
        to_close: list[int] = []
        for i, spec in enumerate((stdin, stdout, stderr)):
            if spec is None:
                theirs.append(i)
            elif spec == subprocess.STDOUT and i == 2:
                theirs.append(theirs[1])
            elif spec == subprocess.DEVNULL:
                fd = os.open(os.devnull, os.O_RDWR)
                theirs.append(fd)
                to_close.append(fd)
            elif spec == subprocess.PIPE:
                r, w = os.pipe()
                mine, child = (w, r) if i == 0 else (r, w)
                theirs.append(child)
                to_close.append(child)
                mode = "w" if i == 0 else "r"
                ours[i] = (
                    open(mine, mode, encoding="utf-8", errors="replace")  # noqa: SIM115
                    if text
                    else open(mine, mode + "b")  # noqa: SIM115
                )
            else:
                theirs.append(spec if isinstance(spec, int) else spec.fileno())
        request = {
            "argv": args,
            "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
            "env": dict(os.environ if env is None else env),
        }
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.socket_path)
            socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], theirs)
        finally:
            for fd in to_close:
                os.close(fd)
        answer = b""
        while b"\n" not in answer:  # a quick child's "exit" line may come in the same read
            chunk = conn.recv(4096)
            if not chunk:
                raise ForkServerError(f"the fork server died; its log: {self.log_path}")
            answer += chunk
        line, _, rest = answer.partition(b"\n")
        word, _, value = line.decode().partition(" ")
        if word != "pid":
            conn.close()
            raise ForkServerError(f"the fork server refused {args}: {json.loads(value)}")
        return ForkedProcess(args, conn, int(value), (ours[0], ours[1], ours[2]), rest)

    def run(
        self,
        args: Sequence[str],
        *,
        timeout: float | None = None,
        capture_output: bool = False,
        text: bool = False,
        input: Any = None,
        **kwargs: Any,
    ) -> subprocess.CompletedProcess:
        """As `subprocess.run` (no `check`): kills the child on timeout and raises."""
        if capture_output:
            kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
        if input is not None:
            kwargs["stdin"] = subprocess.PIPE
        proc = self.popen(args, text=text, **kwargs)
        try:
            out, err = proc.communicate(input, timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def exec(
        self, args: Sequence[str], *, cwd: str | None = None, env: dict[str, str] | None = None
    ) -> NoReturn:
        """As `os.execve` for a Python command: it runs forked from the server with this
        process's stdin, stdout and stderr, and this process stands in for it until it
        ends. SIGTERM, SIGINT and SIGHUP sent here are passed on (whoever started this
        process stops the command by signalling it); the exit is the command's, a
        signal included."""
        child = self.popen(args, cwd=cwd or os.getcwd(), env=env)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda signum, _: child.send_signal(signum))
        code = child.wait()
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        sys.exit(code)

    def close(self) -> None:
        """Stops the server if this client started it (running children carry on in their
        own sessions, unless kill_children_on_exit); an attached client just forgets it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            assert proc.stdin is not None
            if not os.path.exists(self.socket_path):
                # Still importing: it has never listened, so it has no children; it would
                # only see the end of its stdin after its imports (~10 s of CPU).
                proc.kill()
            proc.stdin.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
        if self._dir:  # the socket, and the log unless it was put elsewhere
            shutil.rmtree(self._dir, ignore_errors=True)


if __name__ == "__main__":
    kill = sys.argv[1:2] == [KILL_CHILDREN]
    args = sys.argv[2:] if kill else sys.argv[1:]
    if not args:
        sys.exit(
            f"usage: python -m tfxp.runtime.forkserver [{KILL_CHILDREN}] SOCKET [MODULE ...] (started by ForkServer)"
        )
    serve(args[0], args[1:], kill_children=kill)
