"""The Evaluator's fast path against TFX's own executor (TFMA) on the same models and examples.

One pipeline run on the 3,000-row sample trains a model and evaluates it (the fast
path, no baseline); a `--no-cache` rerun trains another and evaluates it against the
first as baseline. Each of those evaluations is then repeated by TFX's stock executor
on the same inputs: every metric must agree to 1e-6, the validation result and the
blessing must be the same, and the same files must be written.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from e2e_support import small_config, write_sample
from evaluator_runs import evaluator_inputs, file_names, metric_values, plot_values, run_executor

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory):
    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("fast_eval")
    write_sample(tmp / "data")
    # The whole-split evaluation (no slicing); taxi's slicing on the fast path against
    # TFMA is tests/e2e/test_slices_e2e.py's.
    config = small_config(tmp).replace(slicing=None)
    first = run_local(config, printer=lambda _: None)
    second = run_local(config.replace(enable_cache=False), printer=lambda _: None)
    return config, first, second


def test_pipeline_blesses_and_pushes_through_the_fast_paths(two_runs):
    """Both runs evaluated on the fast path (first run, then against the first as
    baseline), were blessed, and their models pushed."""
    config, first, second = two_runs
    for summary in (first, second):
        assert summary.blessed is True
        assert summary.pushed is True and summary.pushed_model
    assert "Evaluator" in second.executed
    logs = "".join(p.read_text() for p in (Path(config.run_dir) / "logs").glob("*.log"))
    assert logs.count("Evaluator: fast path") == 2
    assert logs.count("StatisticsGen: in-process pass") == 2


@pytest.mark.parametrize("baseline", [False, True], ids=["first-run", "against-baseline"])
def test_fast_path_equals_tfma(two_runs, baseline, tmp_path, caplog):
    import tensorflow_model_analysis as tfma
    from tfx.components.evaluator import executor as stock

    from components.evaluation.fast import executor as fast

    config, _, _ = two_runs
    inputs, properties, _ = evaluator_inputs(config)
    assert inputs.get("baseline_model"), "the rerun must evaluate against a baseline"
    if not baseline:  # as on a first run
        inputs = {k: v for k, v in inputs.items() if k != "baseline_model"}
    with caplog.at_level(logging.INFO):
        ours_uri, ours_blessing = run_executor(fast.Executor, inputs, properties, tmp_path / "ours")
    assert "Evaluator: fast path" in caplog.text
    tfma_uri, tfma_blessing = run_executor(stock.Executor, inputs, properties, tmp_path / "tfma")

    ours, theirs = metric_values(ours_uri), metric_values(tfma_uri)
    assert ours.keys() == theirs.keys()
    assert len(ours) >= 3
    for key, value in theirs.items():
        if isinstance(value, float):
            assert ours[key] == pytest.approx(value, abs=1e-6), key
        else:
            assert ours[key] == value, key
    # The plots (ROC, PR and calibration): every count and sum, candidate and baseline.
    plots, their_plots = plot_values(ours_uri), plot_values(tfma_uri)
    assert plots.keys() == their_plots.keys()
    # TFMA writes its default plots under one unnamed key per model, by field.
    fields = {key[2].split(".")[1] for key in plots}
    assert {"confusionMatrixAtThresholds", "calibrationHistogramBuckets"} <= fields
    assert any("baseline" in key[1] for key in plots) == baseline
    for key, value in their_plots.items():
        assert plots[key] == pytest.approx(value, abs=1e-6), key
    assert tfma.load_validation_result(ours_uri) == tfma.load_validation_result(tfma_uri)
    assert ours_blessing.get_int_custom_property(
        "blessed"
    ) == tfma_blessing.get_int_custom_property("blessed")
    assert file_names(ours_blessing.uri) == file_names(tfma_blessing.uri)
    assert file_names(ours_uri) == file_names(tfma_uri)


def _statistics(executor_class, inputs, properties, out: Path):
    from tensorflow_metadata.proto.v0 import statistics_pb2
    from tfx.dsl.components.base import base_beam_executor
    from tfx.types import standard_artifacts

    artifact = standard_artifacts.ExampleStatistics()
    artifact.uri = str(out)
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=[], tmp_dir=str(out / "tmp"), unique_id="1"
    )
    executor_class(context).Do(inputs, {"statistics": [artifact]}, dict(properties))
    protos = {}
    for split_dir in sorted(out.glob("Split-*")):
        assert file_names(str(split_dir)) == ["FeatureStats.pb"]
        proto = statistics_pb2.DatasetFeatureStatisticsList()
        proto.ParseFromString((split_dir / "FeatureStats.pb").read_bytes())
        protos[split_dir.name] = proto
    return artifact, protos


def _without_sums(proto):
    """A copy with every numeric feature's mean and std_dev cleared (compared apart)."""
    copy = type(proto)()
    copy.CopyFrom(proto)
    sums = []
    for dataset in copy.datasets:
        for feature in dataset.features:
            if feature.HasField("num_stats"):
                sums += [feature.num_stats.mean, feature.num_stats.std_dev]
                feature.num_stats.ClearField("mean")
                feature.num_stats.ClearField("std_dev")
    return copy, sums


def test_in_process_statistics_equal_statistics_gen(two_runs, tmp_path, caplog):
    """Every field identical, except numeric means and standard deviations (float sums in
    another order), which agree to 1e-12 relative."""
    from tfx.components.statistics_gen import executor as stock

    from components.fast.stats import executor as fast

    config, _, _ = two_runs
    inputs, properties, _ = evaluator_inputs(config, node="StatisticsGen")
    with caplog.at_level(logging.INFO):
        ours_artifact, ours = _statistics(fast.Executor, inputs, properties, tmp_path / "ours")
    # The ingest recorded the examples' layout: TensorFlow decoded them, not tfx_bsl.
    assert "StatisticsGen: in-process pass (the layout's decoder)" in caplog.text
    stock_artifact, theirs = _statistics(stock.Executor, inputs, properties, tmp_path / "stock")
    assert ours.keys() == theirs.keys() == {"Split-train", "Split-eval"}
    for split in theirs:
        ours_rest, ours_sums = _without_sums(ours[split])
        their_rest, their_sums = _without_sums(theirs[split])
        assert ours_rest == their_rest, split
        assert ours_sums == pytest.approx(their_sums, rel=1e-12), split
    assert ours_artifact.split_names == stock_artifact.split_names
    assert ours_artifact.span == stock_artifact.span
    for name in ("sample_rate_by_split", "stats_dashboard_link"):
        assert ours_artifact.get_custom_property(name) == stock_artifact.get_custom_property(name)
