"""Dynamic batching: concurrent requests to one signature become one call of the model.

Each signature of each loaded version has one `Batcher`: a queue and a thread
that takes whatever requests are waiting (up to `max_batch_size` rows),
concatenates their inputs along the batch axis, calls the signature once and
hands each request its own rows of the outputs. With `timeout_ms` 0 (the
default) the thread never waits for more: a lone request runs at once, and
while a batch runs the next requests queue up and form the next batch, so the
batch size follows the load. A positive `timeout_ms` waits up to that long for
a fuller batch (TF Serving's `batch_timeout_micros`), trading latency for
throughput at moderate load.

A batch that fails (the model rejected one request's input) is retried one
request at a time, so only the faulty request gets the error. A request that
arrives after its batcher was stopped (its version was swapped out while the
request was on its way) runs in the caller's thread: it is answered, never
dropped.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

Inputs = dict[str, np.ndarray]
Outputs = dict[str, np.ndarray]

DEFAULT_MAX_BATCH_SIZE = 64
DEFAULT_TIMEOUT_MS = 0.0


@dataclass
class Job:
    inputs: Inputs
    rows: int
    future: Future = field(default_factory=Future)


class Batcher:
    """Runs `call(inputs) -> outputs` on batches of queued jobs, in one thread.

    `observe(batch_rows)` is called once per model call (the metrics' batch size)."""

    def __init__(
        self,
        call: Callable[[Inputs], Outputs],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        timeout_ms: float = DEFAULT_TIMEOUT_MS,
        observe: Callable[[int], None] | None = None,
        name: str = "batcher",
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max batch size must be at least 1, not {max_batch_size}")
        self.call = call
        self.max_batch_size = max_batch_size
        self.timeout = max(0.0, timeout_ms) / 1000.0
        self.observe = observe or (lambda _rows: None)
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, inputs: Inputs, rows: int) -> Future:
        """A future of this job's outputs (its rows only)."""
        job = Job(inputs, rows)
        with self._lock:
            if not self._closed:
                self._queue.put(job)
                return job.future
        self._run([job])  # stopped: answer in the caller's thread rather than drop it
        return job.future

    def close(self) -> None:
        """Stops after every job queued so far is answered."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(None)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _gather(self, first: Job) -> tuple[list[Job], bool]:
        """`first` and the jobs queued behind it, up to max_batch_size rows; (jobs, stop)."""
        jobs, rows = [first], first.rows
        deadline = time.monotonic() + self.timeout
        while rows < self.max_batch_size:
            try:
                if self.timeout:
                    left = deadline - time.monotonic()
                    job = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
                else:
                    job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is None:
                return jobs, True
            if rows + job.rows > self.max_batch_size:
                self._run(jobs)  # a full batch: this job starts the next one
                jobs, rows = [job], job.rows
                deadline = time.monotonic() + self.timeout
                continue
            jobs.append(job)
            rows += job.rows
        return jobs, False

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            jobs, stop = self._gather(first)
            self._run(jobs)
            if stop:
                return

    def _run(self, jobs: list[Job]) -> None:
        try:
            inputs = concatenate([j.inputs for j in jobs])
        except ValueError:  # shapes that do not stack: each on its own
            inputs = None
        if inputs is not None:
            try:
                outputs = self.call(inputs)
            except BaseException as e:  # noqa: BLE001 - handed to the request(s)
                if len(jobs) == 1:
                    jobs[0].future.set_exception(e)
                    return
            else:
                self.observe(sum(j.rows for j in jobs))
                start = 0
                for job in jobs:
                    end = start + job.rows
                    job.future.set_result({k: v[start:end] for k, v in outputs.items()})
                    start = end
                return
        for job in jobs:  # the batch failed: find the request that made it fail
            try:
                outputs = self.call(job.inputs)
            except BaseException as e:  # noqa: BLE001
                job.future.set_exception(e)
            else:
                self.observe(job.rows)
                job.future.set_result(outputs)


def concatenate(parts: list[Inputs]) -> Inputs:
    """The jobs' inputs stacked along the batch axis (ValueError when they cannot be)."""
    if len(parts) == 1:
        return parts[0]
    names = parts[0].keys()
    if any(p.keys() != names for p in parts):
        raise ValueError("the jobs give different inputs")
    return {n: np.concatenate([p[n] for p in parts], axis=0) for n in names}
