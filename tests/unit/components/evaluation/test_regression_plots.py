"""components/evaluation/regression_plots.py: the plots' ranges and bins from the eval split."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from components.evaluation.regression_plots import (
    eval_labels,
    residual_bins,
    with_label_ranges,
)


def _records(path, name: str, values: list[int]) -> list[str]:
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for v in values:
            feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))}
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )
    return [str(path)]


def test_integer_labels_are_read_and_a_missing_label_is_named(tmp_path):
    files = _records(tmp_path / "eval.gz", "count", [3, 5, 10])
    assert eval_labels(files, "GZIP", "count").tolist() == [3.0, 5.0, 10.0]
    with pytest.raises(ValueError, match="'price'.*eval.gz"):
        eval_labels(files, "GZIP", "price")


def test_only_the_regression_spec_gets_ranges_and_bins():
    config = {
        "metrics_specs": [
            {"metrics": [{"class_name": "CalibrationPlot", "config": '"num_buckets": 20'}]},
            {
                "metrics": [
                    {"class_name": "CalibrationPlot", "config": '"num_buckets": 20'},
                    {"class_name": "ResidualHistogram", "module": "m", "config": ""},
                ]
            },
        ]
    }
    labels = np.array([10.0, 20.0, 30.0, 40.0])
    ranged = json.loads(with_label_ranges(json.dumps(config), labels))
    classifier, regression = ranged["metrics_specs"]
    assert classifier["metrics"][0]["config"] == '"num_buckets": 20'  # TFMA's [0, 1] kept
    calibration, residuals = (json.loads("{" + m["config"] + "}") for m in regression["metrics"])
    assert (calibration["left"], calibration["right"]) == (10.0, 40.0)
    spread = 4 * labels.std()
    assert residuals == {"left": -spread, "right": spread, "bins": 10}  # 4 examples: the floor
    assert [residual_bins(n) for n in (147, 2500, 10**6)] == [24, 100, 200]
