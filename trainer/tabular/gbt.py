"""The gradient-boosted-trees trainer of tabular datasets (`model: gbt` in the dataset file).

The same Transform as the Keras MLP (trainer/tabular/preprocessing.py): the
trees are fitted on its transformed features (z-scores, vocabulary and bucket
ids as numbers, is-missing indicators) by scikit-learn's
HistGradientBoostingClassifier/Regressor, then exported as TensorFlow ops
(trainer/tabular/trees.py) behind the very signatures trainer/tabular/train.py
gives the MLP: `serving_default` (raw tf.Examples in; logistic + class,
probabilities + class, or predictions out) and `transform_features`. The
Evaluator, the serving check, `tfxp predict`, batch inference and serving load
it as they load any SavedModel of this project.

The training split is read into memory (the trees need every row at once):
gbt is for tables that fit in the Trainer's memory. It trains in one process;
the `hyperparameters:` of the dataset file are HistGradientBoosting's
(GbtHyperparameters below), and `tuning:` searches them through the shared
Tuner step (trainer/tuning.py).
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
from absl import logging

from trainer.base import with_tuned_values
from trainer.distribution import ClusterConfigError, cluster_from_env
from trainer.input import input_fn
from trainer.tabular.features import TabularSpec, missing_name, tabular_spec, transformed_name
from trainer.tabular.sklearn_trees import ensemble_arrays

# The MLP's own signatures (parse, transform, model, outputs): both models serve alike.
from trainer.tabular.train import signatures
from trainer.tabular.trees import TreeEnsemble
from trainer.tuning import search_result

# Rows per read batch when loading a split into memory.
READ_BATCH = 8192
# Below this many training rows the trees are fitted on one thread: OpenMP's
# threads cost more than they save there, and on a busy machine far more
# (295 rows: 0.08 s on one thread, 3-8 s on two with the cores shared).
SINGLE_THREAD_ROWS = 50_000


@dataclass(frozen=True)
class GbtHyperparameters:
    """HistGradientBoosting's knobs (scikit-learn's defaults) and how the splits are read."""

    learning_rate: float = 0.1
    max_iter: int = 100
    max_leaf_nodes: int = 31
    max_depth: int | None = None
    min_samples_leaf: int = 20
    l2_regularization: float = 0.0
    # "auto": on above 10,000 training rows (10% of them held out), as in scikit-learn.
    early_stopping: bool | str = "auto"
    seed: int = 42
    # Read batches (the Tuner step's trials read with these too).
    batch_size: int = READ_BATCH
    eval_batch_size: int = READ_BATCH

    @classmethod
    def from_custom_config(cls, custom_config: dict[str, Any] | None) -> GbtHyperparameters:
        raw = dict((custom_config or {}).get("hyperparameters", {}))
        known = list(asdict(cls()))
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise ValueError(
                f"unknown hyperparameters {unknown} for model: gbt; known: {known} "
                "(see docs/own-data.md)"
            )
        return cls(**raw)

    def estimator(self, task: str):
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        kind = (
            HistGradientBoostingRegressor
            if task == "regression"
            else HistGradientBoostingClassifier
        )
        return kind(
            learning_rate=self.learning_rate,
            max_iter=self.max_iter,
            max_leaf_nodes=self.max_leaf_nodes,
            max_depth=self.max_depth,
            min_samples_leaf=self.min_samples_leaf,
            l2_regularization=self.l2_regularization,
            early_stopping=self.early_stopping,
            random_state=self.seed,
        )


def feature_columns(feature_spec: dict[str, Any], spec: TabularSpec) -> list[str]:
    """The transformed features the trees read, in column order (the label excluded)."""
    return sorted(k for k in feature_spec if k != spec.label_xf)


def missing_pairs(columns: list[str]) -> list[tuple[str, str]]:
    """(value column, its is-missing indicator) of every feature that has blanks.

    Transform fills a blank number with the mean (and sets `<name>_missing`), which suits
    the MLP; the trees get NaN there instead and learn which way a blank goes at each
    split, as HistGradientBoosting does on raw data (about half a point of accuracy on
    the generated multiclass table of benchmarks/tabular_quality.py).
    """
    present = set(columns)
    return [
        (transformed_name(f), missing_name(f))
        for f in (c.removesuffix("_xf") for c in columns if c.endswith("_xf"))
        if missing_name(f) in present
    ]


def read_split(patterns, feature_spec, spec: TabularSpec, batch_size: int = READ_BATCH):
    """One split's transformed examples as (features [rows, columns] float64, labels [rows]).

    Columns in feature_columns' order; a feature of fixed size k (a vector per row) is k
    columns side by side.
    """
    columns = feature_columns(feature_spec, spec)
    for c in columns:
        if not isinstance(feature_spec[c], tf.io.FixedLenFeature):
            raise ValueError(
                f"transformed feature {c!r} is sparse or ragged: model: gbt reads a fixed "
                "number of values per row (use model: mlp, or a dense transform of it)"
            )
    dataset = input_fn(
        patterns, feature_spec, spec.label_xf, batch_size, shuffle=False, repeat=False
    )
    xs, ys = [], []
    for features, label in dataset.as_numpy_iterator():
        # One column per value: a scalar feature is one, a fixed-size vector several.
        parts = {
            c: np.reshape(features[c], [len(features[c]), -1]).astype(np.float64) for c in columns
        }
        for value, indicator in missing_pairs(columns):
            parts[value] = np.where(parts[indicator] > 0.5, np.nan, parts[value])
        xs.append(np.concatenate([parts[c] for c in columns], axis=1))
        ys.append(np.reshape(label, [-1]))
    if not xs:
        raise ValueError(f"no examples in {patterns}: nothing to fit the trees on")
    x = np.concatenate(xs).astype(np.float64)
    y = np.concatenate(ys)
    return x, (y.astype(np.float64) if spec.task == "regression" else y.astype(np.int64))


class GbtModel(tf.Module):
    """Transformed features (a dict) -> the MLP's outputs: P(class 1) [batch, 1], class
    probabilities [batch, classes], or the prediction [batch, 1]."""

    def __init__(self, ensemble: TreeEnsemble, columns: list[str], task: str) -> None:
        super().__init__(name="gbt")
        self.ensemble = ensemble
        self._columns = list(columns)
        self._task = task

    def __call__(self, transformed: dict[str, tf.Tensor]) -> tf.Tensor:
        # As read_split lays them out: each feature's values per row, side by side, a
        # blank (its indicator set) as NaN.
        parts = {c: tf.cast(transformed[c], tf.float64) for c in self._columns}
        parts = {c: tf.reshape(p, [tf.shape(p)[0], -1]) for c, p in parts.items()}
        for value, indicator in missing_pairs(self._columns):
            nan = tf.constant(np.nan, tf.float64)
            parts[value] = tf.where(parts[indicator] > 0.5, nan, parts[value])
        x = tf.concat([parts[c] for c in self._columns], axis=1)
        raw = self.ensemble(x)
        if self._task == "binary":
            out = tf.sigmoid(raw)
        elif self._task == "multiclass":
            out = tf.nn.softmax(raw, axis=-1)
        else:
            out = raw
        return tf.cast(out, tf.float32)


def fit(spec: TabularSpec, hp: GbtHyperparameters, x: np.ndarray, y: np.ndarray):
    """The fitted estimator and the TF model that computes the same outputs."""
    from threadpoolctl import threadpool_limits

    # The dataset file's class weights, as the MLP weighs each example's loss (train.py).
    weights = None
    if spec.class_weights and spec.task != "regression":
        weights = np.asarray(spec.class_weights, np.float64)[np.asarray(y, np.int64)]
    start = time.perf_counter()
    with threadpool_limits(1 if len(x) < SINGLE_THREAD_ROWS else None):
        estimator = hp.estimator(spec.task).fit(x, y, sample_weight=weights)
    logging.info(
        "gbt: %d iterations on %d rows x %d features in %.2fs",
        estimator.n_iter_,
        len(x),
        x.shape[1],
        time.perf_counter() - start,
    )
    outputs = spec.num_classes if spec.task == "multiclass" else 1
    return estimator, TreeEnsemble(ensemble_arrays(estimator, outputs))


def eval_loss(spec: TabularSpec, estimator, x: np.ndarray, y: np.ndarray) -> float:
    """The Keras MLP's loss on the same rows: mean squared error or cross-entropy."""
    if spec.task == "regression":
        return float(np.mean((estimator.predict(x) - y) ** 2))
    proba = estimator.predict_proba(x)
    # Label index -> its column of predict_proba; a class the trees never saw gets 1e-7.
    column = {int(c): i for i, c in enumerate(estimator.classes_)}
    picked = np.array(
        [proba[row, column[label]] if label in column else 0.0 for row, label in enumerate(y)]
    )
    return float(-np.mean(np.log(np.clip(picked, 1e-7, 1.0))))


def run_fn(fn_args: Any) -> None:
    """Fits the trees on the train split, logs the eval loss, exports the SavedModel."""
    if cluster_from_env().multi_worker:
        # Every worker would fit the same trees and write the same folder.
        raise ClusterConfigError(
            "model: gbt trains in one process: run its Trainer on one worker (no TF_CONFIG "
            "cluster), or use model: mlp for multi-worker training"
        )
    spec = tabular_spec(fn_args.custom_config)
    hp = with_tuned_values(GbtHyperparameters.from_custom_config(fn_args.custom_config), fn_args)
    logging.info("gbt tabular: %s; hyperparameters: %s", spec, json.dumps(asdict(hp)))
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    feature_spec = tf_transform_output.transformed_feature_spec()
    x, y = read_split(fn_args.train_files, feature_spec, spec, hp.batch_size)
    estimator, ensemble = fit(spec, hp, x, y)
    x_eval, y_eval = read_split(fn_args.eval_files, feature_spec, spec, hp.eval_batch_size)
    logging.info("gbt: eval loss %.6f", eval_loss(spec, estimator, x_eval, y_eval))

    model = GbtModel(ensemble, feature_columns(feature_spec, spec), spec.task)
    tf.saved_model.save(
        model,
        fn_args.serving_model_dir,
        signatures=signatures(model, tf_transform_output, spec),
    )
    logging.info("gbt: SavedModel written to %s", fn_args.serving_model_dir)


class _History:
    def __init__(self, val_loss: float) -> None:
        self.history = {"val_loss": [val_loss]}


class _Trial:
    """One Tuner trial: what trainer/tuning.py's search calls on a Keras model
    (`fit(train, ..., validation_data=eval)` returning a history with val_loss)."""

    def __init__(self, spec: TabularSpec, hp: GbtHyperparameters) -> None:
        self._spec, self._hp = spec, hp

    def fit(self, train, *, validation_data, **_unused) -> _History:
        estimator, _ = fit(self._spec, self._hp, *train)
        return _History(eval_loss(self._spec, estimator, *validation_data))


def tuner_fn(fn_args: Any):
    """The Tuner step's search over GbtHyperparameters (trainer/tuning.py)."""
    spec = tabular_spec(fn_args.custom_config)
    base = GbtHyperparameters.from_custom_config(fn_args.custom_config)
    feature_spec = tft.TFTransformOutput(fn_args.transform_graph_path).transformed_feature_spec()

    # The search hands a trial's "dataset" straight to _Trial.fit: here the split in
    # memory, read once for every trial.
    @functools.lru_cache(maxsize=2)
    def rows(patterns: tuple[str, ...]):
        return read_split(list(patterns), feature_spec, spec, READ_BATCH)

    def dataset(patterns, batch_size: int, training: bool):
        return rows(tuple([patterns] if isinstance(patterns, str) else patterns))

    return search_result(fn_args, lambda hp: _Trial(spec, hp), dataset, base)
