"""Slicing settings (dataset file), bucket names and the per-slice blessing rules."""

from __future__ import annotations

import pytest

from components.evaluation.slice_buckets import bucket_label
from components.evaluation.slicing.rules import (
    SliceRules,
    active_buckets,
    bucketed,
    check_slices,
    metric_name,
    slice_name,
)
from pipeline.dataset_sections import DatasetFileError
from pipeline.dataset_sections import read_slicing as _slicing


def test_bucket_labels_say_their_range():
    bounds = (1.0, 3.0, 10.0)
    assert [bucket_label(v, bounds) for v in (0.2, 1.0, 2.9, 3.0, 9.99, 10.0, 250.0)] == [
        "<1",
        "1-3",
        "1-3",
        "3-10",
        "3-10",
        ">=10",
        ">=10",
    ]
    assert bucket_label(None, bounds) == bucket_label(float("nan"), bounds) == "missing"
    assert bucket_label(0.5, (0.25,)) == ">=0.25"


def test_metric_names_are_tfma_keys():
    assert metric_name("BinaryAccuracy") == "binary_accuracy"
    assert metric_name("AUC") == "auc"
    assert metric_name("SparseCategoricalAccuracy") == "sparse_categorical_accuracy"
    assert metric_name("RootMeanSquaredError") == "root_mean_squared_error"


def test_slice_names():
    assert slice_name(()) == "overall"
    assert slice_name((("payment_type", b"Cash"), ("trip_miles_bucket", "1-3"))) == (
        "payment_type=Cash, trip_miles_bucket=1-3"
    )


def test_bucketed_sets_and_restores():
    assert active_buckets() == {}
    with bucketed({"fare": [5, 10]}):
        assert active_buckets() == {"fare": (5, 10)}
    assert active_buckets() == {}


def _metrics(cash: float, card: float, base_cash: float, base_card: float, card_count: int = 300):
    return {
        "overall": {"candidate": {"binary_accuracy": 0.9, "example_count": 1000.0}},
        "payment_type=Cash": {
            "candidate": {"binary_accuracy": cash, "example_count": 600.0},
            "baseline": {"binary_accuracy": base_cash, "example_count": 600.0},
        },
        "payment_type=Credit Card": {
            "candidate": {"binary_accuracy": card, "example_count": float(card_count)},
            "baseline": {"binary_accuracy": base_card, "example_count": float(card_count)},
        },
    }


def test_a_drop_on_one_slice_fails_naming_it_with_both_numbers():
    rules = SliceRules(min_examples=50, max_drop=0.1)
    (failure,) = check_slices(_metrics(1.0, 0.5, 1.0, 0.7), rules, has_baseline=True)
    assert failure.slice == "payment_type=Credit Card" and failure.rule == "baseline"
    assert failure.message() == (
        "slice payment_type=Credit Card (300 examples): binary_accuracy 0.5000 against the "
        "baseline's 0.7000, worse by 0.2000 (allowed: 0.1)"
    )
    # Within the allowed drop, no baseline, or too few examples: no failure.
    assert check_slices(_metrics(1.0, 0.65, 1.0, 0.7), rules, has_baseline=True) == []
    assert check_slices(_metrics(1.0, 0.5, 1.0, 0.7), rules, has_baseline=False) == []
    assert check_slices(_metrics(1.0, 0.5, 1.0, 0.7, card_count=49), rules, has_baseline=True) == []


def test_floors_and_ceilings_per_slice():
    floor = SliceRules(lower_bound=0.6)
    (failure,) = check_slices(_metrics(1.0, 0.5, 1.0, 0.5), floor, has_baseline=True)
    assert "binary_accuracy 0.5000 is below the slice floor 0.6" in failure.message()
    error = SliceRules(metric="binary_accuracy", higher_is_better=False, upper_bound=0.8)
    (failure,) = check_slices(_metrics(1.0, 0.5, 1.0, 0.5), error, has_baseline=True)
    assert failure.slice == "payment_type=Cash" and failure.rule == "ceiling"
    # Lower is better: a rise is the drop.
    rising = SliceRules(higher_is_better=False, max_drop=0.1)
    (failure,) = check_slices(_metrics(1.0, 0.5, 0.7, 0.5), rising, has_baseline=True)
    assert failure.slice == "payment_type=Cash"


def test_rules_round_trip_json():
    rules = SliceRules(by=(("a",), ("a", "b")), buckets={"a": (1.0, 2.0)}, max_drop=0.05)
    assert SliceRules.from_json(rules.to_json()) == rules
    assert rules.slice_features(("a", "b")) == ["a_bucket", "b"]


def test_the_dataset_files_slicing_is_parsed():
    parsed = _slicing(
        {"by": ["payment_type", ["payment_type", "trip_miles"]], "buckets": {"trip_miles": [1, 5]}},
        "f: slicing",
    )
    assert parsed.by == (("payment_type",), ("payment_type", "trip_miles"))
    assert parsed.buckets == {"trip_miles": (1.0, 5.0)} and parsed.min_examples == 1


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"by": ["a"], "colour": 1}, "colour"),
        ({"by": []}, "slicing.by"),
        ({"by": ["a"], "buckets": {"a": [5, 1]}}, "buckets.a"),
        ({"by": ["a"], "buckets": {"b": [1]}}, "buckets.b"),
        ({"by": ["a"], "min_examples": 0}, "min_examples"),
        ({"by": ["a"], "max_drop": -0.1}, "max_drop"),
        ({"by": ["a"], "lower_bound": "high"}, "lower_bound"),
        ({"by": [["a", "a"]]}, "by[0]"),
    ],
)
def test_bad_slicing_is_refused_naming_the_key(raw, named):
    with pytest.raises(DatasetFileError, match=named.replace("[", r"\[").replace("]", r"\]")):
        _slicing(raw, "f: slicing")


def test_slicing_by_a_feature_the_schema_lacks_is_refused(tmp_path):
    from pipeline.config import PROJECT_ROOT
    from pipeline.datasets import load_dataset_file

    folder = tmp_path / "taxi2"
    folder.mkdir()
    (folder / "schema.pbtxt").write_text((PROJECT_ROOT / "schema/taxi/schema.pbtxt").read_text())
    text = (
        (PROJECT_ROOT / "schema/taxi/dataset.yaml").read_text().replace("name: taxi", "name: taxi2")
    )
    (folder / "dataset.yaml").write_text(text.replace("by: [payment_type,", "by: [payment_kind,"))
    with pytest.raises(DatasetFileError, match="'payment_kind' is not a column of the schema"):
        load_dataset_file(folder / "dataset.yaml")
