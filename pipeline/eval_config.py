"""The Evaluator's TFMA configuration: the blessing metric and its thresholds, the
slices, the per-slice error rates and the per-class metrics, all read from the
pipeline config (the dataset file's `evaluation:` and `slicing:`)."""

from __future__ import annotations

import tensorflow_model_analysis as tfma

from components.evaluation.regression_plots import regression_plot_configs
from components.evaluation.slicing.rules import SliceRules, metric_name
from pipeline.config import PipelineConfig


def _value_threshold(t) -> tfma.GenericValueThreshold:
    # A ceiling for error metrics (regression's RMSE), else a floor (accuracy, AUC).
    if t.upper_bound is not None:
        return tfma.GenericValueThreshold(upper_bound={"value": t.upper_bound})
    return tfma.GenericValueThreshold(lower_bound={"value": t.lower_bound})


def task(config: PipelineConfig) -> str:
    """binary, multiclass or regression: what the per-slice error rates can be."""
    if config.tabular is not None:
        return config.tabular.task
    if config.image is not None or config.thresholds.metric.startswith("SparseCategorical"):
        return "multiclass"
    if config.thresholds.upper_bound is not None:
        return "regression"
    return "binary"


def num_classes(config: PipelineConfig) -> int:
    if config.tabular is not None:
        return len(config.tabular.classes)
    if config.image is not None:
        return len(config.image.class_names)
    return 2


# Fairness Indicators' per-slice error rates, by TFMA's names: the false
# positive rate (fall-out, metric `fall_out`) and false negative rate (miss
# rate, `miss_rate`) at threshold 0.5.
ERROR_RATES = ("FallOut", "MissRate")


def slice_rules(config: PipelineConfig) -> SliceRules:
    """The Evaluator's per-slice blessing rules (components/evaluation/slicing/rules.py)."""
    s = config.slicing
    t = config.thresholds
    if s is None:
        return SliceRules(metric=metric_name(t.metric), higher_is_better=t.upper_bound is None)
    return SliceRules(
        metric=metric_name(t.metric),
        higher_is_better=t.upper_bound is None,
        by=s.by,
        buckets=dict(s.buckets),
        min_examples=s.min_examples,
        lower_bound=s.lower_bound,
        upper_bound=s.upper_bound,
        max_drop=s.max_drop,
    )


def slicing_specs(config: PipelineConfig) -> list[tfma.SlicingSpec]:
    """The whole eval split, then each slicing of the dataset file (bucketed features
    by their bucket feature)."""
    rules = slice_rules(config)
    return [tfma.SlicingSpec()] + [
        tfma.SlicingSpec(feature_keys=rules.slice_features(names)) for names in rules.by
    ]


def _error_rate_specs(config: PipelineConfig) -> list[tfma.MetricsSpec]:
    """False positive and negative rates per slice: binary as they are, multiclass
    one class against the rest (TFMA's binarize)."""
    if config.slicing is None:
        return []
    kind = task(config)
    metrics = [tfma.MetricConfig(class_name=m) for m in ERROR_RATES]
    if kind == "binary":
        return [tfma.MetricsSpec(metrics=metrics)]
    if kind == "multiclass":
        return [
            tfma.MetricsSpec(
                metrics=metrics,
                binarize=tfma.BinarizationOptions(
                    class_ids={"values": list(range(num_classes(config)))}
                ),
            )
        ]
    return []


def _per_class_specs(config: PipelineConfig) -> list[tfma.MetricsSpec]:
    """With `evaluation.per_class` (init sets it for an imbalanced label): each class's
    recall and precision-recall AUC. Binary: recall of the positive class (Recall) and
    of the negative one (Specificity); multiclass: one class against the rest."""
    kind = task(config)
    if not config.thresholds.per_class or kind not in ("binary", "multiclass"):
        return []
    if kind == "binary":
        names = ("Recall", "Specificity", "AUCPrecisionRecall")
        return [tfma.MetricsSpec(metrics=[tfma.MetricConfig(class_name=m) for m in names])]
    return [
        tfma.MetricsSpec(
            metrics=[tfma.MetricConfig(class_name=m) for m in ("Recall", "AUCPrecisionRecall")],
            binarize=tfma.BinarizationOptions(
                class_ids={"values": list(range(num_classes(config)))}
            ),
        )
    ]


# The pictures (docs/trust.md): a binary model's confusion matrices at this many
# thresholds (ROC and precision-recall curves) and its calibration in this many
# buckets of the prediction; a multiclass model's confusion matrix (argmax). Every
# slice gets them, the baseline too. A hundred points draw a smooth curve and keep
# the plots file small at dozens of slices (TFMA's default is 1,000 and 10,000).
PLOT_THRESHOLDS = 100
CALIBRATION_BUCKETS = 20


def plot_specs(config: PipelineConfig) -> list[tfma.MetricsSpec]:
    """TFMA's plot metrics for the task. A regression model's two plots
    (components/evaluation/regression_plots.py) get their ranges from the eval split
    when the Evaluator runs: the dataset file does not give the label's range."""
    kind = task(config)
    if kind == "binary":
        plots = [
            tfma.MetricConfig(
                class_name="ConfusionMatrixPlot", config=f'"num_thresholds": {PLOT_THRESHOLDS}'
            ),
            tfma.MetricConfig(
                class_name="CalibrationPlot", config=f'"num_buckets": {CALIBRATION_BUCKETS}'
            ),
        ]
    elif kind == "multiclass":
        plots = [tfma.MetricConfig(class_name="MultiClassConfusionMatrixPlot")]
    else:
        plots = [
            tfma.MetricConfig(class_name=name, module=module, config=settings)
            for name, module, settings in regression_plot_configs(CALIBRATION_BUCKETS)
        ]
    return [tfma.MetricsSpec(metrics=plots)]


def _overall_threshold(config: PipelineConfig) -> tfma.MetricThreshold:
    t = config.thresholds
    return tfma.MetricThreshold(
        value_threshold=_value_threshold(t),
        # Ignored on the first run, when no blessed baseline exists.
        change_threshold=tfma.GenericChangeThreshold(
            direction=tfma.MetricDirection.LOWER_IS_BETTER
            if t.upper_bound is not None
            else tfma.MetricDirection.HIGHER_IS_BETTER,
            absolute={"value": -t.min_change if t.upper_bound is not None else t.min_change},
        ),
    )


def _blessing_metric(config: PipelineConfig) -> tfma.MetricConfig:
    """The metric the blessing reads, its thresholds on the whole eval split. TFMA
    applies a plain `threshold` to every slice; the per-slice rules are the
    dataset file's `slicing:` (checked by components/evaluation/slicing), so with slices
    the overall thresholds are pinned to the overall slice."""
    metric, settings = config.thresholds.metric, ""
    if macro_balanced_accuracy(config):
        # Balanced accuracy is each class's recall averaged over the classes (for
        # two classes, TFMA's BalancedAccuracy): TFMA's Recall, macro-averaged by
        # its spec, under the name the dataset file gives so that every reader
        # finds it. A class's recall counts its examples given it a probability
        # over 0.5, which with many classes and spread probabilities is stricter
        # than argmax; TFMA 0.47 cannot macro-average top-1 recall (its average
        # looks up per-class keys without the top_k).
        metric, settings = "Recall", f'"name": "{metric_name(MACRO_BALANCED_ACCURACY)}"'
    if config.slicing is None:
        return tfma.MetricConfig(
            class_name=metric, config=settings, threshold=_overall_threshold(config)
        )
    return tfma.MetricConfig(
        class_name=metric,
        config=settings,
        per_slice_thresholds=[
            tfma.PerSliceMetricThreshold(
                slicing_specs=[tfma.SlicingSpec()], threshold=_overall_threshold(config)
            )
        ],
    )


# A multiclass label's `metric: BalancedAccuracy` (tfxp init writes it for an
# imbalanced one): TFMA's BalancedAccuracy is binary only.
MACRO_BALANCED_ACCURACY = "BalancedAccuracy"


def macro_balanced_accuracy(config: PipelineConfig) -> bool:
    return config.thresholds.metric == MACRO_BALANCED_ACCURACY and task(config) == "multiclass"


def _blessing_specs(config: PipelineConfig) -> list[tfma.MetricsSpec]:
    """The blessing metric's own spec when it is a macro average: TFMA averages over
    the classes given as class weights (all 1: each class counts the same), and a
    spec that also binarized would put the threshold on every class's recall."""
    if not macro_balanced_accuracy(config):
        return []
    classes = range(num_classes(config))
    return [
        tfma.MetricsSpec(
            metrics=[_blessing_metric(config)],
            aggregate=tfma.AggregationOptions(
                macro_average=True, class_weights={c: 1.0 for c in classes}
            ),
        )
    ]


def eval_config(config: PipelineConfig) -> tfma.EvalConfig:
    t = config.thresholds
    blessing = [] if macro_balanced_accuracy(config) else [_blessing_metric(config)]
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name=config.eval_signature,
                # Signature-based evaluation: TFMA loads the SavedModel's
                # signatures instead of rebuilding the Keras model layer by layer.
                model_type=tfma.constants.TF_GENERIC,
                label_key=config.transformed_label_key,
                preprocessing_function_names=["transform_features"],
            )
        ],
        slicing_specs=slicing_specs(config),
        metrics_specs=[
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(class_name="ExampleCount"),
                    *(tfma.MetricConfig(class_name=m) for m in t.extra_metrics),
                    *blessing,
                ]
            ),
            *_blessing_specs(config),
            *_error_rate_specs(config),
            *_per_class_specs(config),
            *plot_specs(config),
        ],
    )
