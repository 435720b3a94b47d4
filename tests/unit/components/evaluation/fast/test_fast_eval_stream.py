"""components.evaluation.fast, batch by batch: the combiners' accumulators and the slices
give the same results whether the examples come in one batch or in many."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from google.protobuf import json_format, message
from test_fast_eval import SLICING_SPECS, TAXI_BUCKETS, slicing_examples

from components.evaluation.fast import executor, metrics, slices
from components.evaluation.fast.accumulators import SliceAccumulators
from components.evaluation.fast.columns import Columns, subset
from components.evaluation.regression_plots import with_label_ranges
from pipeline.config import EvalThresholds
from pipeline.datasets import dataset_config
from pipeline.eval_config import eval_config

# Uneven splits: a batch of one, a prime-sized one, one longer than TFMA's Keras batch.
SPLITS = (1, 7, 1500, 13)


def _defaults(config: tfma.EvalConfig, baseline: bool = False) -> tfma.EvalConfig:
    return tfma.utils.update_eval_config_with_defaults(
        config, has_baseline=baseline, rubber_stamp=True
    )


def _batches(n: int, splits: tuple[int, ...] = SPLITS) -> list[np.ndarray]:
    """Rows 0..n-1 cut at the `splits` sizes in turn, the rest in one batch."""
    bounds = np.cumsum(splits)
    return np.split(np.arange(n), bounds[bounds < n])


def _plain(value):
    """A result value as plain numbers, exactly (protos field by field, NaN as a string)."""
    if isinstance(value, message.Message):
        value = json_format.MessageToDict(value, preserving_proto_field_name=True)
    if isinstance(value, dict):
        return {repr(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, (float, np.floating)) and math.isnan(value):
        return "nan"
    return value.item() if isinstance(value, np.generic) else value


def _combined(separated, columns_by_model: dict, batches: list[np.ndarray]) -> dict:
    accumulators = SliceAccumulators(separated)
    for rows in batches:
        accumulators.add({name: subset(c, rows) for name, c in columns_by_model.items()})
    assert accumulators.examples == sum(len(rows) for rows in batches)
    return {repr(k): _plain(v) for k, v in accumulators.results().items()}


def _binary_columns(rng, n: int, fractional: bool) -> Columns:
    labels = rng.random(n) if fractional else rng.integers(0, 2, n).astype(np.float64)
    predictions = np.clip(rng.random(n) + (labels - 0.5) * 0.4, 0, 1)
    predictions[:3] = [0.5, 0.0, 1.0]  # on the threshold and both edges
    return Columns(labels, predictions)


def _digits_columns(rng, n: int) -> Columns:
    labels = rng.integers(0, 10, n)
    scores = rng.random((n, 10)).astype(np.float32)
    scores[np.arange(n), labels] += rng.random(n).astype(np.float32)
    predictions = (scores / scores.sum(axis=1, keepdims=True)).astype(np.float32)
    return Columns(
        labels.astype(np.float64), predictions.astype(np.float64), labels.dtype, np.float32
    )


def _regression_columns(rng, n: int) -> Columns:
    labels = (rng.random(n) * 300).astype(np.float32)
    predictions = (labels + rng.normal(0, 40, n)).astype(np.float32)
    return Columns(
        labels.astype(np.float64), predictions.astype(np.float64), np.float32, np.float32
    )


def _regression_config() -> tfma.EvalConfig:
    thresholds = EvalThresholds(
        metric="RootMeanSquaredError",
        lower_bound=None,
        upper_bound=100.0,
        extra_metrics=("MeanAbsoluteError", "MeanSquaredError"),
    )
    taxi = dataset_config("taxi").replace(slicing=None, thresholds=thresholds)
    # The plots' ranges, as the Evaluator sets them from the eval split's labels.
    ranged = with_label_ranges(json_format.MessageToJson(eval_config(taxi)), np.array([0, 300]))
    return _defaults(json_format.Parse(ranged, tfma.EvalConfig()))


@pytest.mark.parametrize(
    "case", ["taxi", "taxi fractional labels", "taxi with baseline", "digits", "regression"]
)
def test_one_batch_or_many_give_identical_combiner_outputs(case):
    """Every combiner the fast path fills (histogram, confusion matrices, example count,
    Keras, multi-class confusion, regression errors): the same bits from one batch as
    from uneven batches, since each sum is taken one example after another."""
    rng = np.random.default_rng(7)
    n = 3000
    if case.startswith("taxi"):
        baseline = case.endswith("baseline")
        config = _defaults(eval_config(dataset_config("taxi")), baseline)
        names = [spec.name for spec in config.model_specs]
        columns = {name: _binary_columns(rng, n, "fractional" in case) for name in names}
    elif case == "digits":
        config = _defaults(eval_config(dataset_config("digits")))
        columns = {"": _digits_columns(rng, n)}
    else:
        config = _regression_config()
        columns = {"": _regression_columns(rng, n)}
    separated = metrics.computations(config)
    whole = _combined(separated, columns, [np.arange(n)])
    assert whole == _combined(separated, columns, _batches(n))
    assert whole == _combined(separated, columns, _batches(n, (512,) * 10))
    # And the finished metrics (derived, diffs) are those of the one-step fill.
    baseline = tfma.utils.get_baseline_model_spec(config)
    one_step = metrics.slice_metrics(separated, columns, baseline.name if baseline else None)
    accumulators = SliceAccumulators(separated)
    for rows in _batches(n):
        accumulators.add({name: subset(c, rows) for name, c in columns.items()})
    streamed = metrics.finish(
        separated, accumulators.results(), baseline.name if baseline else None
    )
    assert _plain(streamed[1]) == _plain(one_step[1])


def test_batch_slices_are_the_slices_of_every_example_in_the_same_order():
    """Each batch's slices, offset by the batch's start, add up to the slices of all
    examples at once; `ordered` lists the keys in the order `slices` does."""
    import tensorflow as tf

    examples = slicing_examples(300)
    config = tfma.EvalConfig(slicing_specs=SLICING_SPECS)
    whole = slices.SliceFeatures(config, TAXI_BUCKETS)
    whole.add(tf.constant(examples))
    expected = whole.slices()
    streamed = slices.SliceFeatures(config, TAXI_BUCKETS)
    found: dict[tuple, list[int]] = {}
    for rows in _batches(len(examples), (1, 50, 64)):
        batch = streamed.batch_slices(tf.constant([examples[i] for i in rows]))
        for key, within in batch.items():
            found.setdefault(key, []).extend(rows[within].tolist())
    assert streamed.examples == whole.examples == 300
    assert {k: v.tolist() for k, v in expected.items()} == found
    assert streamed.ordered(found) == list(expected)
    assert streamed.ordered(reversed(list(found))) == list(expected)


def test_evaluate_streams_batches_to_the_same_results_as_one_batch():
    """executor.evaluate on one batch and on many: the same slices in the same order,
    the same counts and the same metrics and plots, bit for bit."""
    import tensorflow as tf

    examples = slicing_examples(700)
    config = _defaults(eval_config(dataset_config("taxi")), baseline=True)
    config.slicing_specs.append(SLICING_SPECS[4])  # crossed, with several values per example
    rng = np.random.default_rng(5)
    columns = {spec.name: _binary_columns(rng, 700, False) for spec in config.model_specs}
    results = []
    for splits in ((700,), (1, 7, 100, 333)):
        features = slices.SliceFeatures(config, TAXI_BUCKETS)
        batches = [
            (
                {name: subset(c, rows) for name, c in columns.items()},
                features.batch_slices(tf.constant([examples[i] for i in rows])),
            )
            for rows in _batches(700, splits)
        ]
        results.append(executor.evaluate(config, batches, features.ordered))
    one, many = results
    assert [key for key, _ in many.sliced] == [key for key, _ in one.sliced]
    assert many.counts == one.counts and len(one.counts) > 8
    assert one.counts[()] == 700
    assert _plain(dict(many.sliced)) == _plain(dict(one.sliced))
