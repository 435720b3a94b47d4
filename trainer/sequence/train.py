"""TFX Trainer entry point (`run_fn`) of the sequence trainer.

Signatures of the SavedModel (raw SequenceExamples in, transform graph inside):
  serving_default     serialized raw tf.train.SequenceExamples without the label ->
                      binary:     logistic [None, 1] (P(classes[1])), class [None]
                      multiclass: probabilities [None, classes], class [None]
                      regression: predictions [None, 1]
  transform_features  serialized raw SequenceExamples -> transformed features (TFMA)

Training input is length-bucketed: sequences of similar length share a batch, and
each batch is cut to its longest sequence, so a batch of short sessions does not
compute over max_length steps of padding.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging
from tensorflow_metadata.proto.v0 import schema_pb2

from trainer.base import (
    SERVING_SIGNATURE,
    TRANSFORM_SIGNATURE,
    EpochTimer,
    serving_outputs,
    with_tuned_values,
)
from trainer.distribution import TrainingJob, train_and_export
from trainer.sequence.features import (
    LENGTH_XF,
    SEQUENCE_STRUCT,
    SequenceSpec,
    sequence_spec,
    transformed_name,
)
from trainer.sequence.model import build_model
from trainer.tuning import search_result

LABEL_SCALE_BATCHES = 20
PARSE_BATCH = 256


@dataclass(frozen=True)
class SequenceHyperparameters:
    """The dataset file's `hyperparameters:` for the sequence trainer."""

    batch_size: int = 64
    eval_batch_size: int = 256
    learning_rate: float = 0.003
    embedding_dim: int = 8
    dropout: float = 0.0
    seed: int = 42
    shuffle_buffer: int = 4096
    # A checkpoint every this many steps; a rerun after a crash resumes from the
    # last one (trainer/checkpoints.py). 0: no checkpoints.
    checkpoint_steps: int = 100

    @classmethod
    def from_custom_config(cls, custom_config: dict[str, Any] | None) -> SequenceHyperparameters:
        raw = dict((custom_config or {}).get("hyperparameters", {}))
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"unknown hyperparameters {sorted(unknown)}; the sequence trainer takes "
                f"{list(dataclasses.asdict(cls()))}"
            )
        hp = cls(**raw)
        if hp.checkpoint_steps < 0 or hp.batch_size < 1:
            raise ValueError(f"hyperparameters {raw}: batch_size >= 1, checkpoint_steps >= 0")
        return hp

    @classmethod
    def from_fn_args(cls, fn_args: Any) -> SequenceHyperparameters:
        return with_tuned_values(cls.from_custom_config(fn_args.custom_config), fn_args)


def bucket_boundaries(max_length: int) -> list[int]:
    """Length buckets 4, 8, 16, ... below max_length: padding within a batch stays under 2x."""
    edges, edge = [], 4
    while edge < max_length:
        edges.append(edge + 1)  # bucket_by_sequence_length's bounds are exclusive
        edge *= 2
    return edges


def trim_to_longest(features: dict[str, tf.Tensor], step_names: list[str]) -> dict:
    """Each per-step input cut to the batch's longest sequence."""
    longest = tf.cast(tf.reduce_max(features[LENGTH_XF]), tf.int32)
    return {k: (v[:, :longest] if k in step_names else v) for k, v in features.items()}


def dataset(
    patterns,
    feature_spec: dict[str, Any],
    spec: SequenceSpec,
    batch_size: int,
    *,
    training: bool,
    seed: int = 42,
    shuffle_buffer: int = 4096,
    record_shard: tuple[int, int] | None = None,
) -> tf.data.Dataset:
    """(features, label) batches of transformed examples, bucketed by sequence length."""
    listed = [patterns] if isinstance(patterns, str) else list(patterns)
    files = sorted(f for p in listed for f in tf.io.gfile.glob(p))
    if not files:
        raise ValueError(f"no transformed examples match {patterns}")
    records = tf.data.TFRecordDataset(files, compression_type="GZIP")
    if record_shard:
        records = records.shard(*record_shard)
    records = records.repeat()
    if training:
        records = records.shuffle(shuffle_buffer, seed=seed)
    parsed = (
        records.batch(PARSE_BATCH)
        .map(lambda s: tf.io.parse_example(s, feature_spec), num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
    )
    label = spec.label_xf
    pairs = parsed.map(lambda f: ({k: v for k, v in f.items() if k != label}, f[label]))
    edges = bucket_boundaries(spec.max_length)
    steps = [transformed_name(n) for n in spec.features]
    return (
        pairs.bucket_by_sequence_length(
            lambda x, _: tf.cast(x[LENGTH_XF], tf.int32),
            edges,
            [batch_size] * (len(edges) + 1),
        )
        .map(lambda x, y: (trim_to_longest(x, steps), y), num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )


_DTYPES = {schema_pb2.INT: tf.int64, schema_pb2.FLOAT: tf.float32, schema_pb2.BYTES: tf.string}


def raw_parse_specs(schema: schema_pb2.Schema, without: str = "") -> tuple[dict, dict]:
    """(context, sequence) parse specs of raw SequenceExamples, shaped as Transform read them:
    a feature the schema gives a shape is dense [batch, 1], else sparse; feature lists are
    ragged [batch, steps, values] under "##SEQUENCE##.<column>"."""
    context, sequence = {}, {}
    for feature in schema.feature:
        if feature.name == without:
            continue
        if feature.type == schema_pb2.STRUCT:
            for step in feature.struct_domain.feature:
                sequence[step.name] = tf.io.RaggedFeature(
                    _DTYPES[step.type], row_splits_dtype=tf.int64
                )
        elif feature.HasField("shape"):
            context[feature.name] = tf.io.FixedLenFeature(
                [d.size for d in feature.shape.dim], _DTYPES[feature.type]
            )
        else:
            context[feature.name] = tf.io.VarLenFeature(_DTYPES[feature.type])
    return context, sequence


def parse_raw(serialized: tf.Tensor, context_spec: dict, sequence_spec_: dict) -> dict:
    """Serialized SequenceExamples -> the raw tensors the transform graph takes."""
    context, steps, _ = tf.io.parse_sequence_example(
        serialized, context_features=context_spec, sequence_features=sequence_spec_
    )
    return {**context, **{f"{SEQUENCE_STRUCT}.{k}": v for k, v in steps.items()}}


def signatures(model: keras.Model, tf_transform_output: tft.TFTransformOutput, spec) -> dict:
    """serving_default and transform_features, both on serialized raw SequenceExamples."""
    schema = tf_transform_output.raw_metadata.schema
    model.tft_layer_serving = tf_transform_output.transform_features_layer()
    model.tft_layer_eval = tf_transform_output.transform_features_layer()
    serving_specs = raw_parse_specs(schema, without=spec.label)
    eval_specs = raw_parse_specs(schema)
    examples = tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")

    @tf.function(input_signature=[examples], autograph=False)
    def serve(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        transformed = model.tft_layer_serving(parse_raw(serialized, *serving_specs))
        transformed.pop(spec.label_xf, None)
        return serving_outputs(spec.task, spec.classes, model(transformed))

    @tf.function(input_signature=[examples], autograph=False)
    def transform(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        return model.tft_layer_eval(parse_raw(serialized, *eval_specs))

    return {SERVING_SIGNATURE: serve, TRANSFORM_SIGNATURE: transform}


def label_scale(data: tf.data.Dataset, batches: int = LABEL_SCALE_BATCHES) -> tuple[float, float]:
    labels = np.concatenate([np.reshape(y, [-1]) for _, y in data.take(batches)])
    return float(labels.mean()), float(labels.std() or 1.0)


def batches(feature_spec: dict[str, Any], spec: SequenceSpec, hp: SequenceHyperparameters):
    """`dataset` with the feature spec, sequence spec, seed and shuffle buffer bound: the
    (patterns, batch_size, training, record_shard=None) function the Trainer and each
    Tuner trial read through."""

    def data(patterns, batch_size: int, training: bool, record_shard=None) -> tf.data.Dataset:
        return dataset(
            patterns,
            feature_spec,
            spec,
            batch_size,
            training=training,
            seed=hp.seed,
            shuffle_buffer=hp.shuffle_buffer,
            record_shard=record_shard,
        )

    return data


def compiled_model(
    spec: SequenceSpec,
    tf_transform_output: tft.TFTransformOutput,
    hp: SequenceHyperparameters,
    train_batches: Callable[[], tf.data.Dataset],
) -> keras.Model:
    """The compiled model for `hp`; a regression's label mean and spread are read from
    the first batches of `train_batches()` (the model predicts in those units)."""
    mean, std = 0.0, 1.0
    if spec.task == "regression":
        mean, std = label_scale(train_batches())
    vocab_sizes = {
        name: tf_transform_output.vocabulary_size_by_name(name)
        for name, treatment in {**spec.features, **spec.context}.items()
        if treatment == "vocabulary"
    }
    return build_model(
        spec,
        vocab_sizes,
        learning_rate=hp.learning_rate,
        embedding_dim=hp.embedding_dim,
        dropout=hp.dropout,
        label_mean=mean,
        label_std=std,
    )


def tuner_fn(fn_args: Any):
    """The Tuner step's search (trainer/tuning.py) over the sequence model's knobs
    (pipeline/config.py SEQUENCE_TUNABLE); each trial reads the input as run_fn does."""
    spec = sequence_spec(fn_args.custom_config)
    base = SequenceHyperparameters.from_custom_config(fn_args.custom_config)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)
    data = batches(tf_transform_output.transformed_feature_spec(), spec, base)

    def build(hp: SequenceHyperparameters) -> keras.Model:
        train = functools.partial(data, fn_args.train_files, hp.batch_size, False)
        return compiled_model(spec, tf_transform_output, hp, train)

    return search_result(fn_args, build, data, base)


def run_fn(fn_args: Any) -> None:
    """Trains the sequence model on transformed examples and exports it for serving."""
    spec = sequence_spec(fn_args.custom_config)
    hp = SequenceHyperparameters.from_fn_args(fn_args)
    logging.info("sequence: %s; hyperparameters: %s", spec, json.dumps(dataclasses.asdict(hp)))
    keras.utils.set_random_seed(hp.seed)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    data = batches(tf_transform_output.transformed_feature_spec(), spec, hp)

    def build() -> keras.Model:
        train = functools.partial(data, fn_args.train_files, hp.batch_size, False, None)
        return compiled_model(spec, tf_transform_output, hp, train)

    train_and_export(
        fn_args,
        TrainingJob(
            build_model=build,
            dataset=data,
            signatures=lambda model: signatures(model, tf_transform_output, spec),
            batch_size=hp.batch_size,
            eval_batch_size=hp.eval_batch_size,
            callbacks=(EpochTimer(),),
            checkpoint_steps=hp.checkpoint_steps,
        ),
    )
