"""components.evaluation: which evaluations may drop features, and where the drop goes."""

from __future__ import annotations

import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.extractors import unbatch_extractor

from components import evaluation
from pipeline.datasets import dataset_config
from pipeline.definition import create_pipeline, eval_config


def _ours() -> tfma.EvalConfig:
    # As TFX's Evaluator hands it to custom_extractors: with TFMA's defaults, first run.
    return tfma.utils.update_eval_config_with_defaults(
        eval_config(dataset_config("taxi")), has_baseline=False, rubber_stamp=True
    )


def test_our_evaluation_reads_no_features():
    assert not evaluation.reads_features(_ours())


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.slicing_specs.add(feature_keys=["trip_start_hour"]),
        lambda c: c.slicing_specs.add(feature_values={"payment_type": "Cash"}),
        lambda c: c.slicing_specs.add(slice_keys_sql="SELECT STRUCT(company) FROM example"),
        lambda c: c.cross_slicing_specs.add(),
        lambda c: setattr(c.metrics_specs[0], "query_key", "trip_id"),
        lambda c: c.metrics_specs[0].metrics.add(class_name="Mine", module="my.metrics"),
    ],
    ids=["slice-by-key", "slice-by-value", "slice-by-sql", "cross-slice", "query", "own-metric"],
)
def test_what_may_read_features_keeps_them(change):
    config = _ours()
    change(config)
    assert evaluation.reads_features(config)
    stages = [e.stage_name for e in evaluation.custom_extractors(None, config, None)]
    assert evaluation.DROP_FEATURES_STAGE not in stages


def test_features_are_dropped_right_before_the_per_example_split():
    stages = [e.stage_name for e in evaluation.custom_extractors(None, _ours(), None)]
    default = [e.stage_name for e in tfma.default_extractors(eval_config=_ours())]
    split = stages.index(unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME)
    assert stages[split - 1] == evaluation.DROP_FEATURES_STAGE
    assert [s for s in stages if s != evaluation.DROP_FEATURES_STAGE] == default


def test_the_drop_keeps_what_metrics_read():
    batch = {
        tfma.constants.FEATURES_KEY: {"fare": [1.0]},
        tfma.constants.TRANSFORMED_FEATURES_KEY: {"fare_xf": [0.1]},
        tfma.constants.LABELS_KEY: [1],
        tfma.constants.PREDICTIONS_KEY: [0.9],
        tfma.constants.EXAMPLE_WEIGHTS_KEY: [1.0],
        tfma.constants.INPUT_KEY: [b"..."],
    }
    kept = evaluation._without_features(batch)
    assert set(kept) == set(batch) - set(evaluation.FEATURE_KEYS)


def test_the_pipelines_evaluator_uses_these_extractors(tmp_path):
    pipeline = create_pipeline(dataset_config("taxi").replace(run_dir=str(tmp_path)))
    evaluator = next(c for c in pipeline.components if c.id == "Evaluator")
    assert evaluator.exec_properties["module_path"] == evaluation.MODULE_PATH
