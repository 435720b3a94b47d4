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

The parts: this module is the client (`ForkServer`, `ForkedProcess`) and the
server's entry point; forkserver_loop.py is the server's loop, forkserver_child.py
what a forked child does to become its command.
"""

from __future__ import annotations

import contextlib
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
from typing import IO, Any, NoReturn

from runtime.forkserver_child import parse_command

# `python -m runtime.forkserver KILL_CHILDREN SOCKET ...`: the kernel ends every child
# with the server (ForkServer's kill_children_on_exit).
KILL_CHILDREN = "--kill-children-on-exit"


class ForkServerError(RuntimeError):
    """The server did not start, died, or refused a command; the message names its log."""


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
        if word != "exit":
            raise ForkServerError(f"the fork server answered {self._pending[:200]!r}, not an exit")
        self.returncode = int(value)
        self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        return self._read_status(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._read_status(timeout)
        if code is None:  # only a wait with a timeout returns without a status
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
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
            if t.is_alive():  # only with a timeout
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
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
            self._proc = subprocess.Popen(  # noqa: S603 - this interpreter on the fork server's own module, no shell
                [
                    sys.executable,
                    "-m",
                    "runtime.forkserver",
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
        return subprocess.CompletedProcess(proc.args, proc.wait(), out, err)  # communicate waited

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
            assert proc.stdin is not None  # noqa: S101 - for the type checker: started with stdin=PIPE
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
            f"usage: python -m runtime.forkserver [{KILL_CHILDREN}] SOCKET [MODULE ...] (started by ForkServer)"
        )
    from runtime.forkserver_loop import serve

    serve(args[0], args[1:], kill_children=kill)
