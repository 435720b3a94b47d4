"""TensorBoard's scalars read back from event files: the training curves any Keras or
TensorFlow program wrote with `tf.summary.scalar` (the trainers' `TrainingCurves`).

Read with TensorFlow's public `summary_iterator` (no TensorBoard server): for each
run folder under a log directory (`train`, `validation`, `trial-3` ...), each tag's
(step, value) points in step order, the last value written for a step kept.
"""

from __future__ import annotations

import os

Curves = dict[str, dict[str, list[tuple[int, float]]]]


def _scalar(value) -> float | None:
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor"):
        import tensorflow as tf

        array = tf.make_ndarray(value.tensor)
        # One number; a text summary (a tuner trial's hyperparameters) is no point.
        return float(array) if array.size == 1 and array.dtype.kind in "biuf" else None
    return None


def read_curves(log_dir: str) -> Curves:
    """{run folder (relative to `log_dir`, "." for its own files): {tag: [(step, value)]}}.
    Empty when `log_dir` has no event files."""
    import tensorflow as tf

    found: dict[str, dict[str, dict[int, float]]] = {}
    if not tf.io.gfile.isdir(log_dir):
        return {}
    for folder, _, files in tf.io.gfile.walk(log_dir):
        run = os.path.relpath(folder, log_dir)
        for name in sorted(files):
            if ".tfevents." not in name:
                continue
            for event in tf.compat.v1.train.summary_iterator(os.path.join(folder, name)):
                for value in event.summary.value:
                    number = _scalar(value)
                    if number is not None:
                        found.setdefault(run, {}).setdefault(value.tag, {})[event.step] = number
    return {
        run: {tag: sorted(points.items()) for tag, points in sorted(tags.items())}
        for run, tags in sorted(found.items())
    }
