"""The validation gate's checks on the digits dataset's features: class balance, sizes, ranges.

Statistics are computed in memory (TFDV, no pipeline) from rows shaped like
ImageExampleGen's examples: image bytes, label, height, width, channels, format.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from tensorflow_metadata.proto.v0 import schema_pb2

from components.validation.checks import evaluate, split_statistics, with_comparators
from components.validation.findings import BLOCK, DRIFT, JSD, L_INFTY, PASS, WARN
from components.validation.schema_importer import load_schema
from components.validation.settings import ValidationConfigError, load_settings
from pipeline.datasets import DATASETS

DIGITS = DATASETS["digits"]


@pytest.fixture(scope="module")
def schema() -> schema_pb2.Schema:
    return load_schema(DIGITS.schema_file)


@pytest.fixture(scope="module")
def settings():
    return load_settings(DIGITS.validation_file)


def _stats(schema, labels, size: int = 8, channels: int = 1):
    from tensorflow_data_validation.statistics import stats_impl, stats_options

    n = len(labels)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([[f"png-{i}".encode()] for i in range(n)]),
            pa.array([[int(v)] for v in labels]),
            pa.array([[size]] * n),
            pa.array([[size]] * n),
            pa.array([[channels]] * n),
            pa.array([[b"png"]] * n),
        ],
        ["image", "label", "height", "width", "channels", "format"],
    )
    stats = stats_impl.generate_statistics_in_memory(
        batch, stats_options.StatsOptions(schema=schema)
    )
    return split_statistics(stats, "train")


def _balanced(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.arange(n) % 10)


@pytest.fixture(scope="module")
def span1(schema):
    return {"train": _stats(schema, _balanced(1200, 1))}


def test_digits_config_points_at_its_own_files():
    assert DIGITS.validation_file.endswith("schema/digits/validation.yaml")
    assert DIGITS.serving_pattern == ""  # no serving data, said explicitly
    assert DATASETS["taxi"].serving_pattern.endswith("data/taxi/serving/*.csv")


def test_label_is_compared_by_class_frequencies(schema, settings):
    features = {f.name: f for f in with_comparators(schema, settings).feature}
    assert features["label"].drift_comparator.infinity_norm.threshold == 0.1
    assert features["height"].drift_comparator.jensen_shannon_divergence.threshold == 0.15
    assert not features["image"].HasField("drift_comparator")  # `off`
    assert set(settings.warn_only) == {"drift:height", "drift:width", "drift:channels"}


def test_first_span_notes_no_baseline_and_no_serving_data(schema, settings, span1):
    result = evaluate(
        span1, schema, settings, current_span=1, no_serving="no serving data for this dataset"
    )
    assert result.decision == PASS, result.message()
    assert "skew: no serving data for this dataset, skew not checked" in result.notes
    assert any("no baseline" in n for n in result.notes)


def test_same_balance_passes_and_label_drift_is_measured(schema, settings, span1):
    span2 = {"train": _stats(schema, _balanced(900, 2))}
    result = evaluate(span2, schema, settings, baseline=span1, current_span=2, baseline_span=1)
    assert result.decision == PASS, result.message()
    label = [m for m in result.measurements if m.kind == DRIFT and m.feature == "label"]
    assert label and label[0].measure == L_INFTY and label[0].value < 0.05


def test_one_dominant_class_blocks_naming_label(schema, settings, span1):
    labels = np.concatenate([np.full(600, 3), _balanced(300, 3)])
    result = evaluate(
        {"train": _stats(schema, labels)}, schema, settings, baseline=span1, current_span=2
    )
    assert result.decision == BLOCK
    [finding] = result.blocking
    assert (finding.kind, finding.feature, finding.measure) == (DRIFT, "label", L_INFTY)
    assert finding.measured > 0.5 and finding.threshold == 0.1
    assert "drift label: L-infinity" in result.message()


def test_other_image_size_and_colours_only_warn(schema, settings, span1):
    own = {"train": _stats(schema, _balanced(900, 4), size=24, channels=3)}
    result = evaluate(own, schema, settings, baseline=span1, current_span=2, baseline_span=1)
    assert result.decision == WARN, result.message()
    warned = {(f.kind, f.feature, f.measure) for f in result.warnings}
    assert warned == {(DRIFT, name, JSD) for name in ("height", "width", "channels")}


def test_out_of_range_label_and_channels_block(schema, settings, span1):
    labels = np.concatenate([[12], _balanced(300, 5)])
    result = evaluate(
        {"train": _stats(schema, labels, channels=5)}, schema, settings, current_span=1
    )
    assert result.decision == BLOCK
    blocked = {(f.kind, f.feature, f.anomaly) for f in result.blocking}
    assert ("schema", "label", "INT_TYPE_BIG_INT") in blocked
    assert ("schema", "channels", "INT_TYPE_BIG_INT") in blocked


def test_schema_without_environments_is_validated_everywhere(schema, settings, span1):
    bare = schema_pb2.Schema()
    bare.CopyFrom(schema)
    bare.ClearField("default_environment")
    for f in bare.feature:
        f.ClearField("not_in_environment")
    result = evaluate(span1, bare, settings, current_span=1)  # TFDV would reject TRAINING
    assert result.decision == PASS, result.message()


@pytest.mark.parametrize("entry", ["drift:", "drfit:height"])
def test_per_feature_warn_only_entries_are_checked(settings, entry):
    with pytest.raises(ValidationConfigError, match="kind:feature"):
        settings.with_warn_only([entry])
    assert "skew:label" in settings.with_warn_only(["skew:label"]).warn_only
