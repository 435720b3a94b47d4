"""TFMA's metrics from whole columns: the per-example combiners replaced by array arithmetic.

TFMA computes every metric from "non-derived" computations (Beam combiners fed one
example at a time) and "derived" ones (pure functions of other results: AUC and
accuracy come from confusion matrices, which come from a calibration histogram).
Here the combiners this module knows are filled from numpy columns in one step each,
and everything after them is TFMA's own code: the combiner's `extract_output`, the
derived computations in TFMA's order, the baseline diffs, private-metric removal and
the split into metrics, plots and attributions. So the only arithmetic of our own is
the bucketing, counting and summing below, which repeats `_CalibrationHistogramCombiner`,
`_BinaryConfusionMatrixCombiner`, the mean regression error combiners and
`_ExampleCountCombiner` exactly (same bucket formula in float64, per-class labels as
TFMA's `select_class_id`); sums differ from TFMA's one-by-one additions only in
summation order. Keras metrics run TFMA's own batch step on batches of TFMA's size.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
from tensorflow_model_analysis.contrib.aggregates import binary_confusion_matrices as bcm
from tensorflow_model_analysis.evaluators import metrics_plots_and_validations_evaluator as mpv
from tensorflow_model_analysis.metrics import (
    calibration_histogram,
    metric_specs,
    metric_types,
    metric_util,
)

from compat import tfma as tfma_internals
from components.evaluation.fast import plots

HISTOGRAM = tfma_internals.CalibrationHistogramCombiner
EXAMPLE_COUNT = tfma_internals.ExampleCountCombiner
CONFUSION = tfma_internals.BinaryConfusionMatrixCombiner
# Keras metrics by name (SparseCategoricalAccuracy, MeanSquaredError ...), which TFMA
# updates a batch at a time and adds up (their weights are sums).
KERAS = tfma_internals.CompilableMetricsCombiner
# TFMA's MeanAbsoluteError and MeanSquaredError: sums of each example's error.
ABSOLUTE_ERROR = tfma_internals.MeanAbsoluteErrorCombiner
SQUARED_ERROR = tfma_internals.MeanSquaredErrorCombiner
REGRESSION_ERRORS = (ABSOLUTE_ERROR, SQUARED_ERROR)
# A multiclass model's confusion matrix plot (components/evaluation/fast/plots.py).
MULTICLASS_CONFUSION = plots.MULTICLASS_CONFUSION
SUPPORTED_COMBINERS = (
    HISTOGRAM,
    EXAMPLE_COUNT,
    CONFUSION,
    KERAS,
    *REGRESSION_ERRORS,
    MULTICLASS_CONFUSION,
)


class Unsupported(Exception):
    """This evaluation needs something the fast path does not implement: use TFMA."""


@dataclass
class Columns:
    """One model's labels (one per example) and predictions (one per example, or one
    per class) on the evaluated examples, in float64, with the model's own dtypes
    (which Keras metrics compute in)."""

    labels: np.ndarray  # float64, shape (n,)
    predictions: np.ndarray  # float64, shape (n,) or (n, classes)
    label_dtype: np.dtype = np.dtype(np.float64)
    prediction_dtype: np.dtype = np.dtype(np.float64)


def computations(eval_config: Any) -> mpv.MetricComputations:
    """TFMA's computations for `eval_config` (the Evaluator's, defaults applied), or
    Unsupported naming the first one this module cannot fill."""
    if any(spec.query_key for spec in eval_config.metrics_specs):
        raise Unsupported("a metrics spec groups by query_key")
    separated = tfma_internals.filter_and_separate_computations(
        metric_specs.to_computations(list(eval_config.metrics_specs), eval_config=eval_config)
    )
    if separated.cross_slice_computations:
        raise Unsupported("cross-slice metrics")
    for c in separated.non_derived_computations:
        refusal = _computation_refusal(c, eval_config)
        if refusal:
            raise Unsupported(f"{c.keys[0].name}: {refusal}")
    return separated


def _computation_refusal(c: Any, eval_config: Any) -> str | None:
    """Why the combiner of computation `c` cannot be filled from columns, or None."""
    combiner = c.combiner
    if not isinstance(combiner, SUPPORTED_COMBINERS):
        return f"metric combiner {type(combiner).__name__}"
    # TFMA's standard preprocessor only picks the label, prediction and weight.
    if any(
        type(p) is not metric_types.StandardMetricInputsPreprocessor for p in c.preprocessors or []
    ):
        return "preprocessors"
    if any(key.output_name for key in c.keys):
        return "multi-output models"
    if isinstance(combiner, KERAS):
        return _keras_refusal(combiner, eval_config)
    if isinstance(combiner, MULTICLASS_CONFUSION):
        return plots.multiclass_refusal(combiner)
    if isinstance(combiner, REGRESSION_ERRORS) and (
        combiner._aggregation_type is not None  # noqa: SLF001
        or combiner._class_weights  # noqa: SLF001
        or combiner._metric_key.sub_key  # noqa: SLF001
    ):
        return "regression errors with sub keys, aggregation or class weights"
    if isinstance(combiner, (HISTOGRAM, CONFUSION)):
        if combiner._aggregation_type is not None or combiner._class_weights:  # noqa: SLF001
            return "aggregation or class weights"
        sub_key = combiner._key.sub_key  # noqa: SLF001
        if sub_key and (sub_key.k is not None or sub_key.top_k is not None):
            return "top-k sub keys"
    if isinstance(combiner, CONFUSION) and (
        combiner._example_id_key  # noqa: SLF001
        or combiner._extract_label_prediction_and_weight  # noqa: SLF001
        is not metric_util.to_label_prediction_example_weight
    ):
        return "example ids or a custom extraction"
    return None


def _keras_refusal(combiner: Any, eval_config: Any) -> str | None:
    """Keras' own metrics by name on the model's one output, without sub keys, losses
    or padding (then TFMA hands each batch to `update_state` as is)."""
    if combiner._output_names != [""]:  # noqa: SLF001
        return "keras metrics on named outputs"
    if combiner._sub_key or combiner._aggregation_type or combiner._class_weights:  # noqa: SLF001
        return "keras metrics with sub keys, aggregation or class weights"
    if any(combiner._loss_configs):  # noqa: SLF001
        return "keras losses"
    # TFMA names the module of every metric class, Keras' own ones too.
    for module, name in combiner._custom_objects:  # noqa: SLF001
        if module.split(".")[0] not in ("tf_keras", "keras"):
            return f"the custom keras metric {module}.{name}"
    if any(spec.HasField("padding_options") for spec in eval_config.model_specs):
        return "padding options"
    return None


def _binary(columns: Columns, sub_key: Any) -> tuple[np.ndarray, np.ndarray]:
    """One label and one prediction per example, as to_label_prediction_example_weight
    yields them to a binary combiner: a class_id sub key binarizes a multi-class model
    (label == class_id, that class's prediction: TFMA's select_class_id on sparse labels)."""
    labels, predictions = columns.labels, columns.predictions
    class_id = sub_key.class_id if sub_key else None
    if class_id is None:
        if predictions.ndim > 1:
            # TFMA then flattens every class into an example of its own (micro average).
            raise Unsupported("a binary metric of a multi-class model without a class_id")
        return labels, predictions
    if predictions.ndim == 1:
        raise Unsupported("a class_id sub key on a model with one prediction per example")
    if not 0 <= class_id < predictions.shape[1]:
        raise Unsupported(f"class_id {class_id} of a model with {predictions.shape[1]} classes")
    return (labels == class_id).astype(np.float64), predictions[:, class_id]


def _triples(
    columns: Columns, fractional: bool, sub_key: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels, predictions and weights as to_label_prediction_example_weight yields them
    (no example weights: every weight is 1.0, as TFMA uses when the spec names none)."""
    labels, predictions = _binary(columns, sub_key)
    weights = np.ones_like(labels)
    if not fractional:
        return labels, predictions, weights
    if np.any((labels < 0.0) | (labels > 1.0)):
        raise Unsupported("labels outside [0, 1] (TFMA raises on them)")
    # Each example splits into (0, p, w*(1-l)) and (1, p, w*l); zero weights dropped.
    both_weights = np.concatenate([weights * (1.0 - labels), weights * labels])
    keep = both_weights != 0.0
    labels = np.concatenate([np.zeros_like(labels), np.ones_like(labels)])[keep]
    return labels, np.concatenate([predictions, predictions])[keep], both_weights[keep]


def _confusion(combiner: Any, columns: Columns) -> dict[Any, Any]:
    """`_BinaryConfusionMatrixCombiner` (exact thresholds) over all examples at once."""
    fractional = combiner._enable_fractional_labels  # noqa: SLF001
    labels, predictions, weights = _triples(columns, fractional, combiner._key.sub_key)  # noqa: SLF001
    matrices = combiner._binary_confusion_matrices  # noqa: SLF001
    accumulator = {}
    for threshold in matrices._thresholds:  # noqa: SLF001
        positive = labels == 1.0 if fractional else labels > threshold
        predicted = predictions > threshold
        accumulator[threshold] = tfma_internals.ThresholdEntry(
            bcm.Matrix(
                tp=float(weights[positive & predicted].sum()),
                tn=float(weights[~positive & ~predicted].sum()),
                fp=float(weights[~positive & predicted].sum()),
                fn=float(weights[positive & ~predicted].sum()),
            ),
            tp_examples=[],
            tn_examples=[],
            fp_examples=[],
            fn_examples=[],
        )
    return combiner.extract_output(accumulator)


def _histogram(combiner: Any, columns: Columns) -> dict[Any, Any]:
    """`_CalibrationHistogramCombiner` over all examples at once."""
    labels, predictions, weights = _triples(
        columns,
        combiner._fractional_labels,  # noqa: SLF001
        combiner._key.sub_key,  # noqa: SLF001
    )
    n = combiner._num_buckets  # noqa: SLF001
    values = predictions if combiner._prediction_based_bucketing else labels  # noqa: SLF001
    index = (values - combiner._left) / combiner._range * n + 1  # noqa: SLF001
    buckets = np.where(index < 0, 0, np.where(index >= n + 1, n + 1, np.floor(index)))
    buckets = buckets.astype(np.int64)
    size = n + 2
    count = np.bincount(buckets, minlength=size)
    sums = [
        np.bincount(buckets, weights=w, minlength=size)
        for w in (labels * weights, predictions * weights, weights)
    ]
    accumulator = {
        int(b): calibration_histogram.Bucket(
            int(b), float(sums[0][b]), float(sums[1][b]), float(sums[2][b])
        )
        for b in np.flatnonzero(count)
    }
    return combiner.extract_output(accumulator)


def _example_count(combiner: Any, columns: Columns) -> dict[Any, Any]:
    return combiner.extract_output(np.float64(len(columns.labels)))


def _keras(combiner: Any, columns: Columns) -> dict[Any, Any]:
    """`_CompilableMetricsCombiner`: TFMA's own batch step (`_process_batch`: each
    metric's `update_state`, its weights added to the accumulator) on batches of
    TFMA's size, the arrays shaped as TFMA stacks its examples' (label (n, 1),
    prediction (n, classes), weight (n, 1) of float32 ones) in the model's dtypes."""
    combiner.setup()
    accumulator = combiner.create_accumulator()
    n = len(columns.labels)
    predictions = columns.predictions.astype(columns.prediction_dtype)
    stacked = (
        columns.labels.astype(columns.label_dtype).reshape(n, 1),
        predictions.reshape(n, -1),
        np.ones((n, 1), np.float32),
    )
    size = accumulator._desired_batch_size  # noqa: SLF001
    inputs = accumulator._inputs[0]  # noqa: SLF001 (labels, predictions, weights lists)
    for start in range(0, n, size):
        for values, column in zip(inputs, stacked, strict=True):
            values.extend(column[start : start + size])
        combiner._process_batch(accumulator)  # noqa: SLF001
    return combiner.extract_output(accumulator)


def _regression_error(combiner: Any, columns: Columns) -> dict[Any, Any]:
    """`_MeanAbsoluteErrorCombiner` / `_MeanSquaredErrorCombiner`: each example's error
    as TFMA computes it from its label and prediction arrays (in their dtypes: the
    difference, then its absolute value, or its norm squared after float()), summed;
    NaN errors skipped, every weight 1.0."""
    labels, predictions = _binary(columns, None)
    difference = labels.astype(columns.label_dtype) - predictions.astype(columns.prediction_dtype)
    if isinstance(combiner, ABSOLUTE_ERROR):
        errors = np.absolute(difference).astype(np.float64)
    else:  # np.linalg.norm of one value: sqrt(x * x) in its dtype
        errors = np.sqrt(difference * difference).astype(np.float64) ** 2
    errors = errors[~np.isnan(errors)]
    accumulator = combiner.create_accumulator()
    accumulator.total_regression_error = float(errors.sum())
    accumulator.total_example_weights = float(errors.size)
    return combiner.extract_output(accumulator)


def _multiclass_confusion(combiner: Any, columns: Columns) -> dict[Any, Any]:
    try:
        return plots.multiclass_confusion(combiner, columns.labels, columns.predictions)
    except ValueError as error:
        raise Unsupported(str(error)) from error


def _fill(combiner: Any) -> Any:
    for kind, fill in (
        (MULTICLASS_CONFUSION, _multiclass_confusion),
        (HISTOGRAM, _histogram),
        (CONFUSION, _confusion),
        (KERAS, _keras),
        (REGRESSION_ERRORS, _regression_error),
        (EXAMPLE_COUNT, _example_count),
    ):
        if isinstance(combiner, kind):
            return fill
    raise Unsupported(f"metric combiner {type(combiner).__name__}")


def slice_metrics(
    separated: mpv.MetricComputations,
    columns_by_model: dict[str, Columns],
    baseline_model_name: str | None,
    slice_key: tuple = (),
) -> tuple[tuple, dict]:
    """(slice_key, {key: value}) for one slice's examples, as TFMA's
    _ComputeMetricsAndPlots has it before splitting metrics from plots (without
    confidence intervals)."""
    if not next(iter(columns_by_model.values())).labels.size:
        raise Unsupported("no examples")
    results: dict[metric_types.MetricKey, Any] = {}
    for c in separated.non_derived_computations:
        columns = columns_by_model[c.keys[0].model_name]
        results.update(_fill(c.combiner)(c.combiner, columns))
    # A slice without positives (or negatives) has NaN rates, as in TFMA, where
    # numpy's warning stays in the Beam worker's log instead of the run's console.
    with np.errstate(divide="ignore", invalid="ignore"):
        for c in separated.derived_computations:
            results.update(c.result(results))
    results = _with_diffs(results, baseline_model_name)
    sliced = tfma_internals.add_ci_derived_metrics(
        (slice_key, results), separated.ci_derived_computations
    )
    return tfma_internals.remove_private_metrics(*sliced)


def split_by_kind(sliced: tuple[tuple, dict]) -> dict[str, tuple[tuple, dict]]:
    """{metrics|plots|attributions: (slice_key, {key: value})}, TFMA's split."""
    return {
        "metrics": tfma_internals.filter_by_key_type(sliced, metric_types.MetricKey),
        "plots": tfma_internals.filter_by_key_type(sliced, metric_types.PlotKey),
        "attributions": tfma_internals.filter_by_key_type(sliced, metric_types.AttributionsKey),
    }


def sliced_results(
    separated: mpv.MetricComputations,
    columns_by_model: dict[str, Columns],
    baseline_model_name: str | None,
    slice_key: tuple = (),
) -> dict[str, tuple[tuple, dict]]:
    """{metrics|plots|attributions: (slice_key, {key: value})} for one slice."""
    return split_by_kind(slice_metrics(separated, columns_by_model, baseline_model_name, slice_key))


def subset(columns: Columns, rows: np.ndarray) -> Columns:
    """The columns of the examples at `rows` (one slice)."""
    return Columns(
        labels=columns.labels[rows],
        predictions=columns.predictions[rows],
        label_dtype=columns.label_dtype,
        prediction_dtype=columns.prediction_dtype,
    )


def _with_diffs(results: dict, baseline_model_name: str | None) -> dict:
    """TFMA's add_diff_metrics (a closure inside _AddDerivedCrossSliceAndDiffMetrics)."""
    result = copy.copy(results)
    if not baseline_model_name:
        return result
    diffs = {}
    for k, v in result.items():
        if tfma_internals.is_private_metrics(k) or k.is_diff:
            continue
        baseline_key = k.make_baseline_key(baseline_model_name)
        diffable = tfma_internals.is_metric_diffable(v)
        if k.model_name != baseline_model_name and baseline_key in result and diffable:
            diffs[k.make_diff_key()] = v - result[baseline_key]
    result.update(diffs)
    return result
