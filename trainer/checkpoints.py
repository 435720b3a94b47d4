"""Resumable training: checkpoints every N steps, and a rerun continues from the last one.

`train_and_export` (trainer/distribution.py) adds a `ResumableBackup` (Keras'
`BackupAndRestore` with a step frequency) when the TrainingJob asks for
checkpoints. It saves the model's weights, the optimizer's state and step
counter, and the epoch and batch reached, every `checkpoint_steps` steps.
When the Trainer starts over after its process died (SIGKILL, lost machine,
out of memory), fit restores all of that and continues from that step; the log
says `resuming from step N` and `resume.json` in the model-run folder records
it. The checkpoints are deleted once the model is exported.

Where: TFX 1.16 gives each executor a stateful working dir
(`<node>/.system/stateful_working_dir/<uuid>`, the uuid stored on the
execution in ML Metadata), but only an orchestrator retrying the same
execution gets the same one back: `tfxp run` (TFX's LocalDagRunner) starts
every run under a new pipeline-run id, so a rerun registers a new execution
with a new folder, and TFX's Trainer does not pass the folder to run_fn
anyway. So the folder is derived from what defines the training instead:
`<pipeline root>/Trainer/checkpoints/<key>`, the key a hash of the
training and eval files, the transform graph, the custom config (code
fingerprint and hyperparameters included) and the step counts. A rerun of the
same training (upstream steps cached, same data and code) finds it; any
change starts from step 0 in a new folder. Airflow and Kubeflow retries of
the step compute the same key and resume the same way.

What is not restored: the position in the input. The input pipeline starts
again from its first (shuffled, seeded) batch, so the examples seen before
the checkpoint are seen once more; the step count, and so the total training,
is what the dataset file says.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import tensorflow as tf
import tf_keras as keras
from absl import logging

CHECKPOINTS = "checkpoints"
RESUME_FILE = "resume.json"  # in fn_args.model_run_dir


def training_key(fn_args: Any) -> str:
    """A hash of what defines this training: same inputs and settings, same key."""

    def listed(value: Any) -> list[str]:
        return sorted([value] if isinstance(value, str) else list(value or []))

    identity = {
        "train_files": listed(fn_args.train_files),
        "eval_files": listed(fn_args.eval_files),
        "transform_output": getattr(fn_args, "transform_output", None),
        "custom_config": getattr(fn_args, "custom_config", None) or {},
        "hyperparameters": getattr(fn_args, "hyperparameters", None) or {},
        "train_steps": int(fn_args.train_steps),
        "eval_steps": int(fn_args.eval_steps or 0),
    }
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def checkpoint_dir(fn_args: Any) -> str | None:
    """`<Trainer node folder>/checkpoints/<training key>`; None without a model-run folder.

    TFX puts the model-run folder at `<pipeline root>/<Trainer id>/model_run/<execution>`."""
    run_dir = getattr(fn_args, "model_run_dir", None)
    if not run_dir:
        return None
    node_dir = os.path.dirname(os.path.dirname(run_dir.rstrip("/")))
    return os.path.join(node_dir, CHECKPOINTS, training_key(fn_args))


class ResumableBackup(keras.callbacks.BackupAndRestore):
    """BackupAndRestore every `every_steps` steps that logs where training starts and
    keeps its checkpoint until `finished()` (after export), so a Trainer killed while
    exporting resumes at its last step instead of step 0."""

    def __init__(self, backup_dir: str, every_steps: int, run_dir: str | None = None):
        if every_steps < 1:
            raise ValueError(f"checkpoint_steps must be a positive step count, not {every_steps}")
        super().__init__(backup_dir, save_freq=every_steps, delete_checkpoint=False)
        self.every_steps = every_steps
        self.run_dir = run_dir
        self.resumed_from: int | None = None

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)  # restores the checkpoint if there is one
        step = int(self.model.optimizer.iterations.numpy())
        self.resumed_from = step
        if step:
            logging.info("resuming from step %d (checkpoint in %s)", step, self.backup_dir)
        else:
            logging.info(
                "training from step 0; a checkpoint every %d steps in %s",
                self.every_steps,
                self.backup_dir,
            )
        if self.run_dir:
            record = {
                "resumed_from_step": step,
                "checkpoint_dir": self.backup_dir,
                "checkpoint_steps": self.every_steps,
            }
            tf.io.gfile.makedirs(self.run_dir)
            with tf.io.gfile.GFile(os.path.join(self.run_dir, RESUME_FILE), "w") as f:
                f.write(json.dumps(record, indent=2))

    def finished(self) -> None:
        """The model is exported: its checkpoints are no longer needed."""
        if tf.io.gfile.exists(self.backup_dir):
            tf.io.gfile.rmtree(self.backup_dir)
            logging.info("deleted the training checkpoints in %s", self.backup_dir)


def resumable_backup(
    fn_args: Any, every_steps: int, *, multi_worker: bool = False, is_chief: bool = True
) -> ResumableBackup | None:
    """The callback for `train_and_export`, or None when checkpoints are off (0 steps)
    or there is no folder to keep them in."""
    if not every_steps:
        return None
    folder = checkpoint_dir(fn_args)
    if folder is None:
        logging.info("no model-run folder: training without checkpoints")
        return None
    # One resume.json per training, the chief's (the workers share the folder).
    run_dir = getattr(fn_args, "model_run_dir", None) if is_chief else None
    backup = ResumableBackup(folder, every_steps, run_dir)
    # Several workers: Keras writes the other workers' copies to temporary folders
    # that only it knows; let it delete them at the end of training.
    backup.delete_checkpoint = multi_worker
    return backup
