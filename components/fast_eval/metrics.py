"""TFMA's metrics from whole columns: the per-example combiners replaced by array arithmetic.

TFMA computes every metric from "non-derived" computations (Beam combiners fed one
example at a time) and "derived" ones (pure functions of other results: AUC and
accuracy come from confusion matrices, which come from a calibration histogram).
Here the combiners this module knows are filled from numpy columns in one step each,
and everything after them is TFMA's own code: the combiner's `extract_output`, the
derived computations in TFMA's order, the baseline diffs, private-metric removal and
the split into metrics, plots and attributions. So the only arithmetic of our own is
the bucketing and summing below, which repeats `_CalibrationHistogramCombiner` and
`_ExampleCountCombiner` exactly (same bucket formula in float64); sums differ from
TFMA's one-by-one additions only in summation order.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
from tensorflow_model_analysis.contrib.aggregates import binary_confusion_matrices as bcm
from tensorflow_model_analysis.evaluators import metrics_plots_and_validations_evaluator as mpv
from tensorflow_model_analysis.metrics import (
    binary_confusion_matrices,
    calibration_histogram,
    example_count,
    metric_specs,
    metric_types,
    metric_util,
)

HISTOGRAM = calibration_histogram._CalibrationHistogramCombiner  # noqa: SLF001
EXAMPLE_COUNT = example_count._ExampleCountCombiner  # noqa: SLF001
CONFUSION = binary_confusion_matrices._BinaryConfusionMatrixCombiner  # noqa: SLF001
SUPPORTED_COMBINERS = (HISTOGRAM, EXAMPLE_COUNT, CONFUSION)


class Unsupported(Exception):
    """This evaluation needs something the fast path does not implement: use TFMA."""


@dataclass
class Columns:
    """One model's labels and predictions on the evaluated examples, one value each."""

    labels: np.ndarray  # float64, shape (n,)
    predictions: np.ndarray  # float64, shape (n,)


def computations(eval_config: Any) -> mpv.MetricComputations:
    """TFMA's computations for `eval_config` (the Evaluator's, defaults applied), or
    Unsupported naming the first one this module cannot fill."""
    if any(spec.query_key for spec in eval_config.metrics_specs):
        raise Unsupported("a metrics spec groups by query_key")
    separated = mpv._filter_and_separate_computations(  # noqa: SLF001
        metric_specs.to_computations(list(eval_config.metrics_specs), eval_config=eval_config)
    )
    if separated.cross_slice_computations:
        raise Unsupported("cross-slice metrics")
    for c in separated.non_derived_computations:
        if not isinstance(c.combiner, SUPPORTED_COMBINERS):
            raise Unsupported(f"metric combiner {type(c.combiner).__name__} ({c.keys[0].name})")
        # TFMA's standard preprocessor only picks the label, prediction and weight.
        if any(
            type(p) is not metric_types.StandardMetricInputsPreprocessor
            for p in c.preprocessors or []
        ):
            raise Unsupported(f"preprocessors on {c.keys[0].name}")
        if isinstance(c.combiner, (HISTOGRAM, CONFUSION)):
            h = c.combiner
            if h._aggregation_type is not None or h._class_weights or h._key.sub_key:  # noqa: SLF001
                raise Unsupported(f"{c.keys[0].name}: sub keys, aggregation or class weights")
        if isinstance(c.combiner, CONFUSION) and (
            c.combiner._example_id_key  # noqa: SLF001
            or c.combiner._extract_label_prediction_and_weight  # noqa: SLF001
            is not metric_util.to_label_prediction_example_weight
        ):
            raise Unsupported(f"{c.keys[0].name}: example ids or a custom extraction")
        if any(key.output_name for key in c.keys):
            raise Unsupported("multi-output models")
    return separated


def _triples(columns: Columns, fractional: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels, predictions and weights as to_label_prediction_example_weight yields them
    (no example weights: every weight is 1.0, as TFMA uses when the spec names none)."""
    labels, predictions = columns.labels, columns.predictions
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
    labels, predictions, weights = _triples(columns, fractional)
    matrices = combiner._binary_confusion_matrices  # noqa: SLF001
    accumulator = {}
    for threshold in matrices._thresholds:  # noqa: SLF001
        positive = labels == 1.0 if fractional else labels > threshold
        predicted = predictions > threshold
        accumulator[threshold] = bcm._ThresholdEntry(  # noqa: SLF001
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
    labels, predictions, weights = _triples(columns, combiner._fractional_labels)  # noqa: SLF001
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
        fill = (
            _histogram
            if isinstance(c.combiner, HISTOGRAM)
            else _confusion
            if isinstance(c.combiner, CONFUSION)
            else _example_count
        )
        results.update(fill(c.combiner, columns))
    # A slice without positives (or negatives) has NaN rates, as in TFMA, where
    # numpy's warning stays in the Beam worker's log instead of the run's console.
    with np.errstate(divide="ignore", invalid="ignore"):
        for c in separated.derived_computations:
            results.update(c.result(results))
    results = _with_diffs(results, baseline_model_name)
    sliced = mpv._add_ci_derived_metrics(  # noqa: SLF001
        (slice_key, results), separated.ci_derived_computations
    )
    return mpv._remove_private_metrics(*sliced)  # noqa: SLF001


def split_by_kind(sliced: tuple[tuple, dict]) -> dict[str, tuple[tuple, dict]]:
    """{metrics|plots|attributions: (slice_key, {key: value})}, TFMA's split."""
    return {
        "metrics": mpv._filter_by_key_type(sliced, metric_types.MetricKey),  # noqa: SLF001
        "plots": mpv._filter_by_key_type(sliced, metric_types.PlotKey),  # noqa: SLF001
        "attributions": mpv._filter_by_key_type(sliced, metric_types.AttributionsKey),  # noqa: SLF001
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
    return Columns(labels=columns.labels[rows], predictions=columns.predictions[rows])


def _with_diffs(results: dict, baseline_model_name: str | None) -> dict:
    """TFMA's add_diff_metrics (a closure inside _AddDerivedCrossSliceAndDiffMetrics)."""
    result = copy.copy(results)
    if not baseline_model_name:
        return result
    diffs = {}
    for k, v in result.items():
        if mpv._is_private_metrics(k) or k.is_diff:  # noqa: SLF001
            continue
        baseline_key = k.make_baseline_key(baseline_model_name)
        diffable = mpv._is_metric_diffable(v)  # noqa: SLF001
        if k.model_name != baseline_model_name and baseline_key in result and diffable:
            diffs[k.make_diff_key()] = v - result[baseline_key]
    result.update(diffs)
    return result
