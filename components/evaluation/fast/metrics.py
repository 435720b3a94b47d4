"""TFMA's metrics from numpy columns: the per-example combiners replaced by array arithmetic.

TFMA computes every metric from "non-derived" computations (Beam combiners fed one
example at a time) and "derived" ones (pure functions of other results: AUC and
accuracy come from confusion matrices, which come from a calibration histogram).
Here the combiners `accumulators` knows are filled batch by batch from numpy columns,
and everything after them is TFMA's own code: the combiner's `extract_output`, the
derived computations in TFMA's order, the baseline diffs, private-metric removal and
the split into metrics, plots and attributions (`finish`). So the only arithmetic of
our own is the bucketing, counting and summing in `accumulators`.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from tensorflow_model_analysis.evaluators import metrics_plots_and_validations_evaluator as mpv
from tensorflow_model_analysis.metrics import metric_specs, metric_types, metric_util

from compat import tfma as tfma_internals
from components.evaluation.fast import plots
from components.evaluation.fast.accumulators import (
    CONFUSION,
    EXAMPLE_COUNT,
    HISTOGRAM,
    KERAS,
    MULTICLASS_CONFUSION,
    REGRESSION_ERRORS,
    RESIDUALS,
    SliceAccumulators,
)
from components.evaluation.fast.columns import Columns, Unsupported

read = tfma_internals.attribute  # TFMA's private attributes, registered in compat/tfma.py

SUPPORTED_COMBINERS = (
    HISTOGRAM,
    EXAMPLE_COUNT,
    CONFUSION,
    KERAS,
    *REGRESSION_ERRORS,
    MULTICLASS_CONFUSION,
    RESIDUALS,
)


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
        read(combiner, "_aggregation_type") is not None
        or read(combiner, "_class_weights")
        or read(combiner, "_metric_key").sub_key
    ):
        return "regression errors with sub keys, aggregation or class weights"
    if isinstance(combiner, (HISTOGRAM, CONFUSION)):
        if read(combiner, "_aggregation_type") is not None or read(combiner, "_class_weights"):
            return "aggregation or class weights"
        sub_key = read(combiner, "_key").sub_key
        if sub_key and (sub_key.k is not None or sub_key.top_k is not None):
            return "top-k sub keys"
    if isinstance(combiner, CONFUSION) and (
        read(combiner, "_example_id_key")
        or read(combiner, "_extract_label_prediction_and_weight")
        is not metric_util.to_label_prediction_example_weight
    ):
        return "example ids or a custom extraction"
    return None


def _keras_refusal(combiner: Any, eval_config: Any) -> str | None:
    """Keras' own metrics by name on the model's one output, without sub keys, losses
    or padding (then TFMA hands each batch to `update_state` as is)."""
    if read(combiner, "_output_names") != [""]:
        return "keras metrics on named outputs"
    if (
        read(combiner, "_sub_key")
        or read(combiner, "_aggregation_type")
        or read(combiner, "_class_weights")
    ):
        return "keras metrics with sub keys, aggregation or class weights"
    if any(read(combiner, "_loss_configs")):
        return "keras losses"
    # TFMA names the module of every metric class, Keras' own ones too.
    for module, name in read(combiner, "_custom_objects"):
        if module.split(".")[0] not in ("tf_keras", "keras"):
            return f"the custom keras metric {module}.{name}"
    if any(spec.HasField("padding_options") for spec in eval_config.model_specs):
        return "padding options"
    return None


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
    accumulators = SliceAccumulators(separated)
    accumulators.add(columns_by_model)
    return finish(separated, accumulators.results(), baseline_model_name, slice_key)


def finish(
    separated: mpv.MetricComputations,
    combined: dict[metric_types.MetricKey, Any],
    baseline_model_name: str | None,
    slice_key: tuple = (),
) -> tuple[tuple, dict]:
    """TFMA's steps after the combiners' outputs (`combined`) of one slice: derived
    metrics, baseline diffs, private metrics removed."""
    results = dict(combined)
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
