"""How long training waited for input, and how long it computed, per epoch (a Keras callback)."""

from __future__ import annotations

import json
import time
from typing import Any

import tensorflow as tf
import tf_keras as keras
from absl import logging


class InputWaitMonitor(keras.callbacks.Callback):
    """Per epoch: how long training waited for its next batch, and how long it computed.

    Keras fetches each batch *inside* the compiled train step, so the gap
    between one step's end and the next step's begin shows no input wait.
    `wrap(dataset)` makes the step's own `GetNext` record two times, after the
    last prefetch: when the step asks for a batch (`requested`) and when it
    gets it (`handed`):

      wait    = handed - requested
      compute = step time - wait (the step's launch, its math, the callbacks' hooks)

    The first training step (tracing the train function while the pipeline
    starts) is reported as `startup_s`; validation and callbacks fall in
    `other_s`, so wait + compute + startup + other = the epoch's wall time.
    Assumes one step per execution (Keras' default `steps_per_execution`).
    """

    def __init__(self, input_bound_fraction: float = 0.2) -> None:
        super().__init__()
        self._supports_tf_logs = True  # no conversion of the logs to numpy per step
        self.input_bound_fraction = input_bound_fraction
        self.epochs: list[dict[str, Any]] = []
        self._requested: list[float] = []
        self._handed: list[float] = []
        self._first_step = True

    def _stamp_request(self) -> float:
        now = time.perf_counter()
        self._requested.append(now)
        return now

    def _stamp_handed(self) -> float:
        now = time.perf_counter()
        self._handed.append(now)
        return now

    def wrap(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """`dataset` with request and hand-over times recorded (use it as the training data)."""
        requests = tf.data.Dataset.from_tensors(0).repeat()
        requests = requests.map(lambda _: tf.py_function(self._stamp_request, [], tf.float64))

        def stamp(requested, element):
            handed = tf.py_function(self._stamp_handed, [], tf.float64)
            with tf.control_dependencies([requested, handed]):
                return tf.nest.map_structure(tf.identity, element)

        # zip asks `requests`, then `dataset`, in the caller's thread; the maps
        # are sequential (py_function is stateful: never parallelized). No
        # prefetch may be injected at the end: that would stamp production times.
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        zipped = tf.data.Dataset.zip((requests, dataset))
        return zipped.map(stamp).with_options(options)

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.epochs = []
        self._first_step = True

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch_start = time.perf_counter()
        self._wait = self._compute = self._startup = 0.0
        self._steps = 0

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self._requested.clear()
        self._handed.clear()
        self._step_start = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        end = time.perf_counter()
        begin = self._step_start
        step = end - begin
        stamped = self._requested and self._handed
        if self._first_step:
            self._startup += step
            self._first_step = False
        elif stamped and begin <= self._requested[0] <= self._handed[0] <= end:
            wait = self._handed[0] - self._requested[0]
            self._wait += wait
            self._compute += step - wait
        else:
            self._compute += step  # an unwrapped dataset: no split possible
        self._steps += 1

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        seconds = time.perf_counter() - self._epoch_start
        busy = self._wait + self._compute
        record = {
            "epoch": epoch,
            "steps": self._steps,
            "epoch_s": round(seconds, 4),
            "wait_s": round(self._wait, 4),
            "compute_s": round(self._compute, 4),
            "startup_s": round(self._startup, 4),
            "other_s": round(max(0.0, seconds - busy - self._startup), 4),
            "wait_fraction": round(self._wait / busy, 4) if busy else 0.0,
        }
        self.epochs.append(record)
        logging.info(
            "epoch %d input wait: waited %.3fs for input, computed %.3fs (%.0f%% waiting, "
            "%d steps); startup %.3fs, other (validation, callbacks) %.3fs, epoch %.3fs",
            epoch,
            record["wait_s"],
            record["compute_s"],
            100 * record["wait_fraction"],
            record["steps"],
            record["startup_s"],
            record["other_s"],
            record["epoch_s"],
        )

    def summary(self) -> dict[str, Any]:
        """Totals over the epochs so far, and whether training was input-bound."""
        totals = {
            key: round(sum(e[key] for e in self.epochs), 4)
            for key in ("epoch_s", "wait_s", "compute_s", "startup_s", "other_s")
        }
        busy = totals["wait_s"] + totals["compute_s"]
        fraction = totals["wait_s"] / busy if busy else 0.0
        return {
            "total": {
                **totals,
                "steps": sum(e["steps"] for e in self.epochs),
                "wait_fraction": round(fraction, 4),
            },
            "input_bound": fraction > self.input_bound_fraction,
            "input_bound_fraction": self.input_bound_fraction,
            "epochs": self.epochs,
        }

    def write_json(self, path: str) -> dict[str, Any]:
        """Writes `summary()` to `path` (any TF filesystem) and returns it."""
        report = self.summary()
        parent = path.rsplit("/", 1)[0] if "/" in path else ""
        if parent:
            tf.io.gfile.makedirs(parent)
        with tf.io.gfile.GFile(path, "w") as out:
            out.write(json.dumps(report, indent=2) + "\n")
        return report
