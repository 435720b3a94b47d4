"""tf.data input for training and evaluation over transformed TFRecord shards.

Shards are read in parallel, records are batched *before* parsing so that
`tf.io.parse_example` decodes a whole batch in one op, and every stage is
AUTOTUNEd and prefetched so the model never waits on a single file. With a
tf.data service dispatcher address the same pipeline runs on remote workers
(`distribute`). `trainer.input_wait.InputWaitMonitor` measures, per epoch,
how long training waited for input and how long it computed. Measurements:
docs/trainer-input.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE

BatchFn = Callable[[dict[str, tf.Tensor], tf.Tensor], tuple[dict[str, tf.Tensor], tf.Tensor]]

DATA_SERVICE_MODES = ("distributed_epoch", "parallel_epochs")

# Shards read at once. Two per core is plenty for GZIP: more only adds
# per-record hand-offs between threads (see docs/trainer-input.md).
DEFAULT_CYCLE_LENGTH = 4
# Consecutive records of one shard a training reader hands over as one block. A
# per-record hand-off costs more than the record; 64 amortizes it (the window
# shuffle then scatters each block's records).
DEFAULT_BLOCK_LENGTH = 64
READ_BUFFER_BYTES = 1 << 20


def _gzip_dataset(path: tf.Tensor) -> tf.data.Dataset:
    return tf.data.TFRecordDataset(path, compression_type="GZIP", buffer_size=READ_BUFFER_BYTES)


def _read_file(
    path: tf.Tensor, ignore_errors: bool, record_shard: tuple[int, int] | None
) -> tf.data.Dataset:
    records = _gzip_dataset(path)
    if ignore_errors:
        records = records.ignore_errors(log_warning=True)
    # Per file, so the shard does not depend on how the reads interleave.
    return records.shard(*record_shard) if record_shard else records


def _list_files(patterns: str | Sequence[str], shuffle: bool, seed: int | None):
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    files = tf.data.Dataset.list_files(patterns, shuffle=shuffle, seed=seed)
    # list_files' cardinality is known: never open more readers than files.
    num_files = int(files.cardinality())
    return files, max(1, min(DEFAULT_CYCLE_LENGTH, num_files)) if num_files > 0 else 1


def read_blocks(
    file_patterns: str | Sequence[str],
    block_size: int,
    *,
    shuffle_files: bool = False,
    seed: int | None = None,
    cycle_length: int | None = None,
    deterministic: bool = True,
    ignore_errors: bool = False,
    record_shard: tuple[int, int] | None = None,
) -> tf.data.Dataset:
    """Serialized records in blocks of up to `block_size` consecutive records of one shard.

    Each reader thread batches its own shard, so threads hand over whole
    blocks instead of single records: per-record hand-offs between threads
    cost more CPU than decompressing the record (docs/trainer-input.md). Blocks at
    the end of a shard may be short; `rebatch` evens them out.
    """
    files, default_cycle = _list_files(file_patterns, shuffle_files, seed)

    # tf.data would run AutoGraph over every function it is given (and what they
    # call): none here has tensor-dependent Python control flow, and converting
    # them cost ~0.6 CPU-s of every Trainer run.
    @tf.autograph.experimental.do_not_convert
    def read(path: tf.Tensor) -> tf.data.Dataset:
        return _read_file(path, ignore_errors, record_shard).batch(block_size)

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


@dataclass(frozen=True)
class InputOptions:
    """How `input_fn` reads, shuffles, caches and distributes.

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
    record_shard: (count, index): of every file keep records index, index +
      count, ... (multi-worker training with fewer files than workers,
      trainer/distribution.py).
    """

    shuffle: bool = True
    shuffle_buffer: int = 10_000
    repeat: bool = True
    cache: bool | str = False
    deterministic: bool = True
    seed: int | None = 42
    augment: BatchFn | None = None
    shuffle_block: int = 1
    cycle_length: int | None = None
    block_length: int = DEFAULT_BLOCK_LENGTH
    ignore_errors: bool = False
    threadpool_size: int | None = None
    data_service_address: str | None = None
    data_service_mode: str = "distributed_epoch"
    data_service_job_name: str | None = None
    data_service_compression: str | None = "AUTO"
    record_shard: tuple[int, int] | None = None

    @property
    def distributed(self) -> bool:
        return bool(self.data_service_address)

    @property
    def cache_to(self) -> str | None:
        """The cache's file prefix ("" in memory), or None: no cache."""
        # A worker's cache in distributed_epoch mode would hold only the files it
        # was handed in the first epoch: there, no cache (the files are re-read).
        if self.distributed and self.data_service_mode == "distributed_epoch":
            return None
        if self.cache is False or self.cache is None:
            return None
        return self.cache if isinstance(self.cache, str) else ""

    @property
    def repeat_here(self) -> bool:
        # With the data service, repeating happens after distribution, so each
        # local epoch is one service epoch.
        return self.repeat and not self.distributed


def input_fn(
    file_patterns: str | Sequence[str],
    feature_spec: Mapping[str, tf.io.FixedLenFeature | tf.io.VarLenFeature],
    label_key: str,
    batch_size: int,
    options: InputOptions | None = None,
    **changes: Any,
) -> tf.data.Dataset:
    """Returns a dataset of `(features, label)` batches.

    Args:
      file_patterns: glob(s) of GZIP TFRecord files of serialized tf.Examples.
      feature_spec: parsing spec for the records (e.g. the transformed spec).
      label_key: feature popped from the parsed batch and returned as label.
      batch_size: examples per batch; the last partial batch is kept.
      options: how to read (`InputOptions`); keyword arguments change single
        fields of it (`input_fn(..., shuffle=False)`).
    """
    o = dataclasses.replace(options or InputOptions(), **changes)
    if o.distributed and o.data_service_mode not in DATA_SERVICE_MODES:
        raise ValueError(
            f"data service mode must be one of {DATA_SERVICE_MODES}, got {o.data_service_mode!r}"
        )
    if batch_size < 1 or o.shuffle_block < 1:
        raise ValueError("batch_size and shuffle_block must be >= 1")
    if o.record_shard and not 0 <= o.record_shard[1] < o.record_shard[0]:
        raise ValueError(
            f"record_shard must be (count, index) with 0 <= index < count, got {o.record_shard}"
        )
    dataset = _parsed(serialized_batches(file_patterns, batch_size, o), feature_spec, label_key, o)
    if o.augment is not None:
        dataset = dataset.map(o.augment, num_parallel_calls=AUTOTUNE, deterministic=o.deterministic)
    dataset = dataset.with_options(pipeline_options(o.deterministic, o.threadpool_size))
    if o.data_service_address:  # o.distributed
        dataset = distribute(
            dataset.prefetch(AUTOTUNE),
            o.data_service_address,
            mode=o.data_service_mode,
            job_name=o.data_service_job_name,
            compression=o.data_service_compression,
        )
        if o.repeat:
            dataset = dataset.repeat()
    return dataset.prefetch(AUTOTUNE)


def serialized_batches(file_patterns: str | Sequence[str], batch_size: int, o: InputOptions):
    """Serialized records in batches of `batch_size`, shuffled and repeated as `o` says.

    `input_fn` without its parse step; benchmarks/input_pipeline.py times it to
    split the training configuration's cost between shuffling and parsing.
    """
    read: dict[str, Any] = {
        "shuffle_files": o.shuffle,
        "seed": o.seed,
        "cycle_length": o.cycle_length,
        "deterministic": o.deterministic,
        "ignore_errors": o.ignore_errors,
        "record_shard": o.record_shard,
    }
    if o.shuffle and o.shuffle_block == 1:
        # Training: records shuffled one by one, with no per-record tf.data op.
        return _window_shuffled(file_patterns, batch_size, o, read)
    if o.shuffle:
        # Training, block shuffle: blocks of records shuffled, then re-cut into batches.
        dataset = read_blocks(file_patterns, o.shuffle_block, **read)
        if o.cache_to is not None:
            dataset = dataset.cache(o.cache_to)
        dataset = dataset.shuffle(
            max(1, o.shuffle_buffer // o.shuffle_block), seed=o.seed, reshuffle_each_iteration=True
        )
        if o.repeat_here:
            dataset = dataset.repeat()
        return dataset.rebatch(batch_size)
    # Evaluation: each reader batches its shard; rebatch evens out shard ends.
    return read_blocks(file_patterns, batch_size, **read).rebatch(batch_size)


def _window_shuffled(
    file_patterns: str | Sequence[str], batch_size: int, o: InputOptions, read: dict[str, Any]
) -> tf.data.Dataset:
    """Training batches, each a uniform sample of a window of `shuffle_buffer` records.

    A per-record `Dataset.shuffle` costs a tf.data hand-off and a buffer swap
    per record (~5 us on this machine, more than parsing it: docs/trainer-input.md).
    Here every tf.data step handles many records: blocks of `block_length`
    consecutive records of one shard (cached serialized) are shuffled as
    blocks over a buffer of `shuffle_buffer` records, re-cut into windows of
    `shuffle_buffer` records, and each window is permuted record by record as
    one tensor before it is cut into batches. A batch is thus a uniform random
    draw from ~`shuffle_buffer` records of many shards, as with a record
    shuffle buffer of that size. Permutations are seeded from `o.seed`
    (reproducible) and differ from window to window and epoch to epoch.
    """
    block = max(1, min(o.block_length, o.shuffle_buffer))
    blocks = read_blocks(file_patterns, block, **read)
    if o.cache_to is not None:
        blocks = blocks.cache(o.cache_to)
    blocks = blocks.shuffle(
        max(1, o.shuffle_buffer // block), seed=o.seed, reshuffle_each_iteration=True
    )
    windows = blocks.rebatch(max(o.shuffle_buffer, batch_size))
    # Fresh permutation seeds every epoch, the same sequence for the same seed.
    seeds = tf.data.Dataset.random(seed=o.seed, rerandomize_each_iteration=True).batch(2)

    @tf.autograph.experimental.do_not_convert  # no tensor-dependent control flow (read_blocks)
    def permute(window: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        return tf.random.experimental.stateless_shuffle(window, seed=seed)

    windows = tf.data.Dataset.zip((windows, seeds)).map(
        permute, num_parallel_calls=AUTOTUNE, deterministic=o.deterministic
    )
    # Windows stay inside an epoch (every record once per epoch, as a record
    # shuffle before `repeat`); repeating before the cut keeps batches full.
    if o.repeat_here:
        windows = windows.repeat()
    return windows.rebatch(batch_size)


def _parsed(dataset: tf.data.Dataset, feature_spec, label_key: str, o: InputOptions):
    """Batches parsed into `(features, label)`; evaluation batches cached and repeated here."""
    spec = dict(feature_spec)

    @tf.autograph.experimental.do_not_convert  # no tensor-dependent control flow (read_blocks)
    def parse(serialized: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        parsed = tf.io.parse_example(serialized, spec)
        label = parsed.pop(label_key)
        return parsed, label

    dataset = dataset.map(parse, num_parallel_calls=AUTOTUNE, deterministic=o.deterministic)
    if not o.shuffle:
        if o.cache_to is not None:  # the same batches every epoch: cache them parsed
            dataset = dataset.cache(o.cache_to)
        if o.repeat_here:
            dataset = dataset.repeat()
    return dataset
