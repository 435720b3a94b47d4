"""TFMA's internals behind the fast Evaluator (components/evaluation/fast/): the combiners it fills
from columns, and the evaluator's own steps after them."""

from __future__ import annotations

from typing import Any

from compat import check_version, private, private_attribute, resolve

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

# Instance attributes the fast Evaluator reads: what a combiner was built with (to refuse
# what it does not implement, and to fill it as TFMA would), and the Keras accumulator's
# batch lists. Read through `attribute`, which accepts only the names registered here.
_REGISTERED: set[tuple[type, str]] = set()


def _instance_attributes(owner: str, why: str, *names: str) -> None:
    cls = resolve(owner)
    for name in names:
        private_attribute(LIBRARY, f"{owner}.{name}", why)
        _REGISTERED.add((cls, name))


_SETTINGS = "what the combiner was built with: the fast Evaluator refuses or fills it by them"
_instance_attributes(
    f"{_METRICS}.mean_regression_error._MeanRegressionErrorCombiner",
    _SETTINGS,
    "_aggregation_type",
    "_class_weights",
    "_metric_key",
)
_instance_attributes(
    f"{_METRICS}.calibration_histogram._CalibrationHistogramCombiner",
    _SETTINGS,
    "_aggregation_type",
    "_class_weights",
    "_key",
    "_fractional_labels",
    "_num_buckets",
    "_prediction_based_bucketing",
    "_left",
    "_range",
)
_instance_attributes(
    f"{_METRICS}.binary_confusion_matrices._BinaryConfusionMatrixCombiner",
    _SETTINGS,
    "_aggregation_type",
    "_class_weights",
    "_key",
    "_example_id_key",
    "_extract_label_prediction_and_weight",
    "_enable_fractional_labels",
    "_binary_confusion_matrices",
)
_instance_attributes(
    "tensorflow_model_analysis.contrib.aggregates.binary_confusion_matrices.BinaryConfusionMatrices",
    "the thresholds the confusion matrices are computed at",
    "_thresholds",
)
_instance_attributes(
    f"{_METRICS}.tf_metric_wrapper._CompilableMetricsCombiner",
    _SETTINGS,
    "_output_names",
    "_sub_key",
    "_aggregation_type",
    "_class_weights",
    "_loss_configs",
    "_custom_objects",
)
_instance_attributes(
    f"{_METRICS}.tf_metric_wrapper._CompilableMetricsCombiner",
    "TFMA's batch step of Keras metrics (update_state, weights added up), run on whole columns",
    "_process_batch",
)
_instance_attributes(
    f"{_METRICS}.tf_metric_accumulators.TFMetricsAccumulator",
    "the Keras metrics accumulator's batch size and input lists, filled a batch at a time",
    "_desired_batch_size",
    "_inputs",
)


def attribute(instance: Any, name: str) -> Any:
    """`instance.<name>` for a private attribute registered above on its class or a base;
    any other name is refused, so every private read of TFMA is in the list."""
    if not any((cls, name) in _REGISTERED for cls in type(instance).__mro__):
        raise AttributeError(
            f"{type(instance).__name__}.{name} is not a TFMA attribute compat/tfma.py registers"
        )
    return getattr(instance, name)
