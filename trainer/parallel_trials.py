"""Parallel trials of the Tuner step: worker processes train, the oracle stays in the Tuner.

With `tuning: parallel_trials: N` (N > 1), the Tuner's search
(trainer/tuning.py) starts N worker processes, `python -m trainer.parallel_trials`.
Each builds the same search from the trainer's `tuner_fn` once, then scores the
trials it is sent, one at a time. The oracle (KerasTuner's, with its budgets)
stays in the Tuner's process: it picks each trial's values, receives its score
and keeps every trial, so the Tuner's outputs (best hyperparameters, every
trial's values and score) are those of a sequential search.

Each worker gets an equal share of the cores this process may use: it is
pinned to its own cores (CPU affinity, which also bounds tf.data's threads)
and TensorFlow's thread pools are sized to them before TensorFlow starts in
it, so N workers do not oversubscribe the cores. With more workers than
cores, each has one thread and they share every core. A worker that dies (a crash, the OOM killer), a trial that raises,
or a trial that takes longer than `trial_timeout_minutes` fails the search with
an error naming the trial; the other workers are stopped, and the Tuner
publishes nothing (TFX writes its outputs only after the search returns).

Protocol: one JSON object per line. The Tuner writes the set-up, then one
trial at a time, to a worker's stdin; the worker answers each trial with
{"trial_id", "score"} or {"trial_id", "error"} on its stdout. Everything else
it prints goes to its stderr, which the Tuner logs line by line (so it lands
in the run's log under every orchestrator), and quotes when the worker dies.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import selectors
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import IO, Any

from absl import logging

WORKER_COMMAND = (sys.executable, "-m", "trainer.parallel_trials")
# How long a stopped worker may take to exit before it is killed.
STOP_SECONDS = 10
# Lines of a worker's output quoted when it dies.
TAIL_LINES = 30


class TrialError(RuntimeError):
    """A parallel trial failed: its worker died, it raised, or it ran out of time."""


@dataclass(frozen=True)
class TrialWorkers:
    """How the Tuner's trials run in parallel."""

    tuner_fn: str  # "package.module.tuner_fn", imported in each worker
    fn_args: dict[str, Any]  # TFX's FnArgs fields (JSON), for the worker's tuner_fn
    count: int  # worker processes: trials at once
    timeout_seconds: float  # per trial, the worker's start included
    threads: int = 1  # TensorFlow threads per worker
    command: tuple[str, ...] = field(default=WORKER_COMMAND)


def _allowed_cores() -> list[int] | None:
    """The cores this process may run on (None where the OS does not say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return None


def cores() -> int:
    """How many cores this process may run on."""
    allowed = _allowed_cores()
    return len(allowed) if allowed else os.cpu_count() or 1


def core_shares(count: int) -> list[list[int] | None]:
    """Each worker's own cores: an equal share, or None (no pinning) with more workers
    than cores, or where cores cannot be pinned."""
    allowed = _allowed_cores()
    if not allowed or count > len(allowed):
        return [None] * count
    size = len(allowed) // count
    return [allowed[i * size : (i + 1) * size] for i in range(count)]


def workers_for(fn_args: Any, tuning: dict[str, Any]) -> TrialWorkers | None:
    """The worker processes a `tuning:` section asks for, or None: trials one after another."""
    count = min(int(tuning.get("parallel_trials") or 1), int(tuning["max_trials"]))
    if count <= 1:
        return None
    tuner_fn = fn_args.custom_config.get("tuner_fn")
    if not tuner_fn:
        raise ValueError(
            "parallel_trials needs custom_config['tuner_fn'], the dotted path of the "
            "tuner_fn each worker process builds its search with (pipeline/definition.py "
            "sets it)"
        )
    if count > cores():
        logging.warning(
            "parallel_trials %d is more than the %d core(s) here: the trials share cores",
            count,
            cores(),
        )
    fields = {k: v for k, v in vars(fn_args).items() if k != "data_accessor"}
    return TrialWorkers(
        tuner_fn=str(tuner_fn),
        fn_args=json.loads(json.dumps(fields, default=str)),
        count=count,
        timeout_seconds=60 * float(tuning.get("trial_timeout_minutes") or 30),
        threads=max(1, cores() // count),
    )


class _Worker:
    """One worker process, the trial it is running, and the tail of its output."""

    def __init__(self, index: int, workers: TrialWorkers, cpus: list[int] | None):
        self.tuner_id = f"worker-{index}"
        threads = str(workers.threads)
        env = {
            **os.environ,
            # The same modules as the Tuner's process (a trainer outside the project too).
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            "TF_NUM_INTRAOP_THREADS": threads,
            "TF_NUM_INTEROP_THREADS": threads,
            "OMP_NUM_THREADS": threads,
        }
        self.process = subprocess.Popen(  # noqa: S603 - the trial worker command built from this project's module, no shell
            list(workers.command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.stdin, self.stdout, self.stderr = _pipes(self.process)
        self.name = f"{self.tuner_id} (pid {self.process.pid})"
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._partial = b""
        fn_args = dict(workers.fn_args)
        # Its own working dir: the search a worker builds must not clear the Tuner's.
        fn_args["working_dir"] = os.path.join(str(fn_args.get("working_dir")), self.tuner_id)
        self._send(
            {
                "tuner_fn": workers.tuner_fn,
                "fn_args": fn_args,
                "threads": workers.threads,
                "cores": cpus,
            }
        )
        self.trial: Any = None  # keras-tuner's Trial while one runs
        self.started = time.monotonic()

    def _send(self, message: dict) -> None:
        self.stdin.write((json.dumps(message) + "\n").encode())
        self.stdin.flush()

    def start(self, trial) -> None:
        if self.trial is None:  # the first trial's clock started with the worker
            self.started = time.monotonic()
        self.trial = trial
        self._send(
            {"trial_id": trial.trial_id, "hyperparameters": trial.hyperparameters.get_config()}
        )

    def relay_output(self) -> bool:
        """Logs what the worker printed since the last call; False at its end."""
        data = os.read(self.stderr.fileno(), 65536)
        if data:
            lines = (self._partial + data).split(b"\n")
            self._partial = lines.pop()  # a line still being written
        else:
            lines, self._partial = [self._partial], b""
        for line in lines:
            text = line.decode(errors="replace").rstrip()
            if text:
                self.tail.append(text)
                logging.info("%s: %s", self.tuner_id, text)
        return bool(data)

    def result(self) -> float:
        """The running trial's score, read once the worker has answered (or died)."""
        line = self.stdout.readline()
        trial, self.trial = self.trial, None
        if not line:
            code = self.process.wait(STOP_SECONDS)
            while self.relay_output():
                pass
            raise TrialError(
                f"trial {trial.trial_id} ({trial.hyperparameters.values}): its worker "
                f"process {self.name} exited with code {code} before reporting a score (a "
                "negative code is the signal that ended it, -9 often the out-of-memory "
                "killer). The end of its output:\n" + "\n".join(self.tail)
            )
        reply = json.loads(line)
        if "error" in reply:
            raise TrialError(
                f"trial {trial.trial_id} ({trial.hyperparameters.values}) failed in its "
                f"worker process {self.name}:\n{reply['error']}"
            )
        logging.info(
            "trial %s scored %s in %s: %s",
            trial.trial_id,
            reply["score"],
            self.name,
            trial.hyperparameters.values,
        )
        return float(reply["score"])

    def stop(self, kill: bool) -> None:
        if self.process.poll() is None and not kill:
            self.stdin.close()  # the worker's loop ends at end of input
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(STOP_SECONDS)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.stdin, self.stdout, self.stderr):
            if not stream.closed:
                stream.close()


def _pipes(process: subprocess.Popen) -> tuple[IO[bytes], IO[bytes], IO[bytes]]:
    """The stdin, stdout and stderr of a process started with all three as PIPE."""
    if process.stdin is None or process.stdout is None or process.stderr is None:
        raise ValueError("the trial worker was started without its three pipes")
    return process.stdin, process.stdout, process.stderr


def run_trials(oracle, workers: TrialWorkers, objective: str) -> None:
    """Runs the oracle's trials on `workers.count` worker processes until it stops them."""
    started: list[_Worker] = []
    failed = True
    try:
        shares = core_shares(workers.count)
        for index, cpus in enumerate(shares):
            started.append(_Worker(index, workers, cpus))
        logging.info(
            "parallel trials: %s, %d TensorFlow thread(s) each, cores %s",
            ", ".join(w.name for w in started),
            workers.threads,
            shares,
        )
        _run(oracle, started, workers.timeout_seconds, objective)
        failed = False
    finally:
        for worker in started:
            worker.stop(kill=failed)


def _start_trials(oracle, idle: list[_Worker], running: list[_Worker]) -> bool:
    """Hands the oracle's next trials to the idle workers; False once the budget is spent."""
    from keras_tuner.engine.trial import TrialStatus

    while idle:
        trial = oracle.create_trial(idle[-1].tuner_id)
        if trial.status == TrialStatus.STOPPED:
            return False  # the running trials finish
        if trial.status == TrialStatus.RUNNING:
            worker = idle.pop()
            worker.start(trial)
            running.append(worker)
        elif running:
            break  # the oracle waits for a running trial's score
        else:
            time.sleep(0.1)
    return True


def _run(oracle, workers: list[_Worker], timeout: float, objective: str) -> None:
    from keras_tuner.engine.trial import TrialStatus

    idle, running, more = list(workers), list[_Worker](), True
    with selectors.DefaultSelector() as selector:
        for worker in workers:
            selector.register(worker.stdout, selectors.EVENT_READ, ("reply", worker))
            selector.register(worker.stderr, selectors.EVENT_READ, ("output", worker))
        while True:
            if more:
                more = _start_trials(oracle, idle, running)
            if not running:
                return
            oldest = min(running, key=lambda w: w.started)
            left = oldest.started + timeout - time.monotonic()
            events = selector.select(left) if left > 0 else []
            if not events:
                raise TrialError(
                    f"trial {oldest.trial.trial_id} ({oldest.trial.hyperparameters.values}) "
                    f"reported no score within {timeout / 60:g} minutes (tuning: "
                    f"trial_timeout_minutes); its worker process {oldest.name} was stopped"
                )
            for key, _ in events:
                kind, worker = key.data
                if kind == "output":
                    if not worker.relay_output():
                        selector.unregister(key.fileobj)
                    continue
                trial = worker.trial
                score = worker.result()
                running.remove(worker)
                oracle.update_trial(trial.trial_id, {objective: score})
                trial.status = TrialStatus.COMPLETED
                oracle.end_trial(trial)
                idle.append(worker)


def _limit_threads(threads: int, cpus: list[int] | None) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def main() -> None:
    """A worker: builds the search once, then scores each trial sent on stdin."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # Keras's progress and anything else printed: to stderr, the Tuner's log
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    setup = json.loads(sys.stdin.readline())
    _limit_threads(int(setup["threads"]), setup.get("cores"))

    import importlib
    from types import SimpleNamespace

    import keras_tuner as kt

    # TFX's FnArgs fields as attributes, without importing tfx.components (every
    # TFX component: seconds of start-up) for the FnArgs class itself.
    fn_args = SimpleNamespace(**setup["fn_args"], data_accessor=None)
    module, _, name = setup["tuner_fn"].rpartition(".")
    search = getattr(importlib.import_module(module), name)(fn_args).tuner
    for line in sys.stdin:
        request = json.loads(line)
        reply: dict[str, Any] = {"trial_id": request["trial_id"]}
        try:
            hp = kt.HyperParameters.from_config(request["hyperparameters"])
            reply["score"] = search.score(hp, request["trial_id"])
        except Exception:  # noqa: BLE001 - reported to the Tuner, which fails the search naming the trial
            reply["error"] = traceback.format_exc()
        replies.write(json.dumps(reply) + "\n")
    replies.flush()
    sys.stderr.flush()
    os._exit(0)  # no TensorFlow teardown


if __name__ == "__main__":
    main()
