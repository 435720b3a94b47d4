"""TFX's Evaluator, with slicing by bucket and per-slice blessing rules.

TFMA's metrics of every slice the eval config names are computed and its
thresholds checked (by components/evaluation/fast/, which computes them itself when it
covers the config, else runs TFX's executor); this
executor then (1) checks the per-slice rules
(components/evaluation/slicing/rules.py) on TFMA's output, (2) writes `slices.json`
beside TFMA's output (every slice's metrics for both models, the rules and
the failures: what the model card shows), and (3) when a rule or TFMA's own
threshold fails, records the model NOT blessed with a message that names each
failing slice and both numbers, as the blessing's `blessing_message` custom
property and in the log.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from absl import logging
from tfx import types
from tfx.components.evaluator import component as tfx_evaluator
from tfx.components.evaluator import constants
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, component_spec
from tfx.types import standard_component_specs as specs
from tfx.utils import io_utils

from components.base import component
from components.evaluation.fast import executor as fast_executor
from components.evaluation.fast.columns import Unsupported
from components.evaluation.pictures import write_pictures
from components.evaluation.regression_plots import eval_labels, with_label_ranges
from components.evaluation.slicing.rules import (
    BASELINE,
    CANDIDATE,
    OVERALL,
    SliceFailure,
    SliceMetrics,
    SliceRules,
    bucketed,
    check_slices,
    slice_name,
)
from components.io.pieces import example_files

SLICE_RULES_KEY = "slice_rules"
# The raw label column: a regression model's plots take their ranges from its values.
LABEL_FEATURE_KEY = "label_feature"
SLICES_FILE = "slices.json"
# Custom property of the ModelBlessing: why the model was not blessed ("" when it was).
MESSAGE_PROPERTY = constants.ARTIFACT_PROPERTY_BLESSING_MESSAGE_KEY


def _metric_label(key: Any) -> str:
    """A metric's name, with its class for per-class (binarized) metrics."""
    name = key.name
    if key.HasField("sub_key"):
        sub = key.sub_key
        if sub.HasField("class_id"):
            name += f"[class {sub.class_id.value}]"
        elif sub.HasField("top_k"):
            name += f"[top {sub.top_k.value}]"
    return name


def read_slice_metrics(evaluation_uri: str) -> SliceMetrics:
    """slice name -> model name -> metric -> value, from TFMA's output (no diff metrics)."""
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.slicer import slicer_lib

    found: SliceMetrics = {}
    for record in tfma.load_metrics(evaluation_uri):
        name = slice_name(slicer_lib.deserialize_slice_key(record.slice_key))
        models = found.setdefault(name, {})
        for kv in record.metric_keys_and_values:
            if kv.key.is_diff or not kv.value.HasField("double_value"):
                continue
            models.setdefault(kv.key.model_name, {})[_metric_label(kv.key)] = float(
                kv.value.double_value.value
            )
    return found


def overall_failures(evaluation_uri: str, metrics: SliceMetrics) -> list[str]:
    """TFMA's own threshold failures (the overall thresholds, and any on slices), each
    naming its slice, with both numbers."""
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.slicer import slicer_lib

    result = tfma.load_validation_result(evaluation_uri)
    messages = []
    named = [
        (slice_name(slicer_lib.deserialize_slice_key(v.slice_key)), v)
        for v in result.metric_validations_per_slice
    ]
    # In slice order, the whole split first: the order TFMA combined them in varies.
    for where, per_slice in sorted(named, key=lambda n: (n[0] != OVERALL, n[0])):
        models = metrics.get(where, {})
        where = where if where == OVERALL else f"slice {where}"
        for failure in per_slice.failures:
            name = failure.metric_key.name
            value = failure.metric_value.double_value.value
            threshold = failure.metric_threshold
            if failure.metric_key.is_diff:
                candidate = models.get(CANDIDATE, {}).get(name, math.nan)
                baseline = models.get(BASELINE, {}).get(name, math.nan)
                allowed = threshold.change_threshold.absolute.value
                messages.append(
                    f"{where}: {name} {candidate:.4f} against the baseline's {baseline:.4f}, "
                    f"a change of {value:+.4f} (required: {allowed:+g} or better)"
                )
            else:
                bounds = threshold.value_threshold
                limit = (
                    f"below the floor {bounds.lower_bound.value:g}"
                    if bounds.HasField("lower_bound") and value < bounds.lower_bound.value
                    else f"above the ceiling {bounds.upper_bound.value:g}"
                )
                messages.append(f"{where}: {name} {value:.4f} is {limit}")
    if not result.validation_ok and not messages:
        # e.g. a threshold's metric that was not computed: never bless silently.
        messages.append(f"TFMA's validation failed: {result}".strip())
    return messages


def _set_blessing(blessing: types.Artifact, blessed: bool) -> None:
    for name in (constants.BLESSED_FILE_NAME, constants.NOT_BLESSED_FILE_NAME):
        path = os.path.join(blessing.uri, name)
        if fileio.exists(path):
            fileio.remove(path)
    name = constants.BLESSED_FILE_NAME if blessed else constants.NOT_BLESSED_FILE_NAME
    io_utils.write_string_file(os.path.join(blessing.uri, name), "")
    blessing.set_int_custom_property(
        constants.ARTIFACT_PROPERTY_BLESSED_KEY,
        constants.BLESSED_VALUE if blessed else constants.NOT_BLESSED_VALUE,
    )


def judge(
    evaluation_uri: str, rules: SliceRules, *, has_baseline: bool
) -> tuple[SliceMetrics, list[SliceFailure], list[str]]:
    """(every slice's metrics, failing slices, every failure's message) of an evaluation."""
    metrics = read_slice_metrics(evaluation_uri)
    slice_failures = check_slices(metrics, rules, has_baseline=has_baseline)
    messages = overall_failures(evaluation_uri, metrics) + [f.message() for f in slice_failures]
    return metrics, slice_failures, messages


class Executor(component.Executor, fast_executor.Executor):
    """The Evaluator's executor (fast path or TFX's), then the per-slice rules (module docstring)."""

    def slice_buckets(self, exec_properties: dict[str, Any]) -> dict[str, tuple[float, ...]]:
        return dict(SliceRules.from_json(exec_properties.get(SLICE_RULES_KEY)).buckets)

    def run(self, execution: component.Execution) -> None:
        rules = SliceRules.from_json(execution.properties.get(SLICE_RULES_KEY))
        _range_regression_plots(execution)
        with bucketed(rules.buckets):
            fast_executor.Executor.Do(self, *execution.args)
        blessing = execution.output(specs.BLESSING_KEY)
        evaluation_uri = execution.output(specs.EVALUATION_KEY).uri
        # The plots as the console and the model card draw them (plots.json).
        write_pictures(evaluation_uri, slice_name)
        if (
            blessing.mlmd_artifact.custom_properties.get(constants.ARTIFACT_PROPERTY_BLESSED_KEY)
            is None
        ):
            return  # no thresholds: TFX's Evaluator did not judge, nor do the rules
        has_baseline = bool(execution.inputs_of(specs.BASELINE_MODEL_KEY))
        metrics, failures, messages = judge(evaluation_uri, rules, has_baseline=has_baseline)
        io_utils.write_string_file(
            os.path.join(evaluation_uri, SLICES_FILE),
            json.dumps(
                {
                    "rules": json.loads(rules.to_json()),
                    "has_baseline": has_baseline,
                    "metrics": metrics,
                    "failures": [f.__dict__ for f in failures],
                    "messages": messages,
                },
                indent=1,
                sort_keys=True,
                default=str,
            ),
        )
        blessed = not messages
        _set_blessing(blessing, blessed)
        message = "; ".join(messages)
        blessing.set_string_custom_property(MESSAGE_PROPERTY, message)
        if blessed:
            logging.info("Blessed: every judged slice passed its rules.")
        else:
            logging.error("NOT blessed: %s", message)


def _range_regression_plots(execution: component.Execution) -> None:
    """A regression model's plots get their ranges from the eval split's labels, in the
    eval config both paths read (components/evaluation/regression_plots.py)."""
    properties = execution.properties
    label_feature = properties.get(LABEL_FEATURE_KEY)
    config_json = properties.get(specs.EVAL_CONFIG_KEY)
    if not label_feature or not config_json or "ResidualHistogram" not in config_json:
        return
    splits = json.loads(properties.get(specs.EXAMPLE_SPLITS_KEY) or "null") or ["eval"]
    examples = execution.inputs_of(specs.EXAMPLES_KEY)
    uris = [u for split in splits for u in artifact_utils.get_split_uris(examples, split)]
    files, compression = example_files(uris, Unsupported)
    labels = eval_labels(files, compression, label_feature)
    properties[specs.EVAL_CONFIG_KEY] = with_label_ranges(config_json, labels)


class TfmaExecutor(Executor):
    """The same executor with its fast path turned off: TFX's executor (TFMA over Beam),
    then the per-slice rules. The reference the fast path is measured and tested
    against (benchmarks/slicing_cost.py, tests/e2e/test_slices_e2e.py)."""

    def _fast(self, *args: Any) -> None:
        raise Unsupported("the fast path is turned off (TfmaExecutor)")


class SlicedEvaluatorSpec(specs.EvaluatorSpec):
    PARAMETERS = {
        **specs.EvaluatorSpec.PARAMETERS,
        SLICE_RULES_KEY: component_spec.ExecutionParameter(type=str, optional=True),
        LABEL_FEATURE_KEY: component_spec.ExecutionParameter(type=str, optional=True),
    }


class Evaluator(component.Component, tfx_evaluator.Evaluator):
    """TFX's Evaluator (same id, inputs and outputs) with `slice_rules` (SliceRules JSON)."""

    SPEC_CLASS = SlicedEvaluatorSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
    ENCODE = {"slice_rules": SliceRules.to_json}
