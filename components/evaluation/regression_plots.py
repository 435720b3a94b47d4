"""A regression model's pictures (docs/trust.md): predicted against actual, and the residuals.

Predicted against actual is TFMA's own CalibrationPlot: per bucket of the prediction
(between the eval split's smallest and largest label) the mean prediction and the
mean label. TFMA 0.47 has no residual histogram, so `ResidualHistogram` is a TFMA
metric of ours (registered with TFMA, named by this module in the eval config): the
examples' residuals (label - prediction) counted in fixed bins, written as TFMA's
CalibrationHistogramBuckets proto (each bucket's count, label sum and prediction sum)
so that TFMA's writer stores it like its own plots. The fast Evaluator fills the same
combiner from columns (`add_columns`), both paths through one binning function.

The ranges come from the eval data: the Evaluator reads the eval split's labels
before it evaluates (`with_label_ranges`) and writes them into the two plots' configs,
so the candidate and the baseline share every bin.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
import numpy as np
from tensorflow_model_analysis.metrics import metric_types, metric_util
from tensorflow_model_analysis.proto import metrics_for_slice_pb2

RESIDUAL_HISTOGRAM_NAME = "residual_histogram"
# Residual bins span this many of the eval label's standard deviations either side of
# zero; residuals beyond fall in the two end buckets. Their number follows the eval
# split's size, twice its square root (a histogram's usual rule of thumb: bins fill as
# the data allows) between MIN_BINS and RESIDUAL_BINS: 147 examples get 24 bins of a
# third of a standard deviation, 10,000 or more get 200 of 0.04.
RESIDUAL_SPREAD = 4.0
RESIDUAL_BINS = 200
MIN_BINS = 10


def bin_index(values: np.ndarray, left: float, right: float, bins: int) -> np.ndarray:
    """Bucket of each value: 0 below `left`, 1..bins inside, bins + 1 at or above `right`."""
    index = np.floor((values - left) / (right - left) * bins) + 1
    return np.clip(index, 0, bins + 1).astype(np.int64)


class ResidualHistogram(metric_types.Metric):
    """Residuals (label - prediction) counted in `bins` equal bins over [left, right)."""

    def __init__(
        self,
        left: float = -1.0,
        right: float = 1.0,
        bins: int = RESIDUAL_BINS,
        name: str = RESIDUAL_HISTOGRAM_NAME,
    ) -> None:
        super().__init__(
            metric_util.merge_per_key_computations(_residual_histogram),
            left=left,
            right=right,
            bins=bins,
            name=name,
        )


metric_types.register_metric(ResidualHistogram)


def _residual_histogram(
    left: float = -1.0,
    right: float = 1.0,
    bins: int = RESIDUAL_BINS,
    name: str = RESIDUAL_HISTOGRAM_NAME,
    eval_config: Any = None,
    model_name: str = "",
    output_name: str = "",
    sub_key: Any = None,
    aggregation_type: Any = None,
    class_weights: Any = None,
    example_weighted: bool = False,
) -> metric_types.MetricComputations:
    if sub_key or aggregation_type or class_weights:
        raise ValueError(f"{name}: a regression plot takes no class sub keys or averaging")
    key = metric_types.PlotKey(
        name=name, model_name=model_name, output_name=output_name, example_weighted=False
    )
    combiner = ResidualCombiner(key, eval_config, model_name, output_name, left, right, bins)
    return [metric_types.MetricComputation(keys=[key], preprocessors=None, combiner=combiner)]


class ResidualCombiner(beam.CombineFn):
    """Per bucket: count, label sum and prediction sum. The accumulator is a (3, bins + 2)
    array; sums are taken example after example (np.add.at), so TFMA's one-at-a-time
    path and the fast path's batches add in the same order."""

    def __init__(
        self,
        key: metric_types.PlotKey,
        eval_config: Any,
        model_name: str,
        output_name: str,
        left: float,
        right: float,
        bins: int,
    ) -> None:
        if not right > left or bins < 1:
            raise ValueError(
                f"{key.name}: needs left < right and bins >= 1, got {left}, {right}, {bins}"
            )
        self.key = key
        self.eval_config = eval_config
        self.model_name = model_name
        self.output_name = output_name
        self.left, self.right, self.bins = float(left), float(right), int(bins)

    def create_accumulator(self) -> np.ndarray:
        return np.zeros((3, self.bins + 2))

    def add_columns(self, acc: np.ndarray, labels: np.ndarray, predictions: np.ndarray) -> None:
        """Many examples at once (the fast path), in example order."""
        labels = np.asarray(labels, np.float64).reshape(-1)
        predictions = np.asarray(predictions, np.float64).reshape(-1)
        index = bin_index(labels - predictions, self.left, self.right, self.bins)
        np.add.at(acc[0], index, 1.0)
        np.add.at(acc[1], index, labels)
        np.add.at(acc[2], index, predictions)

    def add_input(self, acc: np.ndarray, element: Any) -> np.ndarray:
        for label, prediction, _ in metric_util.to_label_prediction_example_weight(
            element,
            eval_config=self.eval_config,
            model_name=self.model_name,
            output_name=self.output_name,
            example_weighted=False,
            flatten=True,
        ):
            self.add_columns(acc, label, prediction)
        return acc

    def merge_accumulators(self, accumulators: Iterable[np.ndarray]) -> np.ndarray:
        merged = self.create_accumulator()
        for acc in accumulators:
            merged += acc
        return merged

    def extract_output(self, acc: np.ndarray) -> dict[Any, Any]:
        width = (self.right - self.left) / self.bins
        buckets = metrics_for_slice_pb2.CalibrationHistogramBuckets()
        for i in range(self.bins + 2):
            bucket = buckets.buckets.add()
            bucket.lower_threshold_inclusive = -math.inf if i == 0 else self.left + (i - 1) * width
            bucket.upper_threshold_exclusive = (
                math.inf if i == self.bins + 1 else self.left + i * width
            )
            bucket.num_weighted_examples.value = acc[0, i]
            bucket.total_weighted_label.value = acc[1, i]
            bucket.total_weighted_refined_prediction.value = acc[2, i]
        return {self.key: buckets}


THIS_MODULE = __name__


def regression_plot_configs(buckets: int) -> list[tuple[str, str, str]]:
    """(class name, module, config) of a regression model's two plots, their ranges left
    for `with_label_ranges` to fill from the eval data."""
    return [
        ("CalibrationPlot", "", f'"num_buckets": {buckets}'),
        ("ResidualHistogram", THIS_MODULE, ""),
    ]


def residual_bins(examples: int) -> int:
    """How many residual bins an eval split of `examples` fills (RESIDUAL_SPREAD's note)."""
    return int(min(RESIDUAL_BINS, max(MIN_BINS, round(2 * math.sqrt(examples)))))


def label_ranges(labels: np.ndarray) -> dict[str, tuple[float, float]]:
    """{plot class: (left, right)} from the eval split's labels: predicted against actual
    over the labels' range, residuals over ±RESIDUAL_SPREAD standard deviations."""
    labels = np.asarray(labels, np.float64)
    labels = labels[np.isfinite(labels)]
    if not labels.size:
        raise ValueError("the eval split has no finite labels to range the regression plots")
    low, high = float(labels.min()), float(labels.max())
    if high <= low:
        high = low + 1.0  # one label value: any range around it
    spread = float(labels.std()) or (high - low)
    return {
        "CalibrationPlot": (low, high),
        "ResidualHistogram": (-RESIDUAL_SPREAD * spread, RESIDUAL_SPREAD * spread),
    }


def with_label_ranges(eval_config_json: str, labels: np.ndarray) -> str:
    """The Evaluator's eval config (JSON, as TFX passes it) with every regression plot's
    `left` and `right` set from the eval split's `labels`, and the residual histogram's
    bins from their count (plots that name their own range keep it)."""
    config = json.loads(eval_config_json)
    ranges: dict[str, tuple[float, float]] | None = None
    for spec in config.get("metrics_specs", []) or config.get("metricsSpecs", []):
        if not _is_regression(spec):
            continue  # a classifier's calibration plot keeps TFMA's [0, 1]
        for metric in spec.get("metrics", []):
            name = metric.get("class_name") or metric.get("className")
            if name not in ("CalibrationPlot", "ResidualHistogram"):
                continue
            settings = json.loads("{" + metric.get("config", "") + "}")
            if "left" in settings and "right" in settings:
                continue
            ranges = ranges or label_ranges(labels)
            settings["left"], settings["right"] = ranges[name]
            if name == "ResidualHistogram":
                settings.setdefault("bins", residual_bins(len(labels)))
            metric["config"] = json.dumps(settings)[1:-1]
    return json.dumps(config)


def _is_regression(spec: dict) -> bool:
    """A spec holding our ResidualHistogram is a regression model's plot spec."""
    return any(
        (m.get("class_name") or m.get("className")) == "ResidualHistogram"
        for m in spec.get("metrics", [])
    )


def eval_labels(files: list[str], compression: str, label_feature: str) -> np.ndarray:
    """Every value of the raw `label_feature` in the TFRecord `files` (float or int)."""
    import tensorflow as tf

    from components.example_gen.layout import sequential_records

    found: list[np.ndarray] = []
    for dtype in (tf.float32, tf.int64):
        try:
            for batch in sequential_records(files, compression).batch(8192):
                parsed = tf.io.parse_example(batch, {label_feature: tf.io.VarLenFeature(dtype)})
                found.append(parsed[label_feature].values.numpy().astype(np.float64))
        except tf.errors.InvalidArgumentError:
            found = []  # the label is of the other type
            continue
        break
    labels = np.concatenate(found) if found else np.zeros(0)
    if not labels.size:
        raise ValueError(f"no values of the label {label_feature!r} in {files[0]} ...")
    return labels
