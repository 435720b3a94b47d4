"""tf.data input for training and evaluation over transformed TFRecord shards.

Shards are read in parallel, records are batched *before* parsing so that
`tf.io.parse_example` decodes a whole batch in one op, and every stage is
AUTOTUNEd and prefetched so the model never waits on a single file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE

BatchFn = Callable[[dict[str, tf.Tensor], tf.Tensor], tuple[dict[str, tf.Tensor], tf.Tensor]]


def _gzip_dataset(path: tf.Tensor) -> tf.data.Dataset:
    return tf.data.TFRecordDataset(path, compression_type="GZIP", buffer_size=1 << 20)


def input_fn(
    file_patterns: str | Sequence[str],
    feature_spec: Mapping[str, tf.io.FixedLenFeature | tf.io.VarLenFeature],
    label_key: str,
    batch_size: int,
    *,
    shuffle: bool = True,
    shuffle_buffer: int = 10_000,
    repeat: bool = True,
    cache: bool = False,
    deterministic: bool = True,
    seed: int | None = 42,
    augment: BatchFn | None = None,
) -> tf.data.Dataset:
    """Returns a dataset of `(features, label)` batches.

    Args:
      file_patterns: glob(s) of GZIP TFRecord files of serialized tf.Examples.
      feature_spec: parsing spec for the records (e.g. the transformed spec).
      label_key: feature popped from the parsed batch and returned as label.
      batch_size: examples per batch; the last partial batch is kept.
      shuffle: shuffle file order and records (training); off for evaluation.
      repeat: repeat forever (for step-based training).
      cache: cache the parsed batches in memory; only when the data fits.
      deterministic: keep a reproducible order; False lets parallel reads
        overtake each other, which is faster when shards differ in speed.
      seed: shuffle seed, for reproducible runs.
      augment: per-batch function applied inside the tf.data graph (training).
    """
    patterns = [file_patterns] if isinstance(file_patterns, str) else list(file_patterns)
    files = tf.data.Dataset.list_files(patterns, shuffle=shuffle, seed=seed)
    options = tf.data.Options()
    options.deterministic = deterministic
    dataset = files.interleave(
        _gzip_dataset,
        cycle_length=AUTOTUNE,
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    ).with_options(options)
    if cache:
        dataset = dataset.cache()
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()

    spec = dict(feature_spec)

    def parse(serialized: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        parsed = tf.io.parse_example(serialized, spec)
        label = parsed.pop(label_key)
        return parsed, label

    dataset = dataset.batch(batch_size).map(parse, num_parallel_calls=AUTOTUNE)
    if augment is not None:
        dataset = dataset.map(augment, num_parallel_calls=AUTOTUNE)
    return dataset.prefetch(AUTOTUNE)
