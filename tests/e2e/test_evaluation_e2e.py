"""components.evaluation on a trained model: dropping the features changes no metric.

TFMA evaluates the session's taxi model (`taxi_runs.first`) on its eval split
twice, with TFMA's default extractors and with ours, through
`tfma.run_model_analysis`; every metric must be equal.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _metrics(taxi_runs, output: Path, extractors) -> dict:
    import tensorflow_model_analysis as tfma

    from pipeline.definition import eval_config

    config = tfma.utils.update_eval_config_with_defaults(
        eval_config(taxi_runs.config), has_baseline=False, rubber_stamp=True
    )
    model = tfma.default_eval_shared_model(
        eval_saved_model_path=str(Path(taxi_runs.first.model_uri) / "Format-Serving"),
        eval_config=config,
    )
    # The first run's (the retrain ingested the same data again).
    splits = Path(taxi_runs.config.pipeline_root).glob("CsvExampleGen/examples/*/Split-eval")
    split = min(splits, key=lambda p: int(p.parent.name))
    tfma.run_model_analysis(
        eval_shared_model=model,
        eval_config=config,
        data_location=str(split / "*"),
        output_path=str(output),
        extractors=extractors(model, config) if extractors else None,
    )
    (overall,) = tfma.load_metrics(str(output))  # one slice: the whole split
    return {kv.key.name: kv.value.double_value.value for kv in overall.metric_keys_and_values}


def test_dropping_features_changes_no_metric(taxi_runs, tmp_path):
    from components.evaluation import custom_extractors

    theirs = _metrics(taxi_runs, tmp_path / "default", None)
    ours = _metrics(taxi_runs, tmp_path / "ours", lambda m, c: custom_extractors(m, c, None))
    assert {"example_count", "binary_accuracy", "auc"} <= set(ours)
    assert ours == theirs
    assert ours["example_count"] > 500  # the sample's eval split, evaluated
