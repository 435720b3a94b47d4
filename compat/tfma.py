"""TFMA's internals behind the fast Evaluator (components/evaluation/fast/): the combiners it fills
from columns, and the evaluator's own steps after them."""

from __future__ import annotations

from compat import check_version, private

LIBRARY = "tensorflow-model-analysis"
WRITTEN_FOR = "0.47.1"
check_version(LIBRARY, WRITTEN_FOR)

_METRICS = "tensorflow_model_analysis.metrics"
_EVALUATOR = "tensorflow_model_analysis.evaluators.metrics_plots_and_validations_evaluator"
_FILLED = "the fast Evaluator fills this combiner from columns, batch by batch"

CalibrationHistogramCombiner = private(
    LIBRARY, f"{_METRICS}.calibration_histogram._CalibrationHistogramCombiner", _FILLED
)
ExampleCountCombiner = private(LIBRARY, f"{_METRICS}.example_count._ExampleCountCombiner", _FILLED)
BinaryConfusionMatrixCombiner = private(
    LIBRARY, f"{_METRICS}.binary_confusion_matrices._BinaryConfusionMatrixCombiner", _FILLED
)
CompilableMetricsCombiner = private(
    LIBRARY, f"{_METRICS}.tf_metric_wrapper._CompilableMetricsCombiner", _FILLED
)
MeanAbsoluteErrorCombiner = private(
    LIBRARY, f"{_METRICS}.mean_regression_error._MeanAbsoluteErrorCombiner", _FILLED
)
MeanSquaredErrorCombiner = private(
    LIBRARY, f"{_METRICS}.mean_regression_error._MeanSquaredErrorCombiner", _FILLED
)
MultiClassConfusionMatrixCombiner = private(
    LIBRARY,
    f"{_METRICS}.multi_class_confusion_matrix_metrics._MultiClassConfusionMatrixCombiner",
    _FILLED,
)
ThresholdEntry = private(
    LIBRARY,
    "tensorflow_model_analysis.contrib.aggregates.binary_confusion_matrices._ThresholdEntry",
    "the confusion matrices' accumulator entries the fast Evaluator builds",
)
filter_and_separate_computations = private(
    LIBRARY,
    f"{_EVALUATOR}._filter_and_separate_computations",
    "TFMA's split of an eval config's computations into combiners and derived ones",
)
add_ci_derived_metrics = private(
    LIBRARY, f"{_EVALUATOR}._add_ci_derived_metrics", "the evaluator's step after combining"
)
remove_private_metrics = private(
    LIBRARY, f"{_EVALUATOR}._remove_private_metrics", "the evaluator's step after combining"
)
filter_by_key_type = private(
    LIBRARY, f"{_EVALUATOR}._filter_by_key_type", "splits results into metrics, plots, attributions"
)
is_metric_diffable = private(
    LIBRARY, f"{_EVALUATOR}._is_metric_diffable", "which metrics get a baseline diff"
)
is_private_metrics = private(
    LIBRARY, f"{_EVALUATOR}._is_private_metrics", "which metrics the output leaves out"
)
PREDICTIONS = private(
    LIBRARY, f"{_METRICS}.metric_util._PREDICTIONS", "a prediction output TFMA looks for"
)
LOGISTIC = private(
    LIBRARY, f"{_METRICS}.metric_util._LOGISTIC", "a prediction output TFMA looks for"
)
PROBABILITIES = private(
    LIBRARY, f"{_METRICS}.metric_util._PROBABILITIES", "a prediction output TFMA looks for"
)
LOGITS = private(LIBRARY, f"{_METRICS}.metric_util._LOGITS", "a prediction output TFMA looks for")
