"""An imbalanced multiclass label: `tfxp init` blesses on balanced accuracy (Recall
macro-averaged over the classes, pipeline/eval_config.py), the fast evaluator computes
it as TFMA does, and a model that predicts the majority class fails it."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.evaluators import metrics_validator
from tensorflow_model_analysis.metrics import metric_types
from tfma_reference import assert_same_results, tfma_one_at_a_time

from components.evaluation.fast import executor, metrics
from components.evaluation.fast.columns import Columns
from pipeline.datasets import DATASET_PATH_ENV, load_dataset_file
from pipeline.eval_config import eval_config
from tfxp.init.command import run_init
from tfxp.init.inference import balanced_accuracy_floor

SHARES = {"common": 0.6, "usual": 0.25, "scarce": 0.1, "rare": 0.05}  # rarest < 10%
ROWS = 400


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> tuple[str, Path]:
    """init's output and dataset file for a generated 4-class table."""
    tmp = tmp_path_factory.mktemp("imbalanced_multiclass")
    rng = np.random.default_rng(5)
    names = list(SHARES)
    labels = rng.choice(len(names), ROWS, p=list(SHARES.values()))
    lines = [f"{x + rng.normal(0, 0.5):.3f},{rng.normal():.3f},{names[x]}" for x in labels]
    path = tmp / "kinds.csv"
    path.write_text("signal,noise,kind\n" + "\n".join(lines) + "\n")
    args = argparse.Namespace(
        name="kinds", csv=[str(path)], label="kind", data_root=str(tmp / "data" / "kinds"),
        task=None, exclude=None, link=False, force=False,
    )  # fmt: skip
    out = io.StringIO()
    mp = pytest.MonkeyPatch()
    mp.setenv(DATASET_PATH_ENV, str(tmp / "schema"))
    try:
        assert run_init(args, out=out) == 0
    finally:
        mp.undo()
    return out.getvalue(), tmp / "schema" / "kinds" / "dataset.yaml"


def _config(table):
    return load_dataset_file(table[1])


def _defaults(config: tfma.EvalConfig) -> tfma.EvalConfig:
    # As TFX's Evaluator executor prepares it (first run: no baseline).
    return tfma.utils.update_eval_config_with_defaults(config, rubber_stamp=True)


def test_init_writes_class_weights_and_a_balanced_accuracy_threshold(table):
    out, dataset_file = table
    text = dataset_file.read_text()
    assert "\nclass_weights: {" in text  # written, not a commented suggestion
    assert "imbalanced label" in out and "balanced accuracy" in out
    t = _config(table).thresholds
    assert t.metric == "BalancedAccuracy" and t.per_class
    # Four classes: predicting the majority scores 0.25; the floor closes 10% of the gap.
    assert t.lower_bound == balanced_accuracy_floor(4) == 0.325
    assert balanced_accuracy_floor(2) == 0.55  # the binary floor as before


def test_the_threshold_is_on_the_macro_average_not_on_accuracy_or_each_class(table):
    config = _defaults(eval_config(_config(table)))
    thresholds = tfma.metrics.metric_thresholds_from_metrics_specs(
        config.metrics_specs, eval_config=config
    )
    value_keys = [k for k in thresholds if not k.is_diff]
    assert len(value_keys) == 1
    [key] = value_keys
    assert key.name == "balanced_accuracy" and key.sub_key is None
    assert key.aggregation_type == metric_types.AggregationType(macro_average=True)
    # Each class's recall and PR-AUC are reported (binarized, no threshold).
    per_class = [s for s in config.metrics_specs if s.binarize.class_ids.values]
    assert {m.class_name for s in per_class for m in s.metrics} >= {"Recall", "AUCPrecisionRecall"}
    assert list(per_class[-1].binarize.class_ids.values) == [0, 1, 2, 3]


def _models(rng, labels: np.ndarray) -> dict[str, np.ndarray]:
    """Class probabilities of a model that mostly finds every class, and of one that
    gives each row the class shares (its top class always the majority)."""
    k = len(SHARES)
    scores = rng.random((len(labels), k))
    scores[np.arange(len(labels)), labels] += 1.5
    good = scores / scores.sum(axis=1, keepdims=True)
    majority = np.tile(list(SHARES.values()), (len(labels), 1))
    return {"good": good, "majority": majority}


def test_the_fast_path_computes_it_as_tfma_and_blesses_only_the_good_model(table):
    config = _defaults(eval_config(_config(table)))
    assert executor.fast_path_refusal(config) is None  # no fallback needed
    rng = np.random.default_rng(7)
    labels = rng.choice(len(SHARES), 600, p=list(SHARES.values()))
    key = tfma.metrics.MetricKey(
        "balanced_accuracy", aggregation_type=metric_types.AggregationType(macro_average=True)
    )
    ok = {}
    for name, predictions in _models(rng, labels).items():
        columns = Columns(labels.astype(np.float64), predictions)
        ours = metrics.sliced_results(metrics.computations(config), {"": columns}, None)
        expected = tfma_one_at_a_time(metrics.computations(config), labels, predictions)
        assert_same_results({**ours["metrics"][1], **ours["plots"][1]}, expected)
        # The mean over classes of the recall at TFMA's threshold (0.5), by hand.
        recalls = [np.mean(predictions[labels == c, c] > 0.5) for c in range(len(SHARES))]
        assert ours["metrics"][1][key] == pytest.approx(np.mean(recalls), abs=1e-9)
        ok[name] = metrics_validator.validate_metrics(ours["metrics"], config).validation_ok
    # The majority model's accuracy (about 0.6) would pass an accuracy floor of the
    # majority share rounded down; its balanced accuracy is 0.25 at most.
    assert ok == {"good": True, "majority": False}


def test_run_summaries_read_the_macro_average_by_its_name(table, tmp_path):
    """TFMA's own writers and loader (as the Evaluator leaves them): the summary every
    command prints reads the aggregated metric as `balanced_accuracy`, the name the
    blessing reports, not TFMA's "macro_average: true\\n_balanced_accuracy"."""
    from metadata.summary import read_eval_metrics

    config = _defaults(eval_config(_config(table)))
    rng = np.random.default_rng(9)
    labels = rng.choice(len(SHARES), 300, p=list(SHARES.values()))
    predictions = _models(rng, labels)["good"]
    columns = {"": Columns(labels.astype(np.float64), predictions)}
    sliced = metrics.slice_metrics(metrics.computations(config), columns, None, ())
    executor.write_results(str(tmp_path), config, [None], executor.Evaluated([sliced], {(): 300}))
    read = read_eval_metrics(str(tmp_path))
    key = metric_types.MetricKey(
        "balanced_accuracy", aggregation_type=metric_types.AggregationType(macro_average=True)
    )
    assert read["balanced_accuracy"] == pytest.approx(sliced[1][key], abs=1e-9)
    assert not any("\n" in name for name in read)
