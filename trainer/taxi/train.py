"""The taxi trainer's entry point (`run_fn`) and its serving signature (see trainer/base.py)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging

from trainer.base import EpochTimer, Hyperparameters, import_augment, serving_signatures
from trainer.distribution import TrainingJob, train_and_export
from trainer.input import input_fn
from trainer.taxi import features as f
from trainer.taxi.model import build_keras_model
from trainer.tuning import search_result


def signatures(model: keras.Model, tf_transform_output: tft.TFTransformOutput) -> dict:
    """The SavedModel's serving and transform signatures (trainer/base.py): the
    probability of a big tip out."""
    return serving_signatures(
        model,
        tf_transform_output,
        f.LABEL_KEY,
        f.TRANSFORMED_LABEL_KEY,
        lambda output: {"probability": output},
    )


def run_fn(fn_args: Any) -> None:
    """Trains the model on transformed examples and exports it for serving.

    `fn_args` is TFX's FnArgs: train/eval file patterns, the transform output,
    step counts, `custom_config` and the serving model directory. With a
    multi-worker `TF_CONFIG`, every worker runs this (trainer/distribution.py).
    """
    hp = Hyperparameters.from_fn_args(fn_args)
    logging.info("hyperparameters: %s", json.dumps(asdict(hp)))
    # Same data, code and hyperparameters give the same model (up to thread
    # scheduling in TF's kernels): weights init and shuffling are seeded.
    keras.utils.set_random_seed(hp.seed)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    feature_spec = tf_transform_output.transformed_feature_spec()
    augment = import_augment(hp.augment)

    def dataset(patterns, batch_size: int, training: bool, record_shard) -> tf.data.Dataset:
        options = hp.input_options(training, augment, record_shard)
        return input_fn(patterns, feature_spec, f.TRANSFORMED_LABEL_KEY, batch_size, options)

    vocab_sizes = {
        key: tf_transform_output.vocabulary_size_by_name(key) + f.OOV_SIZE
        for key in f.VOCAB_FEATURE_KEYS
    }
    train_and_export(
        fn_args,
        TrainingJob(
            build_model=lambda: build_keras_model(hp.hidden_units, hp.learning_rate, vocab_sizes),
            dataset=dataset,
            signatures=lambda model: signatures(model, tf_transform_output),
            batch_size=hp.batch_size,
            eval_batch_size=hp.eval_batch_size,
            callbacks=(EpochTimer(),),
        ),
    )


def tuner_fn(fn_args: Any):
    """The Tuner step's search (trainer/tuning.py) over this model and its input."""
    base = Hyperparameters.from_custom_config(fn_args.custom_config)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)
    feature_spec = tf_transform_output.transformed_feature_spec()
    vocab_sizes = {
        key: tf_transform_output.vocabulary_size_by_name(key) + f.OOV_SIZE
        for key in f.VOCAB_FEATURE_KEYS
    }

    def dataset(patterns, batch_size: int, training: bool) -> tf.data.Dataset:
        options = base.input_options(training, import_augment(base.augment))
        return input_fn(patterns, feature_spec, f.TRANSFORMED_LABEL_KEY, batch_size, options)

    return search_result(
        fn_args,
        lambda hp: build_keras_model(hp.hidden_units, hp.learning_rate, vocab_sizes),
        dataset,
    )
