"""tf.data input for training and evaluation over transformed TFRecord shards.

Shards are read in parallel, records are batched *before* parsing so that
`tf.io.parse_example` decodes a whole batch in one op, and every stage is
AUTOTUNEd and prefetched so the model never waits on a single file. With a
tf.data service dispatcher address the same pipeline runs on remote workers
(`distribute`). `InputWaitMonitor` measures, per epoch, how long training
waited for input and how long it computed. Measurements: trainer/INPUT_PIPELINE.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf
import tf_keras as keras
from absl import logging

AUTOTUNE = tf.data.AUTOTUNE

BatchFn = Callable[[dict[str, tf.Tensor], tf.Tensor], tuple[dict[str, tf.Tensor], tf.Tensor]]

DATA_SERVICE_MODES = ("distributed_epoch", "parallel_epochs")

# Shards read at once. Two per core is plenty for GZIP: more only adds
# per-record hand-offs between threads (measured, see INPUT_PIPELINE.md).
DEFAULT_CYCLE_LENGTH = 4
# Consecutive records taken from one shard per turn. A per-record turn costs a
# thread hand-off per record; 64 amortizes it (the shuffle buffer mixes shards).
DEFAULT_BLOCK_LENGTH = 64
READ_BUFFER_BYTES = 1 << 20


def _gzip_dataset(path: tf.Tensor) -> tf.data.Dataset:
    return tf.data.TFRecordDataset(path, compression_type="GZIP", buffer_size=READ_BUFFER_BYTES)


def _list_files(patterns: str | Sequence[str], shuffle: bool, seed: int | None):
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    files = tf.data.Dataset.list_files(patterns, shuffle=shuffle, seed=seed)
    # list_files' cardinality is known: never open more readers than files.
    num_files = int(files.cardinality())
    return files, max(1, min(DEFAULT_CYCLE_LENGTH, num_files)) if num_files > 0 else 1


def read_records(
    file_patterns: str | Sequence[str],
    *,
    shuffle_files: bool = False,
    seed: int | None = None,
    cycle_length: int | None = None,
    block_length: int = DEFAULT_BLOCK_LENGTH,
    deterministic: bool = True,
    ignore_errors: bool = False,
) -> tf.data.Dataset:
    """Serialized records of every file matching `file_patterns`, shards read in parallel."""
    files, default_cycle = _list_files(file_patterns, shuffle_files, seed)

    def read(path: tf.Tensor) -> tf.data.Dataset:
        records = _gzip_dataset(path)
        return records.ignore_errors(log_warning=True) if ignore_errors else records

    return files.interleave(
        read,
        cycle_length=cycle_length or default_cycle,
        block_length=block_length,
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )


def read_blocks(
    file_patterns: str | Sequence[str],
    block_size: int,
    *,
    shuffle_files: bool = False,
    seed: int | None = None,
    cycle_length: int | None = None,
    deterministic: bool = True,
    ignore_errors: bool = False,
) -> tf.data.Dataset:
    """Serialized records in blocks of up to `block_size` consecutive records of one shard.

    Each reader thread batches its own shard, so threads hand over whole
    blocks instead of single records: per-record hand-offs between threads
    cost more CPU than decompressing the record (INPUT_PIPELINE.md). Blocks at
    the end of a shard may be short; `rebatch` evens them out.
    """
    files, default_cycle = _list_files(file_patterns, shuffle_files, seed)

    def read(path: tf.Tensor) -> tf.data.Dataset:
        records = _gzip_dataset(path)
        if ignore_errors:
            records = records.ignore_errors(log_warning=True)
        return records.batch(block_size)

    return files.interleave(
        read,
        cycle_length=cycle_length or default_cycle,
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )


def pipeline_options(
    deterministic: bool = True, threadpool_size: int | None = None
) -> tf.data.Options:
    """The tf.data options every input pipeline here runs with."""
    options = tf.data.Options()
    options.deterministic = deterministic
    options.autotune.enabled = True
    opt = options.experimental_optimization
    opt.map_parallelization = True  # (default) stateless maps run in parallel
    opt.parallel_batch = True  # batch copies on several threads
    opt.map_and_batch_fusion = True  # (default) map -> batch fused, for other callers
    if threadpool_size:
        options.threading.private_threadpool_size = threadpool_size
    return options


def distribute(
    dataset: tf.data.Dataset,
    address: str,
    *,
    mode: str = "distributed_epoch",
    job_name: str | None = None,
    compression: str | None = "AUTO",
) -> tf.data.Dataset:
    """Runs `dataset` on the tf.data service workers of the dispatcher at `address`.

    `distributed_epoch` splits one pass over the files between the workers
    (every record once per epoch); `parallel_epochs` has every worker produce
    the whole dataset (each record once per worker). A `job_name` lets several
    trainers share one job (each gets a different part of the data).
    """
    if mode not in DATA_SERVICE_MODES:
        raise ValueError(f"data service mode must be one of {DATA_SERVICE_MODES}, got {mode!r}")
    return dataset.apply(
        tf.data.experimental.service.distribute(
            processing_mode=mode,
            service=address,
            job_name=job_name,
            compression=compression,
        )
    )


def input_fn(
    file_patterns: str | Sequence[str],
    feature_spec: Mapping[str, tf.io.FixedLenFeature | tf.io.VarLenFeature],
    label_key: str,
    batch_size: int,
    *,
    shuffle: bool = True,
    shuffle_buffer: int = 10_000,
    repeat: bool = True,
    cache: bool | str = False,
    deterministic: bool = True,
    seed: int | None = 42,
    augment: BatchFn | None = None,
    shuffle_block: int = 1,
    cycle_length: int | None = None,
    block_length: int = DEFAULT_BLOCK_LENGTH,
    ignore_errors: bool = False,
    threadpool_size: int | None = None,
    data_service_address: str | None = None,
    data_service_mode: str = "distributed_epoch",
    data_service_job_name: str | None = None,
    data_service_compression: str | None = "AUTO",
) -> tf.data.Dataset:
    """Returns a dataset of `(features, label)` batches.

    Args:
      file_patterns: glob(s) of GZIP TFRecord files of serialized tf.Examples.
      feature_spec: parsing spec for the records (e.g. the transformed spec).
      label_key: feature popped from the parsed batch and returned as label.
      batch_size: examples per batch; the last partial batch is kept.
      shuffle: shuffle file order and records (training); off for evaluation.
      shuffle_buffer: records in the shuffle buffer.
      repeat: repeat forever (for step-based training).
      cache: keep the data in memory after the first pass (a string: in files
        with that prefix); only when it fits. With `shuffle` the serialized
        records are cached (they are reshuffled and re-batched every epoch);
        without, the parsed batches.
      deterministic: keep a reproducible order; False lets parallel reads and
        parses overtake each other, which is faster when they differ in speed.
      seed: shuffle seed, for reproducible runs.
      augment: per-batch function applied inside the tf.data graph (training).
      shuffle_block: with `shuffle`, shuffle blocks of this many consecutive
        records of one shard instead of single records. 1 (default) shuffles
        records; 16-64 reads about 2x faster on 2 cores but a batch then holds
        runs of neighbouring records: use only when shards are not ordered.
      cycle_length: shards read at once (default: min(4, number of files)).
      block_length: consecutive records taken from one shard per turn when
        records are shuffled one by one.
      ignore_errors: skip unreadable records (logged) instead of failing. Off
        by default: a corrupt shard should stop training.
      threadpool_size: a private tf.data thread pool of this size (default:
        TF's shared pool, one thread per core).
      data_service_address: a tf.data service dispatcher ("host:port" or
        "grpc://host:port"); reading, parsing and `augment` then run on its
        workers, and only prefetching runs here.
      data_service_mode: "distributed_epoch" or "parallel_epochs", see `distribute`.
      data_service_job_name: share one job between trainers.
      data_service_compression: "AUTO" (snappy over the network) or None.
    """
    if data_service_address and data_service_mode not in DATA_SERVICE_MODES:
        raise ValueError(
            f"data service mode must be one of {DATA_SERVICE_MODES}, got {data_service_mode!r}"
        )
    if batch_size < 1 or shuffle_block < 1:
        raise ValueError("batch_size and shuffle_block must be >= 1")
    distributed = bool(data_service_address)
    # A worker's cache in distributed_epoch mode would hold only the files it
    # was handed in the first epoch: there, no cache (the files are re-read).
    if distributed and data_service_mode == "distributed_epoch":
        cache = False
    use_cache = cache is not False and cache is not None
    cache_file = cache if isinstance(cache, str) else ""
    # With the data service, repeating happens here, after distribution, so
    # each local epoch is one service epoch.
    repeat_here = repeat and not distributed
    read = {
        "shuffle_files": shuffle,
        "seed": seed,
        "cycle_length": cycle_length,
        "deterministic": deterministic,
        "ignore_errors": ignore_errors,
    }

    if shuffle and shuffle_block == 1:
        # Training: records shuffled one by one (the serialized records are
        # cached), repeated before batching so no batch is short mid-training.
        dataset = read_records(file_patterns, block_length=block_length, **read)
        if use_cache:
            dataset = dataset.cache(cache_file)
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        if repeat_here:
            dataset = dataset.repeat()
        dataset = dataset.batch(batch_size)
    elif shuffle:
        # Training, block shuffle: blocks of records shuffled, then re-cut into batches.
        dataset = read_blocks(file_patterns, shuffle_block, **read)
        if use_cache:
            dataset = dataset.cache(cache_file)
        dataset = dataset.shuffle(
            max(1, shuffle_buffer // shuffle_block), seed=seed, reshuffle_each_iteration=True
        )
        if repeat_here:
            dataset = dataset.repeat()
        dataset = dataset.rebatch(batch_size)
    else:
        # Evaluation: each reader batches its shard; rebatch evens out shard ends.
        dataset = read_blocks(file_patterns, batch_size, **read).rebatch(batch_size)

    spec = dict(feature_spec)

    def parse(serialized: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        parsed = tf.io.parse_example(serialized, spec)
        label = parsed.pop(label_key)
        return parsed, label

    dataset = dataset.map(parse, num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    if not shuffle:
        if use_cache:  # the same batches every epoch: cache them parsed
            dataset = dataset.cache(cache_file)
        if repeat_here:
            dataset = dataset.repeat()
    if augment is not None:
        dataset = dataset.map(augment, num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    dataset = dataset.with_options(pipeline_options(deterministic, threadpool_size))
    if distributed:
        dataset = distribute(
            dataset.prefetch(AUTOTUNE),
            data_service_address,
            mode=data_service_mode,
            job_name=data_service_job_name,
            compression=data_service_compression,
        )
        if repeat:
            dataset = dataset.repeat()
    return dataset.prefetch(AUTOTUNE)


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
