"""trainer.input.input_fn over GZIP TFRecord shards of tf.Examples."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from trainer.input import input_fn

SHARDS = 3
PER_SHARD = 7  # 21 records: batches of 4 leave a partial last batch
LABEL = "label_xf"
FEATURE_SPEC = {
    "id": tf.io.FixedLenFeature([], tf.int64),
    "value": tf.io.FixedLenFeature([], tf.float32),
    "name": tf.io.FixedLenFeature([], tf.string),
    LABEL: tf.io.FixedLenFeature([], tf.int64),
}


def _example(i: int) -> bytes:
    feature = {
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "value": tf.train.Feature(float_list=tf.train.FloatList(value=[i * 0.5])),
        "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"n{i}".encode()])),
        LABEL: tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture
def shards(tmp_path):
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    for s in range(SHARDS):
        path = tmp_path / f"data-{s:05d}-of-{SHARDS:05d}.gz"
        with tf.io.TFRecordWriter(str(path), options) as writer:
            for i in range(s * PER_SHARD, (s + 1) * PER_SHARD):
                writer.write(_example(i))
    # A file the pattern must not pick up.
    (tmp_path / "README.txt").write_text("not a record file")
    return str(tmp_path / "data-*.gz")


def _epoch(pattern, batch_size=4, **kwargs):
    dataset = input_fn(
        pattern, FEATURE_SPEC, LABEL, batch_size, shuffle=False, repeat=False, **kwargs
    )
    return [(({k: v.numpy() for k, v in feats.items()}), label.numpy()) for feats, label in dataset]


def _ids(batches) -> list[int]:
    return [int(i) for feats, _ in batches for i in feats["id"]]


def test_batches_have_the_right_size_and_dtypes(shards):
    batches = _epoch(shards, batch_size=4)
    sizes = [len(label) for _, label in batches]
    assert sizes == [4, 4, 4, 4, 4, 1]  # the last partial batch is kept
    feats, label = batches[0]
    assert feats["id"].dtype == np.int64
    assert feats["value"].dtype == np.float32
    assert feats["name"].dtype == object
    assert label.dtype == np.int64


def test_label_is_popped_from_features(shards):
    for feats, label in _epoch(shards):
        assert LABEL not in feats
        assert set(feats) == {"id", "value", "name"}
        np.testing.assert_array_equal(label, feats["id"] % 2)


def test_one_epoch_reads_every_record_once(shards):
    ids = _ids(_epoch(shards))
    assert sorted(ids) == list(range(SHARDS * PER_SHARD))
    assert len(ids) == len(set(ids))


def test_features_match_their_record(shards):
    for feats, _ in _epoch(shards):
        np.testing.assert_allclose(feats["value"], feats["id"] * 0.5)
        assert [n.decode() for n in feats["name"]] == [f"n{i}" for i in feats["id"]]


def test_list_of_patterns(shards, tmp_path):
    files = sorted(str(p) for p in tmp_path.glob("data-*.gz"))
    ids = _ids(_epoch(files[:2]))
    assert sorted(ids) == list(range(2 * PER_SHARD))


def test_cache_gives_the_same_content(shards):
    plain = _epoch(shards)
    dataset = input_fn(shards, FEATURE_SPEC, LABEL, 4, shuffle=False, repeat=False, cache=True)
    first = [int(i) for feats, _ in dataset for i in feats["id"].numpy()]
    second = [int(i) for feats, _ in dataset for i in feats["id"].numpy()]
    assert first == _ids(plain)
    assert second == first


def test_shuffle_and_repeat_keep_every_record(shards):
    dataset = input_fn(shards, FEATURE_SPEC, LABEL, 7, shuffle=True, repeat=True, seed=1)
    ids = [int(i) for feats, _ in dataset.take(6) for i in feats["id"].numpy()]
    assert len(ids) == 2 * SHARDS * PER_SHARD
    # Repeated: every record appears exactly twice over two epochs' worth of batches.
    assert sorted(ids) == sorted(list(range(SHARDS * PER_SHARD)) * 2)
    assert ids[: SHARDS * PER_SHARD] != sorted(ids[: SHARDS * PER_SHARD])


def test_augment_is_applied(shards):
    def double_value(feats, label):
        return {**feats, "value": feats["value"] * 2}, label

    for feats, _ in _epoch(shards, augment=double_value):
        np.testing.assert_allclose(feats["value"], feats["id"] * 1.0)


def test_augment_can_change_the_label(shards):
    def flip(feats, label):
        return feats, 1 - label

    for feats, label in _epoch(shards, augment=flip):
        np.testing.assert_array_equal(label, 1 - feats["id"] % 2)


def test_seeded_shuffle_is_reproducible(shards):
    def first_epoch(seed):
        dataset = input_fn(shards, FEATURE_SPEC, LABEL, 21, shuffle=True, repeat=False, seed=seed)
        return [int(i) for i in next(iter(dataset))[0]["id"].numpy()]

    assert first_epoch(3) == first_epoch(3)
    assert sorted(first_epoch(3)) == list(range(SHARDS * PER_SHARD))
