"""components.evaluation.extractors on a trained model: our extractors change no metric.

TFMA evaluates the session's taxi model (`taxi_runs.first`) on its eval split
with TFMA's default extractors and with ours, through
`tfma.run_model_analysis`; every metric of every slice must be equal. The
pipeline's own evaluation (the Evaluator's output, sliced by payment type and
by trip distance bucket) must equal stock TFMA's on examples that carry the
bucket as a feature of their own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from components.evaluation.slicing.rules import OVERALL

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _first_eval_split(taxi_runs) -> Path:
    # The first run's (the retrain ingested the same data again).
    splits = Path(taxi_runs.config.pipeline_root).glob("CsvExampleGen/examples/*/Split-eval")
    return min(splits, key=lambda p: int(p.parent.name))


def _metrics(taxi_runs, output: Path, extractors, config) -> dict:
    import tensorflow_model_analysis as tfma

    config = tfma.utils.update_eval_config_with_defaults(
        config, has_baseline=False, rubber_stamp=True
    )
    model = tfma.default_eval_shared_model(
        eval_saved_model_path=str(Path(taxi_runs.first.model_uri) / "Format-Serving"),
        eval_config=config,
    )
    split = _first_eval_split(taxi_runs)
    tfma.run_model_analysis(
        eval_shared_model=model,
        eval_config=config,
        data_location=str(split / "*"),
        output_path=str(output),
        extractors=extractors(model, config) if extractors else None,
    )
    return _by_slice(str(output))[OVERALL]


def _by_slice(output: str) -> dict:
    """slice name -> metric -> value (NaN as None, so equal NaNs compare equal)."""
    import math

    from components.evaluation.slicing.evaluator import read_slice_metrics

    return {
        name: {metric: None if math.isnan(value) else value for metric, value in models[""].items()}
        for name, models in read_slice_metrics(output).items()
    }


def test_dropping_features_changes_no_metric(taxi_runs, tmp_path):
    from components.evaluation.extractors import custom_extractors
    from pipeline.eval_config import eval_config

    # Overall only: stock TFMA cannot slice by bucket.
    overall_only = eval_config(taxi_runs.config.replace(slicing=None))
    theirs = _metrics(taxi_runs, tmp_path / "default", None, overall_only)
    ours = _metrics(
        taxi_runs, tmp_path / "ours", lambda m, c: custom_extractors(m, c, None), overall_only
    )
    assert {"example_count", "binary_accuracy", "auc"} <= set(ours)
    assert ours == theirs
    assert ours["example_count"] > 500  # the sample's eval split, evaluated


def _with_bucket_feature(split: Path, out: Path, feature: str, bounds) -> str:
    """The split's examples, each with `<feature>_bucket` added (as our extractor names it)."""
    import tensorflow as tf

    from components.evaluation.slice_buckets import bucket_feature, bucket_label

    out.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(out / "data.tfrecord")) as writer:
        records = tf.data.TFRecordDataset(sorted(map(str, split.glob("*"))), "GZIP")
        for record in records:
            example = tf.train.Example.FromString(record.numpy())
            values = example.features.feature[feature].float_list.value
            label = bucket_label(values[0] if values else None, bounds)
            example.features.feature[bucket_feature(feature)].bytes_list.value.append(
                label.encode()
            )
            writer.write(example.SerializeToString())
    return str(out / "*")


def test_pipeline_slice_metrics_equal_stock_tfma(taxi_runs, tmp_path):
    """The Evaluator's per-slice metrics == tfma.run_model_analysis with TFMA's own
    extractors, the same model and the same slicing."""
    import tensorflow_model_analysis as tfma

    from pipeline.eval_config import eval_config

    config = taxi_runs.config
    (bucketed,) = config.slicing.buckets.items()
    stock = tfma.utils.update_eval_config_with_defaults(
        eval_config(config), has_baseline=False, rubber_stamp=True
    )
    model = tfma.default_eval_shared_model(
        eval_saved_model_path=str(Path(taxi_runs.first.model_uri) / "Format-Serving"),
        eval_config=stock,
    )
    tfma.run_model_analysis(
        eval_shared_model=model,
        eval_config=stock,
        data_location=_with_bucket_feature(
            _first_eval_split(taxi_runs), tmp_path / "data", *bucketed
        ),
        output_path=str(tmp_path / "stock"),
    )
    theirs = _by_slice(str(tmp_path / "stock"))
    evaluations = sorted(
        Path(config.pipeline_root).glob("Evaluator/evaluation/*"), key=lambda p: int(p.name)
    )
    ours = _by_slice(str(evaluations[0]))  # the first run's evaluation: no baseline
    assert len(ours) >= 7  # overall, Cash, Credit Card, ... and four distance buckets
    assert {"payment_type=Cash", "trip_miles_bucket=<1", "trip_miles_bucket=>=10"} <= set(ours)
    assert ours == theirs
