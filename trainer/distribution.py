"""Training on one worker or many: the one loop every `run_fn` here trains and exports with.

When `TF_CONFIG` (as Vertex AI custom training or a Kubeflow TFJob sets it)
names more than one training task (`chief` + `worker`), training runs under
`tf.distribute.MultiWorkerMirroredStrategy`: every worker builds the model in
the strategy's scope, reads its own part of the data, and gradients are
all-reduced each step. Without `TF_CONFIG`, or with one task, the default
strategy trains exactly as before.

Batch sizes: the `batch_size` hyperparameter is the GLOBAL batch, the examples
one optimizer step sees; each of N workers reads `batch_size / N`. The same
hyperparameters thus mean the same optimization on any number of workers
(learning rate and steps stay valid); more workers make each step cheaper, not
bigger. Training steps are steps of the global batch, the same on every
worker.

Sharding: by file. The matched files are sorted and worker i takes files
i, i+N, ...; every worker's dataset repeats forever, so all take the same
number of steps however uneven the files. With fewer files than workers a
worker would get no file at all, so each then reads every file and keeps
every N-th record of each (data sharding: correct, but every worker reads
everything). tf.data's own auto-sharding is not used: the input-wait monitor
zips its timing stamps onto the data, and a rewrite would shard those too.

Export: saving a model under the strategy needs every worker, so all save;
only the chief writes `serving_model_dir`, the others a temporary directory
that is deleted at once (TF's prescription), then all meet at a barrier so
no worker reports success before the chief's model is complete.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tensorflow as tf
import tf_keras as keras
from absl import logging

from trainer.checkpoints import resumable_backup
from trainer.curves import training_curves
from trainer.input_wait import InputWaitMonitor

TF_CONFIG = "TF_CONFIG"
TRAINING_TASKS = ("chief", "worker")
INPUT_WAIT_FILE = "input_wait.json"  # in fn_args.model_run_dir
# Multi-worker: each worker's figures as well, `input_wait-worker-<index>.json`.
WORKER_INPUT_WAIT_FILE = "input_wait-worker-{index}.json"

# (files or patterns, per-worker batch size, training, record shard) -> batches
DatasetFn = Callable[[Sequence[str] | str, int, bool, "tuple[int, int] | None"], tf.data.Dataset]


class ClusterConfigError(ValueError):
    """A TF_CONFIG this trainer cannot train with; the message says what is wrong."""


@dataclass(frozen=True)
class Cluster:
    """Where this process stands among the training workers (index 0 is the chief)."""

    workers: int = 1
    index: int = 0
    task_type: str | None = None
    task_id: int | None = None

    @property
    def multi_worker(self) -> bool:
        return self.workers > 1

    @property
    def is_chief(self) -> bool:
        return self.index == 0

    @property
    def name(self) -> str:
        return f"{self.task_type}-{self.task_id}" if self.task_type else "local"


def cluster_from_env(env: Mapping[str, str] | None = None) -> Cluster:
    """The training cluster `TF_CONFIG` describes; one local worker without it."""
    raw = (os.environ if env is None else env).get(TF_CONFIG, "").strip()
    if not raw:
        return Cluster()
    try:
        config = json.loads(raw)
        cluster = config.get("cluster", {}) or {}
        task = config.get("task", {}) or {}
    except (ValueError, AttributeError) as e:
        raise ClusterConfigError(f"{TF_CONFIG} is not a JSON object: {e}") from e
    chiefs, workers = list(cluster.get("chief", [])), list(cluster.get("worker", []))
    if len(chiefs) > 1:
        raise ClusterConfigError(f"{TF_CONFIG} names {len(chiefs)} chiefs; at most one")
    count = len(chiefs) + len(workers)
    if count <= 1:
        return Cluster()
    task_type, task_id = task.get("type"), task.get("index", 0)
    if task_type not in TRAINING_TASKS:
        raise ClusterConfigError(
            f"{TF_CONFIG} task type {task_type!r}: this trainer runs only on "
            f"{TRAINING_TASKS} tasks (no parameter servers or evaluators)"
        )
    pool = chiefs if task_type == "chief" else workers
    if not isinstance(task_id, int) or not 0 <= task_id < len(pool):
        raise ClusterConfigError(
            f"{TF_CONFIG} task index {task_id!r} is not in the {len(pool)} {task_type!r} tasks"
        )
    # TF's numbering: the chief (if any) first, then the workers.
    index = task_id + (len(chiefs) if task_type == "worker" else 0)
    return Cluster(workers=count, index=index, task_type=task_type, task_id=task_id)


def training_strategy(cluster: Cluster) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy for a multi-worker cluster, else the default strategy.

    Call before any other TensorFlow op: the collective ops are configured
    when the runtime starts. AUTO picks ring all-reduce on CPUs, NCCL on GPUs.
    """
    if not cluster.multi_worker:
        return tf.distribute.get_strategy()
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.AUTO
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    logging.info(
        "multi-worker training: %s is worker %d of %d%s",
        cluster.name,
        cluster.index,
        cluster.workers,
        " (chief)" if cluster.is_chief else "",
    )
    return strategy


def per_worker_batch(global_batch: int, cluster: Cluster, name: str = "batch_size") -> int:
    if global_batch % cluster.workers:
        raise ValueError(
            f"hyperparameter {name}={global_batch} is the global batch and must divide "
            f"evenly between the {cluster.workers} workers"
        )
    return global_batch // cluster.workers


def shard_files(
    patterns: Sequence[str] | str, cluster: Cluster
) -> tuple[Sequence[str] | str, tuple[int, int] | None]:
    """This worker's files, and a record shard `(workers, index)` when files are too few."""
    if not cluster.multi_worker:
        return patterns, None
    listed = [patterns] if isinstance(patterns, str) else list(patterns)
    files = sorted({path for pattern in listed for path in tf.io.gfile.glob(pattern)})
    if not files:
        raise FileNotFoundError(f"no training files match {listed}")
    if len(files) < cluster.workers:
        logging.info(
            "%d file(s) for %d workers: every worker reads them all and keeps 1 record in %d",
            len(files),
            cluster.workers,
            cluster.workers,
        )
        return files, (cluster.workers, cluster.index)
    mine = files[cluster.index :: cluster.workers]
    logging.info("worker %d reads %d of %d files", cluster.index, len(mine), len(files))
    return mine, None


@dataclass(frozen=True)
class TrainingJob:
    """What a run_fn supplies; `train_and_export` does the rest, on any number of workers.

    build_model: builds and compiles the model (called in the strategy's scope).
    dataset: (files, per-worker batch, training, record shard) -> (features, label) batches.
    signatures: the trained model -> its SavedModel signatures.
    """

    build_model: Callable[[], keras.Model]
    dataset: DatasetFn
    signatures: Callable[[keras.Model], dict[str, Any]]
    batch_size: int
    eval_batch_size: int
    callbacks: Sequence[keras.callbacks.Callback] = field(default_factory=tuple)
    # > 0: a checkpoint every this many steps, and a rerun resumes from the last
    # one (trainer/checkpoints.py); 0: none.
    checkpoint_steps: int = 0


def _worker_data(
    strategy: tf.distribute.Strategy,
    cluster: Cluster,
    job: TrainingJob,
    patterns: Sequence[str] | str,
    global_batch: int,
    training: bool,
    wrap: Callable[[tf.data.Dataset], tf.data.Dataset] = lambda d: d,
):
    if not cluster.multi_worker:
        return wrap(job.dataset(patterns, global_batch, training, None))
    files, record_shard = shard_files(patterns, cluster)
    batch = per_worker_batch(global_batch, cluster, "batch_size" if training else "eval_batch_size")
    # One input pipeline per worker, already sharded and batched per worker:
    # the strategy neither re-shards nor re-batches it.
    return strategy.distribute_datasets_from_function(
        lambda _: wrap(job.dataset(files, batch, training, record_shard))
    )


def train_and_export(fn_args: Any, job: TrainingJob) -> keras.Model:
    """Trains `job`'s model on fn_args' data (multi-worker if TF_CONFIG says so) and saves it."""
    cluster = cluster_from_env()
    strategy = training_strategy(cluster)
    with strategy.scope():
        model = job.build_model()
    model.summary(print_fn=logging.info)

    train_steps = max(1, int(fn_args.train_steps))
    # A few epochs so the log shows the learning curve and eval loss over time.
    epochs = min(5, train_steps)
    # Input-bound or not: per epoch, time waited for input vs time computed.
    input_wait = InputWaitMonitor()
    backup = resumable_backup(
        fn_args,
        job.checkpoint_steps,
        multi_worker=cluster.multi_worker,
        is_chief=cluster.is_chief,
    )
    model.fit(
        _worker_data(
            strategy, cluster, job, fn_args.train_files, job.batch_size, True, input_wait.wrap
        ),
        epochs=epochs,
        steps_per_epoch=max(1, train_steps // epochs),
        validation_data=_worker_data(
            strategy, cluster, job, fn_args.eval_files, job.eval_batch_size, False
        ),
        validation_steps=max(1, int(fn_args.eval_steps)),
        callbacks=[
            *job.callbacks,
            input_wait,
            *([backup] if backup else []),
            # The chief's curves only: every worker sees the same epoch's metrics.
            *training_curves(getattr(fn_args, "model_run_dir", None) if cluster.is_chief else None),
        ],
        verbose=0,
    )
    _record_input_wait(input_wait, getattr(fn_args, "model_run_dir", None), cluster)
    export(
        model,
        job.signatures(model),
        fn_args.serving_model_dir,
        cluster,
        sync_dir=getattr(fn_args, "model_run_dir", None),
    )
    if backup is not None and cluster.is_chief:
        backup.finished()
    return model


def _record_input_wait(monitor: InputWaitMonitor, run_dir: str | None, cluster: Cluster) -> None:
    report = monitor.summary()
    if run_dir:
        if cluster.is_chief:  # where single-worker runs (and readers) have it
            monitor.write_json(os.path.join(run_dir, INPUT_WAIT_FILE))
        if cluster.multi_worker:
            name = WORKER_INPUT_WAIT_FILE.format(index=cluster.index)
            monitor.write_json(os.path.join(run_dir, name))
    logging.info(
        "input wait over training (%s): %s (input-bound: %s)",
        cluster.name,
        json.dumps(report["total"]),
        "yes" if report["input_bound"] else "no",
    )


def export(
    model: keras.Model,
    signatures: dict[str, Any],
    serving_model_dir: str,
    cluster: Cluster,
    sync_dir: str | None = None,
) -> None:
    """Saves the model: the chief to `serving_model_dir`, other workers to a deleted temp dir.

    Every worker saves (saving can run collective ops, so all must take part). With
    several workers, none exits while a peer may still need it (`_exit_handshake`, through
    `sync_dir`: the run's log folder, which every worker writes; else the model's folder)."""
    target = (
        serving_model_dir if cluster.is_chief else tempfile.mkdtemp(prefix=f"model-{cluster.name}-")
    )
    try:
        # save_traces=False: serving and TFMA use the signatures, so Keras'
        # per-layer traces (seconds of extra tracing at export) are never read.
        model.save(target, save_format="tf", signatures=signatures, save_traces=False)
    finally:
        if not cluster.is_chief:
            shutil.rmtree(target, ignore_errors=True)
            logging.info(
                "%s saved its copy to %s and deleted it (chief exports)", cluster.name, target
            )
    if cluster.multi_worker:
        _exit_handshake(cluster, sync_dir or os.path.dirname(serving_model_dir.rstrip("/")))


EXPORT_SYNC_DIR = ".export-sync"
EXPORT_SYNC_TIMEOUT_S = 600.0


def _exit_handshake(
    cluster: Cluster, shared_dir: str, timeout_s: float = EXPORT_SYNC_TIMEOUT_S
) -> None:
    """Returns once no peer can still need this worker after export.

    A collective's last step can leave a peer still fetching this worker's buffer
    after this worker's own op returned; exiting then fails the peer ("Socket
    closed"; seen on the loaded 2-core machine with an all-reduce barrier here).
    So the workers meet through marker files on the storage they all share
    (`shared_dir`): each non-chief marks that its save
    returned and waits for the chief's mark; the chief waits for every
    non-chief's mark, then marks its own. The chief exits only once no
    non-chief needs it, and each non-chief only once the chief is done."""
    folder = os.path.join(shared_dir, EXPORT_SYNC_DIR)
    tf.io.gfile.makedirs(folder)

    def mark(index: int) -> str:
        return os.path.join(folder, f"saved-{index}")

    def write(index: int) -> None:
        with tf.io.gfile.GFile(mark(index), "w") as f:
            f.write(cluster.name)

    waiting_for = [mark(i) for i in range(1, cluster.workers)] if cluster.is_chief else [mark(0)]
    if not cluster.is_chief:
        write(cluster.index)
    deadline = time.monotonic() + timeout_s
    while missing := [m for m in waiting_for if not tf.io.gfile.exists(m)]:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{cluster.name}: after export, no mark from {', '.join(missing)} within "
                f"{timeout_s:.0f} s (a worker died or does not share {shared_dir})"
            )
        time.sleep(0.2)
    if cluster.is_chief:
        write(0)
