"""trainer.taxi.preprocessing: the tf.Transform graph, run for real with tf.Transform's Beam API."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from components.validation.schema_importer import load_schema
from trainer.taxi import features as f
from trainer.taxi.preprocessing import fill_in_missing, preprocessing_fn

SCHEMA_FILE = Path(__file__).resolve().parents[4] / "schema" / "taxi" / "schema.pbtxt"

# Defaults for one raw row; optional (VarLen) columns may be overridden with None = missing.
_DEFAULTS = {
    "pickup_community_area": 8,
    "fare": 10.0,
    "trip_start_month": 5,
    "trip_start_hour": 12,
    "trip_start_day": 3,
    "trip_start_timestamp": 1400269500,
    "pickup_latitude": 41.90,
    "pickup_longitude": -87.63,
    "dropoff_latitude": 41.88,
    "dropoff_longitude": -87.62,
    "trip_miles": 1.5,
    "pickup_census_tract": 17031081500,
    "dropoff_census_tract": 17031320100,
    "payment_type": "Cash",
    "company": "Taxi Affiliation Services",
    "trip_seconds": 600,
    "dropoff_community_area": 32,
    "tips": 0.0,
}

# Training rows: (overrides). Row indices are referred to by the tests below.
TRAIN_OVERRIDES: list[dict] = [
    # 0: tips 30% of fare -> big tipper.
    dict(
        fare=10.0,
        tips=3.0,
        trip_miles=2.0,
        trip_seconds=700,
        payment_type="Credit Card",
        pickup_latitude=41.70,
        pickup_longitude=-87.90,
    ),
    # 1: tips exactly 20% -> not a big tipper (strictly greater is required).
    dict(
        fare=10.0,
        tips=2.0,
        trip_miles=2.1,
        trip_seconds=710,
        payment_type="Credit Card",
        pickup_latitude=41.75,
        pickup_longitude=-87.85,
    ),
    # 2: tips 10% -> not a big tipper.
    dict(
        fare=10.0,
        tips=1.0,
        trip_miles=3.0,
        trip_seconds=900,
        pickup_latitude=41.80,
        pickup_longitude=-87.80,
        company="Flash Cab",
    ),
    # 3: free ride, no tip.
    dict(
        fare=0.0,
        tips=0.0,
        trip_miles=0.0,
        trip_seconds=60,
        payment_type="No Charge",
        pickup_latitude=41.85,
        pickup_longitude=-87.75,
    ),
    # 4: free ride with a tip -> big tipper.
    dict(
        fare=0.0,
        tips=1.0,
        trip_miles=0.1,
        trip_seconds=120,
        payment_type="Credit Card",
        pickup_latitude=41.95,
        pickup_longitude=-87.70,
        company="Flash Cab",
    ),
    # 5: every optional column missing.
    dict(
        pickup_community_area=None,
        pickup_latitude=None,
        pickup_longitude=None,
        dropoff_latitude=None,
        dropoff_longitude=None,
        pickup_census_tract=None,
        dropoff_census_tract=None,
        company=None,
        trip_seconds=None,
        dropoff_community_area=None,
        fare=25.0,
        tips=6.0,
        trip_miles=8.0,
    ),
    # 6: out-of-range categorical ids.
    dict(
        trip_start_hour=99,
        trip_start_day=-1,
        trip_start_month=13,
        pickup_community_area=78,
        dropoff_community_area=77,
        fare=40.0,
        tips=5.0,
        trip_miles=12.0,
        trip_seconds=2400,
        pickup_latitude=42.00,
        pickup_longitude=-87.65,
        pickup_census_tract=17031839100,
    ),
    # 7: in-range edge ids.
    dict(
        trip_start_hour=23,
        trip_start_day=7,
        trip_start_month=12,
        pickup_community_area=1,
        fare=6.5,
        tips=0.5,
        trip_miles=1.0,
        trip_seconds=300,
        pickup_latitude=42.05,
        pickup_longitude=-87.60,
        pickup_census_tract=17031839100,
    ),
    # 8: NaN fare in the training data (csv_checks lets "nan" through).
    dict(fare=float("nan"), tips=4.0, trip_miles=0.7, trip_seconds=200),
]

# Rows only transformed with the analyzed transform (like serving or eval data).
NEW_OVERRIDES: list[dict] = [
    # 0: a company never seen in training.
    dict(company="Brand New Cab Co", payment_type="Cash", tips=0.0),
    # 1: NaN fare (csv_checks lets "nan" through) -> label 0 even with a large tip.
    dict(fare=float("nan"), tips=100.0),
    # 2: NaN tips -> not a big tipper.
    dict(fare=10.0, tips=float("nan")),
    # 3: optional columns missing at transform time too.
    dict(company=None, pickup_latitude=None, trip_seconds=None, pickup_census_tract=None),
]


def _feature_spec() -> dict:
    return schema_utils.schema_as_feature_spec(load_schema(str(SCHEMA_FILE))).feature_spec


def _raw_row(spec: dict, overrides: dict) -> dict:
    values = {**_DEFAULTS, **overrides}
    row = {}
    for key, feature in spec.items():
        value = values[key]
        if value is None:
            assert isinstance(feature, tf.io.VarLenFeature), f"{key} is required in the schema"
            row[key] = []
        elif feature.dtype == tf.string:
            row[key] = [value.encode()]
        else:
            row[key] = [value]
    return row


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    """(train outputs, new-data outputs, vocabulary dir, raw train rows).

    force_tf_compat_v1=True as in the pipeline's Transform component (pipeline.definition).
    """
    spec = _feature_spec()
    metadata = dataset_metadata.DatasetMetadata(load_schema(str(SCHEMA_FILE)))
    train = [_raw_row(spec, o) for o in TRAIN_OVERRIDES]
    new = [_raw_row(spec, o) for o in NEW_OVERRIDES]
    temp_dir = tmp_path_factory.mktemp("tft")
    with tft_beam.Context(temp_dir=str(temp_dir), force_tf_compat_v1=True):
        (train_out, _), transform_fn = (train, metadata) | tft_beam.AnalyzeAndTransformDataset(
            preprocessing_fn
        )
        new_out, _ = ((new, metadata), transform_fn) | tft_beam.TransformDataset()
    assets = os.path.join(transform_fn[0][0], "assets")
    return train_out, new_out, assets, train


def _col(rows: list[dict], key: str) -> np.ndarray:
    return np.array([np.asarray(r[key]).item() for r in rows])


def _vocab(assets: str, name: str) -> list[str]:
    with open(os.path.join(assets, name), encoding="utf-8") as fh:
        return fh.read().splitlines()


def _raw(rows: list[dict], key: str, missing=0) -> np.ndarray:
    return np.array([r[key][0] if r[key] else missing for r in rows])


def test_outputs_are_exactly_the_transformed_features(transformed):
    train_out, new_out, _, _ = transformed
    expected = {
        f.transformed_name(k)
        for k in [
            *f.DENSE_FLOAT_FEATURE_KEYS,
            *f.VOCAB_FEATURE_KEYS,
            *f.BUCKET_FEATURE_KEYS,
            *f.CATEGORICAL_FEATURE_MAX,
        ]
    } | {f.TRANSFORMED_LABEL_KEY}
    assert len(train_out) == len(TRAIN_OVERRIDES)
    assert len(new_out) == len(NEW_OVERRIDES)
    for row in train_out + new_out:
        assert set(row) == expected


@pytest.mark.parametrize("key", f.DENSE_FLOAT_FEATURE_KEYS)
def test_dense_features_are_z_scored(transformed, key):
    train_out, _, _, raw = transformed
    x = _raw(raw, key).astype(np.float64)
    finite = np.isfinite(x)
    z = _col(train_out, f.transformed_name(key)).astype(np.float64)[finite]
    assert len(z) >= len(TRAIN_OVERRIDES) - 1
    assert abs(z.mean()) < 1e-5
    assert z.std() == pytest.approx(1.0, abs=1e-4)
    # Missing values are filled with 0 before scaling, consistently with numpy;
    # the analyzers skip NaN (row 8's fare), so it does not poison the other rows.
    x = x[finite]
    np.testing.assert_allclose(z, (x - x.mean()) / x.std(), atol=1e-4)


def test_missing_optional_trip_seconds_is_scaled_as_zero(transformed):
    train_out, _, _, raw = transformed
    filled = _raw(raw, "trip_seconds").astype(np.float64)
    assert np.isfinite(filled).all()
    assert filled[5] == 0  # row 5 had no trip_seconds
    z = _col(train_out, "trip_seconds_xf")
    assert z[5] == pytest.approx((0 - filled.mean()) / filled.std(), abs=1e-4)
    assert z[5] == z.min()  # 0 seconds is below every real trip


def test_vocabulary_features_map_to_vocabulary_ids(transformed):
    train_out, _, assets, raw = transformed
    for key in f.VOCAB_FEATURE_KEYS:
        vocab = _vocab(assets, key)
        assert 0 < len(vocab) <= f.VOCAB_SIZE
        ids = _col(train_out, f.transformed_name(key))
        assert ids.dtype == np.int64
        assert ((ids >= 0) & (ids < len(vocab) + f.OOV_SIZE)).all(), (key, ids)
        for row, out in zip(raw, train_out, strict=True):
            token = row[key][0] if row[key] else ""
            token = token.decode() if isinstance(token, bytes) else str(token)
            if token in vocab:
                assert out[f.transformed_name(key)] == vocab.index(token), (key, token)


def test_vocabulary_is_ordered_by_frequency(transformed):
    train_out, _, assets, _ = transformed
    # payment_type in training: Cash x5, Credit Card x3, No Charge x1.
    assert _vocab(assets, "payment_type")[:3] == ["Cash", "Credit Card", "No Charge"]
    ids = _col(train_out, "payment_type_xf")
    assert ids.tolist() == [1, 1, 0, 2, 1, 0, 0, 0, 0]


def test_unseen_vocabulary_value_goes_to_an_oov_bucket(transformed):
    _, new_out, assets, _ = transformed
    vocab_size = len(_vocab(assets, "company"))
    company_id = new_out[0]["company_xf"]
    assert vocab_size <= company_id < vocab_size + f.OOV_SIZE
    assert new_out[0]["payment_type_xf"] == _vocab(assets, "payment_type").index("Cash")


@pytest.mark.parametrize("key", f.BUCKET_FEATURE_KEYS)
def test_coordinates_are_bucketized(transformed, key):
    train_out, new_out, _, raw = transformed
    buckets = _col(train_out + new_out, f.transformed_name(key))
    assert buckets.dtype == np.int64
    assert ((buckets >= 0) & (buckets < f.FEATURE_BUCKET_COUNT)).all(), buckets
    # Bucketization preserves order on the training data.
    train_buckets = _col(train_out, f.transformed_name(key))
    values = _raw(raw, key, missing=0.0)
    order = np.argsort(values, kind="stable")
    assert (np.diff(train_buckets[order]) >= 0).all(), (values[order], train_buckets[order])


def test_pickup_latitude_buckets_spread_over_the_range(transformed):
    train_out, _, _, raw = transformed
    buckets = _col(train_out, "pickup_latitude_xf")
    lat = _raw(raw, "pickup_latitude", missing=0.0)
    assert buckets[np.argmax(lat)] > buckets[np.argmin(lat)]
    assert len(set(buckets.tolist())) >= 4


def test_out_of_range_categorical_ids_map_to_zero(transformed):
    train_out, _, _, _ = transformed
    bad, edge, normal = train_out[6], train_out[7], train_out[0]
    assert bad["trip_start_hour_xf"] == 0  # 99
    assert bad["trip_start_day_xf"] == 0  # -1
    assert bad["trip_start_month_xf"] == 0  # 13 == upper bound, exclusive
    assert bad["pickup_community_area_xf"] == 0  # 78
    assert bad["dropoff_community_area_xf"] == 77  # in range, kept
    assert edge["trip_start_hour_xf"] == 23
    assert edge["trip_start_day_xf"] == 7
    assert edge["trip_start_month_xf"] == 12
    assert edge["pickup_community_area_xf"] == 1
    assert normal["trip_start_hour_xf"] == _DEFAULTS["trip_start_hour"]
    assert normal["trip_start_month_xf"] == _DEFAULTS["trip_start_month"]


def test_missing_optional_values_are_filled(transformed):
    train_out, new_out, _, _ = transformed
    missing = train_out[5]
    assert missing["pickup_community_area_xf"] == 0
    assert missing["dropoff_community_area_xf"] == 0
    for key in f.BUCKET_FEATURE_KEYS:
        # A missing coordinate is filled with 0.0: below every Chicago latitude
        # (lowest bucket), above every Chicago longitude (highest bucket).
        buckets = _col(train_out, f.transformed_name(key))
        extreme = buckets.min() if "latitude" in key else buckets.max()
        assert missing[f.transformed_name(key)] == extreme
    for row in (missing, new_out[3]):
        for value in row.values():
            assert np.isfinite(np.asarray(value, dtype=np.float64)).all()


def test_label_is_big_tipper(transformed):
    train_out, _, _, raw = transformed
    labels = _col(train_out, f.TRANSFORMED_LABEL_KEY)
    assert labels.dtype == np.int64
    assert labels.tolist() == [1, 0, 0, 0, 1, 1, 0, 0, 0]  # 8: NaN fare
    expected = [int(r["tips"][0] > f.BIG_TIP_FRACTION * r["fare"][0]) for r in raw]
    assert labels.tolist() == expected


def test_label_with_nan_fare_or_tips_is_zero(transformed):
    _, new_out, _, _ = transformed
    assert new_out[1][f.TRANSFORMED_LABEL_KEY] == 0  # NaN fare, 100 tip
    assert new_out[2][f.TRANSFORMED_LABEL_KEY] == 0  # NaN tips


def test_fill_in_missing_sparse_numbers():
    sparse = tf.SparseTensor(
        indices=[[0, 0], [2, 0]], values=tf.constant([3.5, -1.0]), dense_shape=[4, 1]
    )
    dense = fill_in_missing(sparse)
    assert dense.shape.rank == 1
    np.testing.assert_array_equal(dense.numpy(), [3.5, 0.0, -1.0, 0.0])


def test_fill_in_missing_sparse_strings_and_ints():
    strings = tf.SparseTensor(indices=[[1, 0]], values=tf.constant(["a"]), dense_shape=[3, 1])
    assert fill_in_missing(strings).numpy().tolist() == [b"", b"a", b""]
    ints = tf.SparseTensor(
        indices=[[0, 0]], values=tf.constant([7], dtype=tf.int64), dense_shape=[2, 1]
    )
    out = fill_in_missing(ints)
    assert out.dtype == tf.int64
    assert out.numpy().tolist() == [7, 0]


def test_fill_in_missing_all_missing_keeps_batch_size():
    empty = tf.SparseTensor(
        indices=tf.zeros([0, 2], dtype=tf.int64),
        values=tf.constant([], dtype=tf.int64),
        dense_shape=[3, 1],
    )
    assert fill_in_missing(empty).numpy().tolist() == [0, 0, 0]


def test_fill_in_missing_dense_is_flattened():
    dense = tf.constant([[1.0], [2.0]])
    assert fill_in_missing(dense).shape == (2,)
    flat = tf.constant([1, 2, 3])
    assert fill_in_missing(flat) is flat
