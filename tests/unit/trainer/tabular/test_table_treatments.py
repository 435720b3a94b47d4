"""trainer/tabular/treatments.py: dates, timestamps and text in the transform graph, checked
against Python's datetime; the generic preprocessing_fn and model with these treatments."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
import tensorflow as tf

from trainer.tabular import treatments
from trainer.tabular.features import TabularSpec


def _parts(values, treatment="date", fmt="iso"):
    parts, valid = treatments.date_parts(tf.constant(values), treatment, fmt)
    return parts.numpy(), valid.numpy()


def _expected(d: dt.datetime, timestamp: bool) -> list[float]:
    days = (d - dt.datetime(1970, 1, 1)).total_seconds() / 86400
    out = [d.year, d.month, d.weekday(), d.timetuple().tm_yday]
    if timestamp:
        out.append(d.hour)
    return [*out, days if timestamp else np.floor(days)]


def test_iso_dates_match_python_over_four_centuries():
    rng = np.random.default_rng(0)
    days = rng.integers(-80000, 80000, size=500)
    dates = [dt.datetime(1970, 1, 1) + dt.timedelta(days=int(d)) for d in days]
    parts, valid = _parts([d.strftime("%Y-%m-%d") for d in dates])
    assert valid.all()
    np.testing.assert_allclose(parts, [_expected(d, False) for d in dates], rtol=1e-6)


def test_iso_timestamps_with_and_without_zone():
    values = [
        "2021-07-04T13:45:00+02:00",
        "2021-07-04 23:30Z",
        "2021-07-04T05:06:07.25",
        "2021-07-04T05:06",
    ]
    parts, valid = _parts(values, "timestamp")
    assert valid.all()
    # Hours as written; days since 1970 from the UTC instant (13:45+02:00 is 11:45 UTC).
    assert list(parts[:, 4]) == [13, 23, 5, 5]
    utc = dt.datetime(2021, 7, 4, 11, 45)
    assert parts[0, 5] == pytest.approx(_expected(utc, True)[-1], abs=1e-3)
    assert parts[2, 5] == pytest.approx(
        _expected(dt.datetime(2021, 7, 4, 5, 6, 7), True)[-1], abs=1e-3
    )


@pytest.mark.parametrize(
    "fmt, text, expected",
    [
        ("dmy", "31/12/2020", (2020, 12, 31)),
        ("mdy", "12/31/2020", (2020, 12, 31)),
        ("dmy", "1.2.2021", (2021, 2, 1)),
    ],
)
def test_day_month_orders(fmt, text, expected):
    parts, valid = _parts([text], "date", fmt)
    assert valid.all()
    assert tuple(parts[0, :2]) == expected[:2]
    assert parts[0, 3] == dt.date(*expected).timetuple().tm_yday


def test_invalid_values_are_missing_not_errors():
    parts, valid = _parts(
        ["2023-02-30", "", "junk", "2023-13-01", "2023-01-01T25:00", "1999-12-31"]
    )
    assert list(valid) == [False, False, False, False, False, True]


def test_unix_seconds_from_numbers_and_text():
    ts = 1700000000
    expected = _expected(dt.datetime(2023, 11, 14, 22, 13, 20), True)
    for column in (tf.constant([ts], tf.int64), tf.constant([float(ts)]), tf.constant([str(ts)])):
        parts, valid = treatments.date_parts(column, "timestamp", "unix_seconds")
        assert valid.numpy().all()
        np.testing.assert_allclose(parts.numpy()[0], expected, rtol=1e-6)


def test_tokens_are_lowercased_words():
    words = treatments.tokens(tf.constant(["Hello, World! 2 o'clock", ""])).to_list()
    assert words == [[b"hello", b"world", b"2", b"o", b"clock"], []]


FEATURES = {
    "sold": {"treatment": "date", "format": "iso"},
    "seen": {"treatment": "timestamp", "format": "unix_seconds"},
    "notes": {"treatment": "text", "max_tokens": 4},
}


def test_preprocessing_fn_expands_dates_and_text(tmp_path):
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from trainer.tabular.preprocessing import preprocessing_fn

    # As TFX's Transform runs it (TF2; the pipeline runs it end to end in test_cars_e2e).
    raw_spec = {
        "sold": tf.io.VarLenFeature(tf.string),
        "seen": tf.io.VarLenFeature(tf.int64),
        "notes": tf.io.VarLenFeature(tf.string),
        "y": tf.io.FixedLenFeature([1], tf.float32),
    }
    rows = [
        {"sold": [b"2020-01-01"], "seen": [0], "notes": [b"good car good"], "y": [1.0]},
        {"sold": [], "seen": [], "notes": [], "y": [2.0]},
        {"sold": [b"2022-01-01"], "seen": [86400 * 2], "notes": [b"bad"], "y": [3.0]},
        {"sold": [b"not a date"], "seen": [86400], "notes": [b"a b c d e f"], "y": [4.0]},
    ]
    config = {"tabular": {"label": "y", "task": "regression", "features": FEATURES}}
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(raw_spec))
    with tft_beam.Context(temp_dir=str(tmp_path), force_tf_compat_v1=False):
        (out, _), _ = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: preprocessing_fn(inputs, config)
        )
    assert [r["sold_missing"] for r in out] == [0.0, 1.0, 0.0, 1.0]
    assert [r["seen_missing"] for r in out] == [0.0, 1.0, 0.0, 0.0]
    sold = np.array([r["sold_xf"] for r in out])
    assert sold.shape == (4, len(treatments.DATE_PARTS))
    # Two dates present: each part z-scored over them (-1, 1); the missing rows are 0.
    np.testing.assert_allclose(sold[:, 0], [-1.0, 0.0, 1.0, 0.0], atol=1e-5)
    seen = np.array([r["seen_xf"] for r in out])
    assert seen.shape == (4, len(treatments.TIMESTAMP_PARTS))
    notes = np.array([r["notes_xf"] for r in out])
    assert notes.shape == (4, 4)
    assert list(notes[1]) == [-1, -1, -1, -1]  # a blank is no words
    assert notes[0][0] == notes[0][2] != notes[0][1]  # "good" twice, "car" once
    assert (notes[3] >= 0).all()  # six words cut to max_tokens


def test_model_takes_date_vectors_and_text_ids():
    from trainer.tabular.model import build_model

    spec = TabularSpec.from_dict(
        {"label": "y", "task": "binary", "classes": ["n", "p"], "features": FEATURES,
         "class_weights": {"n": 0.5, "p": 5.0}}
    )  # fmt: skip
    assert spec.class_weights == (0.5, 5.0)
    model = build_model(spec, vocab_sizes={"notes": 10}, missing_indicators=["sold", "seen"])
    batch = {
        "sold_xf": np.zeros((3, 5), np.float32),
        "seen_xf": np.zeros((3, 6), np.float32),
        "notes_xf": np.array([[0, 3, -1, -1], [-1, -1, -1, -1], [9, 9, 9, 9]]),
        "sold_missing": np.zeros((3, 1), np.float32),
        "seen_missing": np.ones((3, 1), np.float32),
    }
    out = model.predict(batch, verbose=0)
    # Row 1 has no words (a blank text cell): a finite prediction, not NaN.
    assert out.shape == (3, 1) and np.isfinite(out).all(), out


def test_class_weights_weigh_each_example_by_its_class():
    from trainer.tabular.train import with_class_weights

    spec = TabularSpec.from_dict(
        {"label": "y", "task": "multiclass", "classes": ["a", "b", "c"], "features": {},
         "class_weights": {"a": 1.0, "b": 2.0, "c": 7.5}}
    )  # fmt: skip
    data = tf.data.Dataset.from_tensors(({"x": tf.zeros([3])}, tf.constant([2, 0, 1], tf.int64)))
    ((_, _, weights),) = list(with_class_weights(data, spec))
    assert list(weights.numpy()) == [7.5, 1.0, 2.0]


def test_word_mean_of_a_blank_text_is_zero_not_nan():
    from trainer.tabular.model import WordMean

    layer = WordMean(10, 4)
    out = layer(tf.constant([[-1, -1, -1], [3, 3, -1]], tf.int64)).numpy()
    assert np.array_equal(out[0], np.zeros(4))
    np.testing.assert_allclose(out[1], layer.embedding(tf.constant([3])).numpy()[0], rtol=1e-6)
