"""components.evaluation.extractors: which evaluations may drop features, and where the drop goes."""

from __future__ import annotations

import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.extractors import unbatch_extractor

from components.evaluation import extractors as evaluation
from pipeline.datasets import dataset_config
from pipeline.definition import create_pipeline
from pipeline.eval_config import eval_config
from pipeline.plan import plan_run


def _ours(sliced: bool = False) -> tfma.EvalConfig:
    # As TFX's Evaluator hands it to custom_extractors: with TFMA's defaults, first run.
    config = dataset_config("taxi")
    return tfma.utils.update_eval_config_with_defaults(
        eval_config(config if sliced else config.replace(slicing=None)),
        has_baseline=False,
        rubber_stamp=True,
    )


def test_evaluation_of_the_whole_split_reads_no_features():
    assert not evaluation.reads_features(_ours())
    assert evaluation.sliced_features(_ours()) == set()


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.slicing_specs.add(slice_keys_sql="SELECT STRUCT(company) FROM example"),
        lambda c: setattr(c.metrics_specs[0], "query_key", "trip_id"),
        lambda c: c.metrics_specs[0].metrics.add(class_name="Mine", module="my.metrics"),
    ],
    ids=["slice-by-sql", "query", "own-metric"],
)
def test_what_may_read_any_feature_keeps_them_all(change):
    config = _ours()
    change(config)
    assert evaluation.reads_features(config) and evaluation.sliced_features(config) is None
    stages = [e.stage_name for e in evaluation.custom_extractors(None, config, None)]
    assert evaluation.DROP_FEATURES_STAGE not in stages


@pytest.mark.parametrize(
    ("change", "kept"),
    [
        (lambda c: c.slicing_specs.add(feature_keys=["trip_start_hour"]), {"trip_start_hour"}),
        (lambda c: c.slicing_specs.add(feature_values={"payment_type": "Cash"}), {"payment_type"}),
        (
            lambda c: c.cross_slicing_specs.add(
                baseline_spec={"feature_keys": ["company"]},
                slicing_specs=[{"feature_keys": ["fare_bucket"]}],
            ),
            {"company", "fare"},
        ),
    ],
    ids=["slice-by-key", "slice-by-value", "cross-slice"],
)
def test_slicing_by_features_keeps_only_those(change, kept):
    config = _ours()
    change(config)
    assert evaluation.reads_features(config)
    assert evaluation.sliced_features(config) == kept
    stages = [e.stage_name for e in evaluation.custom_extractors(None, config, None)]
    assert evaluation.DROP_FEATURES_STAGE in stages


def test_taxis_slicing_keeps_its_two_features_and_adds_the_bucket():
    config = _ours(sliced=True)
    assert evaluation.sliced_features(config) == {"payment_type", "trip_miles"}
    stages = [
        e.stage_name
        for e in evaluation.custom_extractors(None, config, None, buckets={"trip_miles": (1, 3)})
    ]
    buckets = stages.index(evaluation.ADD_BUCKETS_STAGE)
    assert stages[buckets + 1] == "ExtractSliceKeys"
    assert stages.index(evaluation.DROP_FEATURES_STAGE) < buckets
    batch = {
        tfma.constants.FEATURES_KEY: {"payment_type": [b"Cash"], "trip_miles": [2.5], "fare": [9]},
        tfma.constants.TRANSFORMED_FEATURES_KEY: {"fare_xf": [0.1]},
        tfma.constants.LABELS_KEY: [1],
    }
    kept = evaluation._without_features(batch, frozenset({"payment_type", "trip_miles"}))
    assert set(kept[tfma.constants.FEATURES_KEY]) == {"payment_type", "trip_miles"}
    assert tfma.constants.TRANSFORMED_FEATURES_KEY not in kept
    example = evaluation.add_buckets(kept, {"trip_miles": (1.0, 3.0)})
    assert example[tfma.constants.FEATURES_KEY]["trip_miles_bucket"].tolist() == [b"1-3"]


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
    pipeline = create_pipeline(plan_run(dataset_config("taxi").replace(run_dir=str(tmp_path))))
    evaluator = next(c for c in pipeline.components if c.id == "Evaluator")
    assert evaluator.exec_properties["module_path"] == evaluation.MODULE_PATH
