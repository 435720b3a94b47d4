"""TensorBoard's training curves, written by every Keras trainer through
`trainer.distribution.train_and_export` (the shared training loop).

Event files in the model-run folder's `tensorboard/`: `train/` and `validation/`
as Keras names them, one point per epoch. Read back by runtime/training_curves.py
(the console, the model card, the tests); `tfxp tensorboard` opens them.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras

# Inside the model-run folder (fn_args.model_run_dir, which TFX's Trainer gives every
# run and KFP's UI links): TensorBoard's logs, `train/` and `validation/` as Keras names them.
TENSORBOARD_DIR = "tensorboard"
TRAIN_LOGS, EVAL_LOGS = "train", "validation"


class TrainingCurves(keras.callbacks.Callback):
    """TensorBoard event files, one point per epoch: each metric and the loss as
    `epoch_<name>` in train/ and validation/ (Keras' val_ metrics), and the learning
    rate in train/. Keras' own TensorBoard callback logs the rate only under a
    schedule; this logs what the optimizer used, constant or not."""

    def __init__(self, log_dir: str) -> None:
        super().__init__()
        self.log_dir = log_dir
        self._writers: dict[str, Any] = {}

    def on_train_begin(self, logs: dict | None = None) -> None:
        self._writers = {
            kind: tf.summary.create_file_writer(f"{self.log_dir}/{kind}")
            for kind in (TRAIN_LOGS, EVAL_LOGS)
        }

    def _learning_rate(self) -> float | None:
        optimizer = getattr(self.model, "optimizer", None)
        rate = getattr(optimizer, "learning_rate", None)
        if rate is None:
            return None
        if callable(rate) and optimizer is not None:  # a schedule: the rate at the current step
            rate = rate(optimizer.iterations)
        return float(keras.backend.get_value(rate))

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = dict(logs or {})
        rate = self._learning_rate()
        by_kind = {
            TRAIN_LOGS: {k: v for k, v in logs.items() if not k.startswith("val_")},
            EVAL_LOGS: {k.removeprefix("val_"): v for k, v in logs.items() if k.startswith("val_")},
        }
        if rate is not None:
            by_kind[TRAIN_LOGS]["learning_rate"] = rate
        for kind, values in by_kind.items():
            with self._writers[kind].as_default():
                for name, value in values.items():
                    tf.summary.scalar(f"epoch_{name}", float(value), step=epoch)
            self._writers[kind].flush()

    def on_train_end(self, logs: dict | None = None) -> None:
        for writer in self._writers.values():
            writer.close()


def training_curves(
    run_dir: str | None, folder: str = TENSORBOARD_DIR
) -> list[keras.callbacks.Callback]:
    """The TensorBoard callback for a model-run folder's `folder` (none without a run
    folder; `folder=""`: the run folder itself, as a tuner trial's)."""
    if not run_dir:
        return []
    return [TrainingCurves(f"{run_dir}/{folder}" if folder else run_dir)]
