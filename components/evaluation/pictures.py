"""The Evaluator's plots as the numbers a chart draws: `plots.json` beside TFMA's output.

TFMA writes its plots as protos (`tfma.load_plots`): per slice and model, a binary
model's confusion matrices at thresholds and its calibration histogram, a multiclass
model's confusion matrix. Here they become, per slice and model:
  - roc: false and true positive rates at each threshold, with the area under them;
  - pr: recall and precision at each threshold, with the area under them;
  - calibration: per bucket of the prediction, the mean prediction, the observed
    rate of positives and the example count (empty buckets left out);
  - confusion: the multiclass matrix (rows: actual class, columns: predicted class)
    at threshold 0 (argmax), with the classes it names;
  - a regression model's predicted_actual: per bucket of the prediction (over the eval
    labels' range), the mean prediction, the mean actual label and the count;
  - a regression model's residuals: label - prediction counted in fixed bins (lower
    and upper edges, count), trimmed to the bins from the first to the last filled,
    with the counts below and above the binned range
    (components/evaluation/regression_plots.py);
and per slice the example count. The console (tfxp/ui) and the model card
(components/release/model_card) draw from this file; it is also each chart's
"data" link.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any

from tfx.utils import io_utils

from components.evaluation.regression_plots import RESIDUAL_HISTOGRAM_NAME

PICTURES_FILE = "plots.json"


def _area(xs: list[float], ys: list[float]) -> float | None:
    """The trapezoid area under (xs, ys), the points sorted by x; None without two."""
    points = sorted((x, y) for x, y in zip(xs, ys, strict=True) if not math.isnan(y))
    if len(points) < 2:
        return None
    return float(
        sum(
            (x1 - x0) * (y0 + y1) / 2
            for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False)
        )
    )


def _rate(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def binary_curves(matrices: Any) -> dict[str, Any]:
    """ROC and precision-recall points from TFMA's ConfusionMatrixAtThresholds."""
    fpr, tpr, recall, precision, thresholds = [], [], [], [], []
    for m in matrices.matrices:
        tp, fp = m.true_positives, m.false_positives
        tn, fn = m.true_negatives, m.false_negatives
        thresholds.append(float(m.threshold))
        fpr.append(_rate(fp, fp + tn))
        tpr.append(_rate(tp, tp + fn))
        recall.append(_rate(tp, tp + fn))
        # With nothing predicted positive TFMA's precision is 1 (the curve's far end).
        precision.append(_rate(tp, tp + fp) if tp + fp else 1.0)
    return {
        "roc": {"threshold": thresholds, "fpr": fpr, "tpr": tpr, "auc": _area(fpr, tpr)},
        "pr": {
            "threshold": thresholds,
            "recall": recall,
            "precision": precision,
            "auc": _area(recall, precision),
        },
    }


def calibration(buckets: Any) -> dict[str, list[float]]:
    """Per non-empty bucket: mean prediction, observed positive rate, count."""
    predicted, observed, count, lower = [], [], [], []
    for b in buckets.buckets:
        weight = b.num_weighted_examples.value
        if not weight:
            continue
        lower.append(float(b.lower_threshold_inclusive))
        predicted.append(b.total_weighted_refined_prediction.value / weight)
        observed.append(b.total_weighted_label.value / weight)
        count.append(float(weight))
    return {"lower": lower, "predicted": predicted, "observed": observed, "count": count}


def multiclass(matrices: Any) -> dict[str, Any]:
    """The confusion matrix at the first threshold (0: argmax) as rows of counts."""
    if not matrices.matrices:
        return {"classes": [], "matrix": []}
    entries = matrices.matrices[0].entries
    classes = sorted({e.actual_class_id for e in entries} | {e.predicted_class_id for e in entries})
    index = {c: i for i, c in enumerate(classes)}
    matrix = [[0.0] * len(classes) for _ in classes]
    for e in entries:
        matrix[index[e.actual_class_id]][index[e.predicted_class_id]] += e.num_weighted_examples
    return {"classes": classes, "matrix": matrix}


def residuals(buckets: Any) -> dict[str, Any]:
    """The residual histogram's bins from the first filled one to the last; the end
    buckets (beyond the binned range) as `below` and `above`."""
    inner = list(buckets.buckets)[1:-1]
    counts = [b.num_weighted_examples.value for b in inner]
    filled = [i for i, n in enumerate(counts) if n]
    first, last = (filled[0], filled[-1] + 1) if filled else (0, 0)
    return {
        "lower": [float(b.lower_threshold_inclusive) for b in inner[first:last]],
        "upper": [float(b.upper_threshold_exclusive) for b in inner[first:last]],
        "count": [float(n) for n in counts[first:last]],
        "below": float(buckets.buckets[0].num_weighted_examples.value),
        "above": float(buckets.buckets[-1].num_weighted_examples.value),
    }


def _regression(plots: dict[str, Any]) -> dict[str, Any]:
    """A regression model's calibration buckets are predicted against actual."""
    if "residuals" in plots and "calibration" in plots:
        cal = plots.pop("calibration")
        plots["predicted_actual"] = {
            "lower": cal["lower"],
            "predicted": cal["predicted"],
            "actual": cal["observed"],
            "count": cal["count"],
        }
    return plots


def _model_plots(plot_data: Any, name: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {}
    if name == RESIDUAL_HISTOGRAM_NAME:
        return {"residuals": residuals(plot_data.calibration_histogram_buckets)}
    if plot_data.HasField("confusion_matrix_at_thresholds"):
        found.update(binary_curves(plot_data.confusion_matrix_at_thresholds))
    if plot_data.HasField("calibration_histogram_buckets"):
        found["calibration"] = calibration(plot_data.calibration_histogram_buckets)
    if plot_data.HasField("multi_class_confusion_matrix_at_thresholds"):
        found["confusion"] = multiclass(plot_data.multi_class_confusion_matrix_at_thresholds)
    return found


# A slice key (TFMA's tuple of (feature, value)) -> its name, the slicing rules'
# `slice_name` (passed in: the slicing package writes this file, and imports it).
SliceNamer = Callable[[tuple], str]


def read_pictures(evaluation_uri: str, slice_name: SliceNamer) -> dict[str, Any]:
    """{"slices": {slice name: {"models": {model: plots}, "examples": n}}} from TFMA's
    output; the model is "candidate", "baseline", or "" without a baseline."""
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.slicer import slicer_lib

    slices: dict[str, dict[str, Any]] = {}
    for record in tfma.load_plots(evaluation_uri):
        if not record.HasField("slice_key"):
            continue  # cross slices: the Evaluator computes none
        name = slice_name(slicer_lib.deserialize_slice_key(record.slice_key))
        models = slices.setdefault(name, {"models": {}})["models"]
        for kv in record.plot_keys_and_values:
            if kv.key.sub_key.ByteSize():
                continue  # per-class plots: none configured
            plots = _model_plots(kv.value, kv.key.name)
            if plots:
                models.setdefault(kv.key.model_name, {}).update(plots)
    for found in slices.values():
        found["models"] = {m: _regression(p) for m, p in found["models"].items()}
    for record in tfma.load_metrics(evaluation_uri):
        name = slice_name(slicer_lib.deserialize_slice_key(record.slice_key))
        for kv in record.metric_keys_and_values:
            if kv.key.name == "example_count" and not kv.key.is_diff and name in slices:
                slices[name].setdefault("examples", {})[kv.key.model_name] = (
                    kv.value.double_value.value
                )
    return {"slices": dict(sorted(slices.items(), key=lambda s: (s[0] != "overall", s[0])))}


def _finite(value: Any) -> Any:
    """NaN (a rate with nothing to divide by) as null: JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def write_pictures(evaluation_uri: str, slice_name: SliceNamer) -> str:
    """`plots.json` in the evaluation artifact; returns its path."""
    path = os.path.join(evaluation_uri, PICTURES_FILE)
    pictures = read_pictures(evaluation_uri, slice_name)
    io_utils.write_string_file(path, json.dumps(_finite(pictures)))
    return path


def load_pictures(evaluation_uri: str) -> dict[str, Any] | None:
    """The evaluation's `plots.json`, or None (an evaluation written before it existed)."""
    path = os.path.join(evaluation_uri, PICTURES_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)
