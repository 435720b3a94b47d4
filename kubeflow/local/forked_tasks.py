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
runtime/beam_speedups.py); the project's pipeline code (`components.*`, `trainer.*`) is
imported by the child, from the image's `PYTHONPATH`, so a module missing from
the image still fails the task. The server imports
nothing that starts TensorFlow's runtime (no session, no eager context):
forking before that point is safe.

What it does not reproduce: a container's fresh interpreter. Use the
default `--runner subprocess` (or `docker`) for the faithful run; this one is
for iterating on a pipeline, and for tests.

The server is tfxp's fork server (runtime/forkserver.py, also what the tests fork
their runner processes from); this module is the task runner's side of it:
which modules to preload, one task at a time into its log, `-v` echo, and a
server that died between tasks replaced.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import IO

from runtime import forkserver
from runtime.forkserver import ForkServerError

__all__ = ["PRELOAD", "ForkServer", "ForkServerError"]

# What the server imports before the first fork: every module the two TFX
# entrypoints of a compiled spec import (the executor runner and the
# ExampleGen driver), which pulls in TensorFlow, Beam, TFMA and TFX's
# components; then the Beam plugin `tfxp run` gives its SDK workers, which
# installs tfxp's Beam caches (runtime/beam_speedups.py) in every forked task.
PRELOAD = (
    "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor",
    "tfx.orchestration.kubeflow.v2.file_based_example_gen.driver",
    "runtime.beam_speedups_plugin",
)
START_TIMEOUT_S = 600


class ForkServer:
    """Starts the server in the task environment, runs tasks, stops it."""

    def __init__(
        self, env: dict[str, str], cwd: str, log_path: str, preload: tuple[str, ...] = PRELOAD
    ) -> None:
        self.env, self.cwd, self.log_path, self.preload = env, cwd, log_path, preload
        self._server: forkserver.ForkServer | None = None

    def _live_server(self) -> forkserver.ForkServer:
        if self._server is not None and self._server.wait_exited() is not None:
            self._server.close()  # died between tasks: the next task gets a new one
            self._server = None
        if self._server is None:
            os.makedirs(os.path.dirname(self.log_path) or ".", exist_ok=True)
            self._server = forkserver.ForkServer(
                self.preload,
                cwd=self.cwd,
                env=self.env,
                log_path=self.log_path,
                start_timeout=START_TIMEOUT_S,
            )
        return self._server

    def run(self, module: str, args: list[str], log: str | None, echo: IO[bytes] | None) -> int:
        """Runs `python -m module args` as a fork of the server, output in `log`; its exit code."""
        server = self._live_server()
        # The tail starts at the log's size before the task: taken after the start, it
        # skipped whatever a quick task had already written (its first lines, or all).
        tail = _Tail(log, echo) if echo is not None and log else None
        with open(log or os.devnull, "ab") as out:
            task = server.popen(
                [sys.executable, "-m", module, *args],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )
        while True:
            try:
                code = task.wait(0.2)
                break
            except subprocess.TimeoutExpired:
                if tail:
                    tail()
            except ForkServerError:
                raise ForkServerError(
                    f"fork server exited {server.wait_exited(5)} during task {module}; "
                    f"its log: {self.log_path}"
                ) from None
        if tail:
            tail()
        return code

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None


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
