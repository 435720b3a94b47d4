"""TFX Trainer entry point (`run_fn`) of the generic tabular trainer.

Signatures of the SavedModel (raw tf.Examples in, transform graph inside):
  serving_default     serialized raw tf.Examples without the label ->
                      binary:     logistic [None, 1] (P(classes[1])), class [None] (string)
                      multiclass: probabilities [None, classes], class [None] (string)
                      regression: predictions [None, 1]
                      (TFMA finds its prediction under these standard keys.)
  transform_features  serialized raw tf.Examples -> transformed features (TFMA)
Training reuses the project's input pipeline, hyperparameters, input-wait
monitor and transform signature (trainer/input.py, trainer/base.py).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging

from trainer.base import EpochTimer, Hyperparameters, serving_outputs, serving_signatures
from trainer.distribution import TrainingJob, train_and_export
from trainer.input import input_fn
from trainer.tabular.features import TabularSpec, missing_name, tabular_spec
from trainer.tabular.model import build_model
from trainer.tuning import search_result

# Batches read to estimate the regression label's mean and spread.
LABEL_SCALE_BATCHES = 20


def signatures(model, tf_transform_output: tft.TFTransformOutput, spec: TabularSpec) -> dict:
    """The SavedModel's serving and transform signatures (trainer/base.py), serving
    the outputs above. The MLP's and the boosted trees' (gbt.py) alike."""
    return serving_signatures(
        model,
        tf_transform_output,
        spec.label,
        spec.label_xf,
        lambda output: serving_outputs(spec.task, spec.classes, output),
    )


def with_class_weights(data: tf.data.Dataset, spec: TabularSpec) -> tf.data.Dataset:
    """(features, label, weight) batches: each example's loss weighted by its class's
    weight (the dataset file's `class_weights`); the data unchanged without them."""
    if not spec.class_weights:
        return data
    weights = tf.constant(spec.class_weights, tf.float32)
    return data.map(
        lambda x, y: (x, y, tf.gather(weights, tf.cast(y, tf.int64))),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def label_scale(
    dataset: tf.data.Dataset, batches: int = LABEL_SCALE_BATCHES
) -> tuple[float, float]:
    """Mean and standard deviation of the labels of the first `batches` batches."""
    labels = np.concatenate([np.reshape(y, [-1]) for _, y in dataset.take(batches)])
    return float(labels.mean()), float(labels.std() or 1.0)


def _build(spec, tf_transform_output: tft.TFTransformOutput, fn_args: Any, hp) -> keras.Model:
    """The compiled model for `hp` (regression: labels scaled by the train split's)."""
    feature_spec = tf_transform_output.transformed_feature_spec()
    mean, std = (0.0, 1.0)
    if spec.task == "regression":
        # A plain read (no cache, no shuffle): a partial pass must not fill the training cache.
        mean, std = label_scale(
            input_fn(fn_args.train_files, feature_spec, spec.label_xf, hp.batch_size, shuffle=False)
        )
    return build_model(
        spec,
        vocab_sizes={
            f.name: tf_transform_output.vocabulary_size_by_name(f.name) + f.oov_buckets
            for f in spec.features
            if f.has_vocabulary
        },
        missing_indicators=[f.name for f in spec.features if missing_name(f.name) in feature_spec],
        label_mean=mean,
        label_std=std,
        hidden_units=hp.hidden_units,
        learning_rate=hp.learning_rate,
    )


def run_fn(fn_args: Any) -> None:
    """Trains the model on transformed examples and exports it for serving.

    With a multi-worker `TF_CONFIG`, every worker runs this (trainer/distribution.py).
    """
    spec = tabular_spec(fn_args.custom_config)
    hp = Hyperparameters.from_fn_args(fn_args)
    logging.info("tabular: %s; hyperparameters: %s", spec, json.dumps(asdict(hp)))
    keras.utils.set_random_seed(hp.seed)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    feature_spec = tf_transform_output.transformed_feature_spec()

    def dataset(patterns, batch_size: int, training: bool, record_shard) -> tf.data.Dataset:
        options = hp.input_options(training, record_shard=record_shard)
        data = input_fn(patterns, feature_spec, spec.label_xf, batch_size, options)
        return with_class_weights(data, spec) if training else data

    def build() -> keras.Model:
        # Here, not before: no TF op may run before the training strategy starts.
        return _build(spec, tf_transform_output, fn_args, hp)

    train_and_export(
        fn_args,
        TrainingJob(
            build_model=build,
            dataset=dataset,
            signatures=lambda model: signatures(model, tf_transform_output, spec),
            batch_size=hp.batch_size,
            eval_batch_size=hp.eval_batch_size,
            callbacks=(EpochTimer(),),
        ),
    )


def tuner_fn(fn_args: Any):
    """The Tuner step's search (trainer/tuning.py) over this model and its input."""
    spec = tabular_spec(fn_args.custom_config)
    base = Hyperparameters.from_custom_config(fn_args.custom_config)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)
    feature_spec = tf_transform_output.transformed_feature_spec()

    def dataset(patterns, batch_size: int, training: bool) -> tf.data.Dataset:
        data = input_fn(
            patterns, feature_spec, spec.label_xf, batch_size, base.input_options(training)
        )
        return with_class_weights(data, spec) if training else data

    return search_result(
        fn_args, lambda hp: _build(spec, tf_transform_output, fn_args, hp), dataset
    )
