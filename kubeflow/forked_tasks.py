"""`run-local --runner forked`: each task forked from a process that imported TFX once.

A task of the compiled spec is `python -m <TFX entrypoint> <args>`, and a fresh
interpreter spends ~10 s of CPU importing TensorFlow, Beam, TFMA and TFX's
components before the task does anything (measured: 10.6 s of a Pusher
task's 12 s). Under `--runner subprocess` every task pays that again.

Here one server process starts in the image's environment and working
directory (the same `image_environment()` and `WORKDIR` the subprocess runner
gives each task), imports the two entrypoints' modules, and then, per task,
forks: the child runs the entrypoint as `__main__` with the task's argv
(`runpy`, as `python -m` does), its output in the task's log, and exits with
the entrypoint's status. What a child shares with the server is what every
task imports anyway, plus tfxp's Beam caches (installed by the server, as
`tfxp run` installs them; they give Beam's own answers, see
tfxp/beam_speedups.py); the project's pipeline code (`components.*`, `trainer.*`) is
imported by the child, from the image's `PYTHONPATH`, so a module missing from
the image still fails the task. The server imports
nothing that starts TensorFlow's runtime (no session, no eager context):
forking before that point is safe.

What it does not reproduce: a container's fresh interpreter. Use the
default `--runner subprocess` (or `docker`) for the faithful run; this one is
for iterating on a pipeline, and for tests.

Protocol (one task at a time, as the local DAG runs them): the client writes
a JSON line {"module", "args", "log"} to the server's stdin; the server replies
{"returncode"} on a private descriptor once the child has exited.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from tfxp.forkserver import run_as_main

# What the server imports before the first fork: every module the two TFX
# entrypoints of a compiled spec import (the executor runner and the
# ExampleGen driver), which pulls in TensorFlow, Beam, TFMA and TFX's
# components; then the Beam plugin `tfxp run` gives its SDK workers, which
# installs tfxp's Beam caches (tfxp/beam_speedups.py) in every forked task.
PRELOAD = (
    "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor",
    "tfx.orchestration.kubeflow.v2.file_based_example_gen.driver",
    "tfxp.beam_speedups_plugin",
)
READY = "ready"
START_TIMEOUT_S = 600


class ForkServerError(RuntimeError):
    """The fork server did not start or died; the message names its log."""


def _child(request: dict[str, Any], channels: tuple[int, ...]) -> None:
    """In the forked child: become the task. Never returns (exits like `python -m`)."""
    # The server's channels become /dev/null (not closed: their Python file
    # objects are flushed at exit), stdin included.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, *channels):
        os.dup2(devnull, fd)
    out = os.open(request["log"] or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    sys.argv = [request["module"], *request["args"]]
    # As `python -m module`, exiting without the teardown of TensorFlow, Beam and
    # TFX (~2.1 s of CPU per task; see tfxp/forkserver.py).
    run_as_main("module", request["module"])


def serve(preload: tuple[str, ...] = PRELOAD) -> None:
    """The server's main loop (`python -m kubeflow.forked_tasks [MODULE ...]`)."""
    import importlib

    # Replies go to a private copy of stdout; anything the imports or tasks print
    # to fd 1 goes to stderr (the server's log) instead of into the protocol.
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    for module in preload:
        importlib.import_module(module)
    replies.write(json.dumps({READY: True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, (replies.fileno(),))
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")


class ForkServer:
    """The client: starts the server in the task environment, runs tasks, stops it."""

    def __init__(
        self, env: dict[str, str], cwd: str, log_path: str, preload: tuple[str, ...] = PRELOAD
    ) -> None:
        self.env, self.cwd, self.log_path, self.preload = env, cwd, log_path, preload
        self._proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        Path(self.log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kubeflow.forked_tasks", *self.preload],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        self._proc = proc
        reply = self._reply(START_TIMEOUT_S, what="start")
        if not reply.get(READY):
            raise ForkServerError(f"fork server answered {reply!r}; its log: {self.log_path}")
        return proc

    def _reply(self, timeout: float | None, what: str, echo: Any = None) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if echo is not None:
                echo()
            if ready:
                line = proc.stdout.readline()
                if not line:
                    break  # EOF: the server died
                return json.loads(line)
            if deadline is not None and time.monotonic() > deadline:
                proc.kill()
                raise ForkServerError(
                    f"fork server did not {what} within {timeout:.0f} s; its log: {self.log_path}"
                )
        code = proc.wait()
        self._proc = None
        raise ForkServerError(
            f"fork server exited {code} during task {what}; its log: {self.log_path}"
        )

    def run(self, module: str, args: list[str], log: str | None, echo: IO[bytes] | None) -> int:
        """Runs `python -m module args` as a fork of the server; its exit code."""
        proc = self._proc if self._proc and self._proc.poll() is None else self._start()
        assert proc.stdin is not None
        tail = _Tail(log, echo) if echo is not None and log else None
        proc.stdin.write(json.dumps({"module": module, "args": args, "log": log}) + "\n")
        proc.stdin.flush()
        reply = self._reply(None, what=module, echo=tail)
        if tail:
            tail()
        return int(reply["returncode"])

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None
        proc.stdin.close()  # the server's loop ends at EOF
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()


class _Tail:
    """Copies what a task appends to its log to `out` (`run-local -v`)."""

    def __init__(self, path: str, out: IO[bytes]) -> None:
        self.path, self.out = path, out
        self.offset = os.path.getsize(path) if os.path.exists(path) else 0

    def __call__(self) -> None:
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        if data:
            self.offset += len(data)
            self.out.write(data)
            self.out.flush()


if __name__ == "__main__":
    serve(tuple(sys.argv[1:]) or PRELOAD)
