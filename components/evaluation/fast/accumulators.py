"""TFMA's metric combiners as accumulators fed one scored batch at a time.

Each accumulator repeats one combiner's `add_input` for a whole batch with array
arithmetic and keeps only what that combiner keeps (bucket sums, confusion-matrix
cells, a count, an error sum, Keras weights), so the Evaluator holds no column of
the evaluated split: a batch is scored, each slice's accumulators take its rows,
and the batch is dropped. `result()` hands the accumulator to the combiner's own
`extract_output`. The combiners repeated are `_CalibrationHistogramCombiner`,
`_BinaryConfusionMatrixCombiner`, the mean regression error combiners,
`_ExampleCountCombiner` and `_MultiClassConfusionMatrixCombiner` (same bucket
formula in float64, per-class labels as TFMA's `select_class_id`); Keras metrics
run TFMA's own batch step on batches of TFMA's size.

Every float sum is taken in example order, one example after another as TFMA's
`add_input` does (`np.add.at`, which adds in index order), never pairwise: so
splitting the examples into batches anywhere gives the same bits, and the sums
differ from TFMA's only where its Beam bundles order the examples differently.
The accumulators of consecutive pieces of the examples `merge` by adding their sums
(Keras metrics and residuals through their combiners' own merge), always in the
same piece order (components/evaluation/fast/pieces.py).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from tensorflow_model_analysis.contrib.aggregates import binary_confusion_matrices as bcm
from tensorflow_model_analysis.evaluators import metrics_plots_and_validations_evaluator as mpv
from tensorflow_model_analysis.metrics import calibration_histogram, metric_types
from tensorflow_model_analysis.metrics import multi_class_confusion_matrix_metrics as mcm

from compat import tfma as tfma_internals
from components.evaluation.fast import plots
from components.evaluation.fast.columns import Columns, Unsupported
from components.evaluation.regression_plots import ResidualCombiner

read = tfma_internals.attribute  # TFMA's private attributes, registered in compat/tfma.py

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
# A regression model's residual histogram (components/evaluation/regression_plots.py).
RESIDUALS = ResidualCombiner


class Accumulator(Protocol):
    """One combiner's state over the examples added so far."""

    def add(self, columns: Columns) -> None:
        """The next examples (in example order)."""

    def merge(self, other: Any) -> None:
        """Adds `other`'s state (the same combiner's, over the examples after these)."""

    def result(self) -> dict[Any, Any]:
        """The combiner's `extract_output` of everything added."""


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
    if np.all((labels == 0.0) | (labels == 1.0)):
        return labels, predictions, weights  # the split below keeps each example as it is
    # Each example splits into (0, p, w*(1-l)) then (1, p, w*l), in TFMA's order (so
    # that sums in example order do not depend on where batches split); zero weights
    # dropped.
    both_weights = np.stack([weights * (1.0 - labels), weights * labels], axis=1).reshape(-1)
    keep = both_weights != 0.0
    both_labels = np.tile(np.array([0.0, 1.0]), len(labels))
    return both_labels[keep], np.repeat(predictions, 2)[keep], both_weights[keep]


def _add_in_order(sums: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """sums[index[i]] += values[i] for each i in turn: one example after another, as
    TFMA adds, so any split into batches gives the same sums (np.sum adds pairwise)."""
    np.add.at(sums, index, values)


class Histogram:
    """`_CalibrationHistogramCombiner`: per bucket, the examples' count and their sums of
    label, prediction and weight."""

    def __init__(self, combiner: Any) -> None:
        self.combiner = combiner
        size = read(combiner, "_num_buckets") + 2  # below the range, n buckets, above
        self.count = np.zeros(size, np.int64)
        self.sums = np.zeros((3, size))  # labels * weights, predictions * weights, weights

    def add(self, columns: Columns) -> None:
        combiner = self.combiner
        labels, predictions, weights = _triples(
            columns,
            read(combiner, "_fractional_labels"),
            read(combiner, "_key").sub_key,
        )
        n = read(combiner, "_num_buckets")
        values = predictions if read(combiner, "_prediction_based_bucketing") else labels
        index = (values - read(combiner, "_left")) / read(combiner, "_range") * n + 1
        buckets = np.where(index < 0, 0, np.where(index >= n + 1, n + 1, np.floor(index)))
        buckets = buckets.astype(np.int64)
        self.count += np.bincount(buckets, minlength=len(self.count))
        for sums, values in zip(
            self.sums, (labels * weights, predictions * weights, weights), strict=True
        ):
            _add_in_order(sums, buckets, values)

    def merge(self, other: Histogram) -> None:
        self.count += other.count
        self.sums += other.sums

    def result(self) -> dict[Any, Any]:
        filled = np.flatnonzero(self.count)
        accumulator = {
            b: calibration_histogram.Bucket(b, *sums)
            for b, sums in zip(filled.tolist(), self.sums[:, filled].T.tolist(), strict=True)
        }
        return self.combiner.extract_output(accumulator)


class Confusion:
    """`_BinaryConfusionMatrixCombiner` (exact thresholds): per threshold, the weights of
    true negatives, false positives, false negatives and true positives."""

    def __init__(self, combiner: Any) -> None:
        self.combiner = combiner
        self.thresholds = list(read(read(combiner, "_binary_confusion_matrices"), "_thresholds"))
        self.cells = np.zeros((len(self.thresholds), 4))  # tn, fp, fn, tp

    def add(self, columns: Columns) -> None:
        combiner = self.combiner
        fractional = read(combiner, "_enable_fractional_labels")
        labels, predictions, weights = _triples(columns, fractional, read(combiner, "_key").sub_key)
        for cells, threshold in zip(self.cells, self.thresholds, strict=True):
            positive = labels == 1.0 if fractional else labels > threshold
            cell = 2 * positive.astype(np.int64) + (predictions > threshold)
            _add_in_order(cells, cell, weights)

    def merge(self, other: Confusion) -> None:
        self.cells += other.cells

    def result(self) -> dict[Any, Any]:
        accumulator = {
            threshold: tfma_internals.ThresholdEntry(
                bcm.Matrix(tp=float(tp), tn=float(tn), fp=float(fp), fn=float(fn)),
                tp_examples=[],
                tn_examples=[],
                fp_examples=[],
                fn_examples=[],
            )
            for threshold, (tn, fp, fn, tp) in zip(self.thresholds, self.cells, strict=True)
        }
        return self.combiner.extract_output(accumulator)


class ExampleCount:
    """`_ExampleCountCombiner`: the number of examples (every weight is 1.0)."""

    def __init__(self, combiner: Any) -> None:
        self.combiner = combiner
        self.count = 0

    def add(self, columns: Columns) -> None:
        self.count += len(columns.labels)

    def merge(self, other: ExampleCount) -> None:
        self.count += other.count

    def result(self) -> dict[Any, Any]:
        return self.combiner.extract_output(np.float64(self.count))


class RegressionError:
    """`_MeanAbsoluteErrorCombiner` / `_MeanSquaredErrorCombiner`: each example's error
    as TFMA computes it from its label and prediction arrays (in their dtypes: the
    difference, then its absolute value, or its norm squared after float()), summed;
    NaN errors skipped, every weight 1.0."""

    def __init__(self, combiner: Any) -> None:
        self.combiner = combiner
        self.total = np.zeros(1)
        self.count = 0

    def add(self, columns: Columns) -> None:
        labels, predictions = _binary(columns, None)
        difference = labels.astype(columns.label_dtype) - predictions.astype(
            columns.prediction_dtype
        )
        if isinstance(self.combiner, ABSOLUTE_ERROR):
            errors = np.absolute(difference).astype(np.float64)
        else:  # np.linalg.norm of one value: sqrt(x * x) in its dtype
            errors = np.sqrt(difference * difference).astype(np.float64) ** 2
        errors = errors[~np.isnan(errors)]
        _add_in_order(self.total, np.zeros(errors.size, np.intp), errors)
        self.count += errors.size

    def merge(self, other: RegressionError) -> None:
        self.total += other.total
        self.count += other.count

    def result(self) -> dict[Any, Any]:
        accumulator = self.combiner.create_accumulator()
        accumulator.total_regression_error = float(self.total[0])
        accumulator.total_example_weights = float(self.count)
        return self.combiner.extract_output(accumulator)


class Keras:
    """`_CompilableMetricsCombiner`: TFMA's own batch step (`_process_batch`: each
    metric's `update_state`, its weights added to the accumulator) on consecutive
    batches of TFMA's size across the added examples, the arrays shaped as TFMA stacks
    its examples' (label (n, 1), prediction (n, classes), weight (n, 1) of float32
    ones) in the model's dtypes. The last, partial batch runs in `extract_output`."""

    def __init__(self, combiner: Any) -> None:
        self.combiner = combiner
        combiner.setup()
        self.accumulator = combiner.create_accumulator()

    def add(self, columns: Columns) -> None:
        n = len(columns.labels)
        predictions = columns.predictions.astype(columns.prediction_dtype)
        stacked = (
            columns.labels.astype(columns.label_dtype).reshape(n, 1),
            predictions.reshape(n, -1),
            np.ones((n, 1), np.float32),
        )
        size = read(self.accumulator, "_desired_batch_size")
        inputs = read(self.accumulator, "_inputs")[0]  # labels, predictions, weights lists
        start = 0
        while start < n:
            end = min(n, start + size - len(inputs[0]))
            for values, column in zip(inputs, stacked, strict=True):
                values.extend(column[start:end])
            start = end
            if len(inputs[0]) >= size:
                read(self.combiner, "_process_batch")(self.accumulator)

    def merge(self, other: Keras) -> None:
        # TFMA's merge runs each side's partial batch, then adds the metrics' weights.
        self.accumulator = self.combiner.merge_accumulators([self.accumulator, other.accumulator])

    def result(self) -> dict[Any, Any]:
        return self.combiner.extract_output(self.accumulator)


class MulticlassConfusion:
    """`_MultiClassConfusionMatrixCombiner`: per threshold, the count of each (actual,
    predicted) class pair (plots.py counts a batch; the counts add up)."""

    def __init__(self, combiner: Any) -> None:
        self.combiner = combiner
        self.matrices: dict[float, dict[Any, float]] = {}

    def add(self, columns: Columns) -> None:
        try:
            found = plots.multiclass_confusion(self.combiner, columns.labels, columns.predictions)
        except ValueError as error:
            raise Unsupported(str(error)) from error
        (batch,) = found.values()  # extract_output only keys the matrices
        for threshold, entries in batch.items():
            matrix = self.matrices.setdefault(threshold, {})
            for entry, count in entries.items():
                matrix[entry] = matrix.get(entry, 0.0) + count

    def merge(self, other: MulticlassConfusion) -> None:
        for threshold, entries in other.matrices.items():
            matrix = self.matrices.setdefault(threshold, {})
            for entry, count in entries.items():
                matrix[entry] = matrix.get(entry, 0.0) + count

    def result(self) -> dict[Any, Any]:
        matrices = mcm.Matrices()
        for threshold, entries in self.matrices.items():
            matrices[threshold] = dict(sorted(entries.items()))
        return self.combiner.extract_output(matrices)


class Residuals:
    """The project's `ResidualCombiner`: it takes whole columns itself (`add_columns`)."""

    def __init__(self, combiner: ResidualCombiner) -> None:
        self.combiner = combiner
        self.accumulator = combiner.create_accumulator()

    def add(self, columns: Columns) -> None:
        labels, predictions = _binary(columns, None)
        self.combiner.add_columns(self.accumulator, labels, predictions)

    def merge(self, other: Residuals) -> None:
        self.accumulator = self.combiner.merge_accumulators([self.accumulator, other.accumulator])

    def result(self) -> dict[Any, Any]:
        return self.combiner.extract_output(self.accumulator)


_KINDS: tuple[tuple[Any, type], ...] = (
    (RESIDUALS, Residuals),
    (MULTICLASS_CONFUSION, MulticlassConfusion),
    (HISTOGRAM, Histogram),
    (CONFUSION, Confusion),
    (KERAS, Keras),
    (REGRESSION_ERRORS, RegressionError),
    (EXAMPLE_COUNT, ExampleCount),
)


def accumulator(combiner: Any) -> Accumulator:
    """The accumulator that repeats `combiner`."""
    for kind, make in _KINDS:
        if isinstance(combiner, kind):
            return make(combiner)
    raise Unsupported(f"metric combiner {type(combiner).__name__}")


class SliceAccumulators:
    """One slice's accumulator of every combiner of the computations, each fed the
    columns of the model its computation names."""

    def __init__(self, separated: mpv.MetricComputations) -> None:
        self._accumulators = [
            (c.keys[0].model_name, accumulator(c.combiner))
            for c in separated.non_derived_computations
        ]
        self.examples = 0

    def add(self, columns_by_model: dict[str, Columns]) -> None:
        """The slice's rows of one batch, per model."""
        for model_name, each in self._accumulators:
            each.add(columns_by_model[model_name])
        self.examples += len(next(iter(columns_by_model.values())).labels)

    def merge(self, other: SliceAccumulators) -> None:
        """Adds `other` (the same computations' accumulators over later examples): sums
        of sums, so a merge in a fixed order gives the same bits wherever it runs."""
        for (_, each), (_, theirs) in zip(self._accumulators, other._accumulators, strict=True):
            each.merge(theirs)
        self.examples += other.examples

    def results(self) -> dict[metric_types.MetricKey, Any]:
        """Every combiner's output, as TFMA's combine step hands them to derived metrics."""
        found: dict[metric_types.MetricKey, Any] = {}
        for _, each in self._accumulators:
            found.update(each.result())
        return found
