"""TFX Trainer entry point (`run_fn`) and the exported serving signatures."""

from __future__ import annotations

import importlib
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging

from trainer import features as f
from trainer.distribution import TrainingJob, train_and_export
from trainer.input import DATA_SERVICE_MODES, BatchFn, InputOptions, input_fn
from trainer.model import build_keras_model

SERVING_SIGNATURE = "serving_default"
TRANSFORM_SIGNATURE = "transform_features"


@dataclass(frozen=True)
class Hyperparameters:
    """Training knobs; passed from the pipeline config via `custom_config`."""

    # The global batch: one optimizer step's examples, split between the
    # workers in multi-worker training (trainer/distribution.py).
    batch_size: int = 256
    eval_batch_size: int = 1024
    learning_rate: float = 0.003
    hidden_units: tuple[int, ...] = (64, 32)
    cache: bool = True
    deterministic: bool = True
    seed: int = 42
    # Input pipeline (trainer/input.py, trainer/INPUT_PIPELINE.md).
    shuffle_buffer: int = 10_000
    shuffle_block: int = 1  # > 1: shuffle blocks of records (faster, coarser)
    threadpool_size: int | None = None  # None: TF's shared pool
    # "pkg.module.fn": a per-batch `(features, label) -> (features, label)`
    # applied inside the tf.data graph to the training data only.
    augment: str | None = None
    # tf.data service: with a dispatcher address ("host:port"), reading and
    # parsing run on its workers (`python -m trainer.data_service`).
    data_service_address: str | None = None
    data_service_mode: str = "distributed_epoch"  # or "parallel_epochs"
    data_service_job_name: str | None = None

    def __post_init__(self) -> None:
        if self.data_service_mode not in DATA_SERVICE_MODES:
            raise ValueError(
                f"data_service_mode must be one of {DATA_SERVICE_MODES}, "
                f"got {self.data_service_mode!r}"
            )

    @classmethod
    def from_custom_config(cls, custom_config: dict[str, Any] | None) -> Hyperparameters:
        raw = dict((custom_config or {}).get("hyperparameters", {}))
        unknown = set(raw) - {f.name for f in cls.__dataclass_fields__.values()}
        if unknown:
            raise ValueError(
                f"unknown hyperparameters {sorted(unknown)}; known: {list(asdict(cls()))}"
            )
        if "hidden_units" in raw:
            raw["hidden_units"] = tuple(raw["hidden_units"])
        return cls(**raw)

    def input_options(
        self,
        training: bool,
        augment: BatchFn | None = None,
        record_shard: tuple[int, int] | None = None,
    ) -> InputOptions:
        """How the Trainer reads: shuffled (and augmented) for training, as is for evaluation."""
        return InputOptions(
            record_shard=record_shard,
            shuffle=training,
            shuffle_buffer=self.shuffle_buffer,
            shuffle_block=self.shuffle_block,
            cache=self.cache,
            deterministic=self.deterministic,
            seed=self.seed,
            # Augmentation is for training only: evaluation sees the data as is.
            augment=augment if training else None,
            threadpool_size=self.threadpool_size,
            # Evaluation stays local: it is small, and a service job per
            # validation run would cost more than it saves.
            data_service_address=self.data_service_address if training else None,
            data_service_mode=self.data_service_mode,
            data_service_job_name=self.data_service_job_name,
        )


def _examples_signature(model: keras.Model, tf_transform_output: tft.TFTransformOutput):
    """serving_default: serialized raw tf.Examples in, probability out.

    The transform graph runs inside the SavedModel, so serving applies exactly
    the preprocessing that training saw.
    """
    model.tft_layer_serving = tf_transform_output.transform_features_layer()
    raw_spec = tf_transform_output.raw_feature_spec()
    raw_spec.pop(f.LABEL_KEY, None)

    # autograph=False: no Python control flow here, and conversion costs seconds.
    @tf.function(
        input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")],
        autograph=False,
    )
    def serve(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        raw = tf.io.parse_example(serialized, raw_spec)
        transformed = model.tft_layer_serving(raw)
        transformed.pop(f.TRANSFORMED_LABEL_KEY, None)
        return {"probability": model(transformed)}

    return serve


def _transform_signature(model: keras.Model, tf_transform_output: tft.TFTransformOutput):
    """transform_features: raw examples (with label) to transformed features, for TFMA."""
    model.tft_layer_eval = tf_transform_output.transform_features_layer()
    raw_spec = tf_transform_output.raw_feature_spec()

    # autograph=False: no Python control flow here, and conversion costs seconds.
    @tf.function(
        input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")],
        autograph=False,
    )
    def transform(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        return model.tft_layer_eval(tf.io.parse_example(serialized, raw_spec))

    return transform


class _EpochTimer(keras.callbacks.Callback):
    """Logs wall time per epoch so slow training shows up in the run log."""

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logging.info("epoch %d took %.2fs: %s", epoch, time.perf_counter() - self._start, logs)


def _import_augment(dotted_path: str | None) -> BatchFn | None:
    if not dotted_path:
        return None
    module, _, name = dotted_path.rpartition(".")
    if not module:
        raise ValueError(f"augment must be 'package.module.function', got {dotted_path!r}")
    return getattr(importlib.import_module(module), name)


def signatures(model: keras.Model, tf_transform_output: tft.TFTransformOutput) -> dict:
    """The SavedModel's serving and transform signatures."""
    return {
        SERVING_SIGNATURE: _examples_signature(model, tf_transform_output),
        TRANSFORM_SIGNATURE: _transform_signature(model, tf_transform_output),
    }


def run_fn(fn_args: Any) -> None:
    """Trains the model on transformed examples and exports it for serving.

    `fn_args` is TFX's FnArgs: train/eval file patterns, the transform output,
    step counts, `custom_config` and the serving model directory. With a
    multi-worker `TF_CONFIG`, every worker runs this (trainer/distribution.py).
    """
    hp = Hyperparameters.from_custom_config(fn_args.custom_config)
    logging.info("hyperparameters: %s", json.dumps(asdict(hp)))
    # Same data, code and hyperparameters give the same model (up to thread
    # scheduling in TF's kernels): weights init and shuffling are seeded.
    keras.utils.set_random_seed(hp.seed)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    feature_spec = tf_transform_output.transformed_feature_spec()
    augment = _import_augment(hp.augment)

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
            callbacks=(_EpochTimer(),),
        ),
    )
