"""What every trainer shares: hyperparameters, input options, signatures and export, the epoch timer.

The trainers (`trainer/taxi/`, `trainer/tabular/`, `trainer/image/`) each import
from here and from the shared infrastructure (trainer/input.py,
trainer/distribution.py, ...), never from one another (an import-linter
contract in pyproject.toml says so).

The plug-in contract: a dataset's own model code
-------------------------------------------------
A dataset file (`schema/<NAME>/dataset.yaml`) names its trainer code by dotted
path, and that is the one way model code plugs into the pipeline:

    preprocessing_fn: trainer.taxi.preprocessing.preprocessing_fn
    run_fn: trainer.taxi.train.run_fn

Without them, a tabular dataset gets the generic tabular trainer
(`trainer.tabular`), driven by its `features:` treatments. Each function is
fingerprinted with the project modules it imports (pipeline/fingerprint.py):
editing preprocessing code re-runs Transform and what follows it, editing
only training code re-runs the Trainer and what follows it.

`preprocessing_fn(inputs)` (or `preprocessing_fn(inputs, custom_config)`) is
tf.Transform's: a dict of raw feature tensors in, a dict of transformed
tensors out; one of them is the transformed label (`transformed_label:` in the
dataset file, `<label>_xf` by default).

`run_fn(fn_args)` receives TFX's `FnArgs`: `train_files` and `eval_files`
(GZIP TFRecord patterns of transformed examples), `transform_output` (the
Transform graph's directory, for `tft.TFTransformOutput`), `train_steps`,
`eval_steps`, `serving_model_dir`, `model_run_dir` and `custom_config`
(`hyperparameters` from the dataset file; `tabular` or `image` options for
those kinds). It must export a SavedModel to `fn_args.serving_model_dir` with
  - `serving_default` (SERVING_SIGNATURE): what `tfxp predict` and serving
    call (serialized raw tf.Examples without the label, or image bytes), and
    what the Evaluator feeds unless the dataset names another `eval_signature`;
  - `transform_features` (TRANSFORM_SIGNATURE): serialized raw tf.Examples ->
    transformed features, from which TFMA reads the transformed label.
`trainer.distribution.train_and_export` does the training loop (one worker or
many) and the export: a run_fn builds a `TrainingJob` (model builder, dataset
function, signatures, batch sizes, callbacks) and hands it over.
`serving_signatures` makes both signatures for a model on transformed
features, given its label and how its output is served.

Only TensorFlow and tf.Transform are imported here (never `pipeline`).
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging

from trainer.curves import TENSORBOARD_DIR, TrainingCurves, training_curves
from trainer.input import DATA_SERVICE_MODES, BatchFn, InputOptions

# The TensorBoard logs every trainer writes (trainer/curves.py, through
# trainer.distribution.train_and_export): named here with the rest of the shared base.
__all__ = ["TENSORBOARD_DIR", "TrainingCurves", "training_curves"]

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
    # Input pipeline (trainer/input.py, docs/trainer-input.md).
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

    @classmethod
    def from_fn_args(cls, fn_args: Any) -> Hyperparameters:
        """The dataset file's values, overridden by the Tuner's best trial when there is one."""
        return with_tuned_values(cls.from_custom_config(fn_args.custom_config), fn_args)

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


def units_choice(units: Any) -> str:
    """Layer sizes as one KerasTuner choice value ("64,32"): KerasTuner chooses among scalars."""
    return ",".join(str(int(u)) for u in units)


# Hyperparameters that are lists of layer sizes, searched as units_choice strings.
UNITS_HYPERPARAMETERS = ("hidden_units", "filters")


def tuned_values(hyperparameters: dict[str, Any] | None) -> dict[str, Any]:
    """A KerasTuner HyperParameters config (the Tuner's best trial) as Hyperparameters fields."""
    values = dict((hyperparameters or {}).get("values", {}))
    for name in UNITS_HYPERPARAMETERS:
        if name in values:
            values[name] = tuple(int(u) for u in str(values[name]).split(","))
    return values


def with_tuned_values(hp: Any, fn_args: Any) -> Any:
    """`hp` (a trainer's hyperparameters dataclass) with the Tuner's best trial put in.

    With a Tuner before it, TFX's Trainer hands over the best trial's
    KerasTuner config as `fn_args.hyperparameters`; a tuned `train_steps`
    replaces `fn_args.train_steps` too.
    """
    tuned = tuned_values(getattr(fn_args, "hyperparameters", None))
    steps = tuned.pop("train_steps", None)
    if steps is not None:
        fn_args.train_steps = int(steps)
    if tuned:
        logging.info("tuned hyperparameters: %s", tuned)
    return dataclasses.replace(hp, **tuned)


def examples_signature(
    model: keras.Model,
    tf_transform_output: tft.TFTransformOutput,
    label: str,
    label_xf: str,
    outputs: Callable[[tf.Tensor], dict[str, tf.Tensor]],
):
    """serving_default: serialized raw tf.Examples in (without the label), `outputs` of
    the model's output out.

    The transform graph runs inside the SavedModel, so serving applies exactly
    the preprocessing that training saw.
    """
    model.tft_layer_serving = tf_transform_output.transform_features_layer()
    raw_spec = tf_transform_output.raw_feature_spec()
    raw_spec.pop(label, None)

    # autograph=False: no Python control flow here, and conversion costs seconds.
    @tf.function(
        input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")],
        autograph=False,
    )
    def serve(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        transformed = model.tft_layer_serving(tf.io.parse_example(serialized, raw_spec))
        transformed.pop(label_xf, None)
        return outputs(model(transformed))

    return serve


def serving_signatures(
    model: keras.Model,
    tf_transform_output: tft.TFTransformOutput,
    label: str,
    label_xf: str,
    outputs: Callable[[tf.Tensor], dict[str, tf.Tensor]],
) -> dict[str, Any]:
    """The exported SavedModel's signatures: serving_default (examples_signature) and
    transform_features (transform_signature, for TFMA)."""
    return {
        SERVING_SIGNATURE: examples_signature(model, tf_transform_output, label, label_xf, outputs),
        TRANSFORM_SIGNATURE: transform_signature(model, tf_transform_output),
    }


def serving_outputs(task: str, classes: tuple[str, ...], output: tf.Tensor) -> dict[str, tf.Tensor]:
    """The model's output under the keys TFMA, serving and `tfxp predict` read, the same
    for every trainer: `predictions` (regression), `logistic` or `probabilities` and the
    predicted `class` (classification)."""
    if task == "regression":
        return {"predictions": output}
    names = tf.constant(list(classes))
    if task == "binary":
        index = tf.cast(tf.reshape(output, [-1]) >= 0.5, tf.int64)
        return {"logistic": output, "class": tf.gather(names, index)}
    return {"probabilities": output, "class": tf.gather(names, tf.argmax(output, axis=-1))}


def transform_signature(model: keras.Model, tf_transform_output: tft.TFTransformOutput):
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


def label_index(label: tf.Tensor, classes: tuple[str, ...]) -> tf.Tensor:
    """The index of each label value in `classes` (0 when it is none of them).

    Numbers are compared as numbers (so 1, 1.0 and "1" agree), text as text.
    """
    if label.dtype == tf.string:
        table = tf.constant(list(classes))
        hits = tf.equal(tf.expand_dims(label, 1), tf.expand_dims(table, 0))
    else:
        table = tf.constant([float(c) for c in classes], tf.float64)
        hits = tf.equal(tf.expand_dims(tf.cast(label, tf.float64), 1), tf.expand_dims(table, 0))
    return tf.argmax(tf.cast(hits, tf.int64), axis=1)


class EpochTimer(keras.callbacks.Callback):
    """Logs wall time per epoch so slow training shows up in the run log."""

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logging.info("epoch %d took %.2fs: %s", epoch, time.perf_counter() - self._start, logs)


def import_augment(dotted_path: str | None) -> BatchFn | None:
    """The `augment` hyperparameter's function ("package.module.function"), or None."""
    if not dotted_path:
        return None
    module, _, name = dotted_path.rpartition(".")
    if not module:
        raise ValueError(f"augment must be 'package.module.function', got {dotted_path!r}")
    return getattr(importlib.import_module(module), name)
