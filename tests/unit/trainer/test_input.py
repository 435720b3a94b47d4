"""trainer.input.input_fn over GZIP TFRecord shards of tf.Examples."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import tensorflow as tf

from trainer.input import input_fn
from trainer.input_wait import InputWaitMonitor

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

    order = first_epoch(3)
    assert first_epoch(3) == order
    assert sorted(order) == list(range(SHARDS * PER_SHARD))
    # The seed decides the order: another seed gives another one, and neither is the files' order.
    assert first_epoch(4) != order
    assert order != sorted(order)


# --- values against a reference parse, modes, cache, errors ---------------------------------


def _reference() -> dict[int, dict[str, object]]:
    """Every record parsed on its own with parse_single_example, keyed by id."""
    out = {}
    for s in range(SHARDS):
        for i in range(s * PER_SHARD, (s + 1) * PER_SHARD):
            parsed = tf.io.parse_single_example(_example(i), FEATURE_SPEC)
            out[i] = {k: v.numpy() for k, v in parsed.items()}
    return out


def _check_against_reference(batches, batch_size):
    reference = _reference()
    seen = []
    for feats, label in batches:
        n = len(label)
        assert 1 <= n <= batch_size
        assert label.shape == (n,)
        for key, value in feats.items():
            assert value.shape == (n,), key
        for row in range(n):
            ref = reference[int(feats["id"][row])]
            assert label[row] == ref[LABEL]
            for key, value in feats.items():
                assert value[row] == ref[key], key
        seen.extend(int(i) for i in feats["id"])
    assert sorted(seen) == sorted(reference)


@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.parametrize("shuffle", [False, True])
def test_values_equal_a_reference_parse(shards, deterministic, shuffle):
    dataset = input_fn(
        shards,
        FEATURE_SPEC,
        LABEL,
        5,
        shuffle=shuffle,
        repeat=False,
        deterministic=deterministic,
    )
    batches = [({k: v.numpy() for k, v in f.items()}, y.numpy()) for f, y in dataset]
    _check_against_reference(batches, 5)
    sizes = [len(y) for _, y in batches]
    if not shuffle and deterministic:  # full batches except the last, across shard ends
        assert sizes == [5, 5, 5, 5, 1]
    else:  # parallel readers may finish the partial batch before the others
        assert sorted(sizes) == [1, 5, 5, 5, 5]


def test_block_shuffle_keeps_every_record_and_batch_size(shards):
    dataset = input_fn(shards, FEATURE_SPEC, LABEL, 4, shuffle=True, shuffle_block=3, repeat=False)
    batches = [({k: v.numpy() for k, v in f.items()}, y.numpy()) for f, y in dataset]
    _check_against_reference(batches, 4)
    assert [len(y) for _, y in batches] == [4, 4, 4, 4, 4, 1]


def _round_robin(block: int) -> list[int]:
    """The shards' ids taken `block` at a time from each shard in turn (the interleave's order)."""
    blocks = [
        [
            list(range(s * PER_SHARD + i, min(s * PER_SHARD + i + block, (s + 1) * PER_SHARD)))
            for i in range(0, PER_SHARD, block)
        ]
        for s in range(SHARDS)
    ]
    return [i for turn in zip(*blocks, strict=True) for b in turn for i in b]


@pytest.mark.parametrize("batch_size", [4, 5])
def test_deterministic_order_is_the_interleave_of_the_shards(shards, batch_size):
    def ids():
        return _ids(_epoch(shards, batch_size=batch_size, deterministic=True))

    assert ids() == _round_robin(batch_size)
    assert ids() == _round_robin(batch_size)


@pytest.mark.parametrize("shuffle", [False, True])
def test_cache_on_and_off_give_the_same_data(shards, tmp_path, shuffle):
    def two_epochs(cache):
        dataset = input_fn(
            shards, FEATURE_SPEC, LABEL, 4, shuffle=shuffle, repeat=False, cache=cache, seed=7
        )
        return [[int(i) for f, _ in dataset for i in f["id"].numpy()] for _ in range(2)]

    off = two_epochs(False)
    for cache in (True, str(tmp_path / "cache")):
        on = two_epochs(cache)
        if shuffle:  # same records each epoch; order is reshuffled
            assert [sorted(e) for e in on] == [sorted(e) for e in off]
        else:
            assert on == off
        assert sorted(on[0]) == list(range(SHARDS * PER_SHARD))


def test_repeat_with_eval_cache_keeps_returning_every_record(shards):
    dataset = input_fn(shards, FEATURE_SPEC, LABEL, 7, shuffle=False, repeat=True, cache=True)
    ids = [int(i) for f, _ in dataset.take(9) for i in f["id"].numpy()]
    assert sorted(ids) == sorted(list(range(SHARDS * PER_SHARD)) * 3)


def _corrupt_shard(tmp_path):
    good = sorted(tmp_path.glob("data-*.gz"))[0].read_bytes()
    (tmp_path / "data-bad.gz").write_bytes(good[: len(good) // 2])  # truncated GZIP


def test_a_corrupt_shard_fails_by_default(shards, tmp_path):
    _corrupt_shard(tmp_path)
    with pytest.raises(tf.errors.DataLossError):
        _epoch(shards)


def test_ignore_errors_skips_a_corrupt_shard(shards, tmp_path):
    _corrupt_shard(tmp_path)
    ids = _ids(_epoch(shards, ignore_errors=True))
    assert set(range(SHARDS * PER_SHARD)) <= set(ids)


def test_cycle_length_threadpool_and_block_length_keep_the_data(shards):
    ids = _ids(_epoch(shards, cycle_length=1, threadpool_size=2))
    assert sorted(ids) == list(range(SHARDS * PER_SHARD))
    dataset = input_fn(shards, FEATURE_SPEC, LABEL, 4, shuffle=True, repeat=False, block_length=2)
    assert sorted(int(i) for f, _ in dataset for i in f["id"].numpy()) == sorted(ids)


def test_unknown_data_service_mode_is_rejected(shards):
    with pytest.raises(ValueError, match="distributed_epoch"):
        input_fn(
            shards,
            FEATURE_SPEC,
            LABEL,
            4,
            data_service_address="localhost:1",
            data_service_mode="x",
        )


# --- input wait vs compute ----------------------------------------------------------------------


def _sleep_ms(ms: float):
    def sleep(x):
        time.sleep(ms / 1000)
        return x

    return lambda x: tf.py_function(sleep, [x], x.dtype)


def _fit(dataset_delay_ms: float, compute_delay_ms: float, steps: int, epochs: int = 2):
    import tf_keras as keras

    from trainer.fast_steps import FastStepModel

    features = tf.data.Dataset.from_tensor_slices(
        (np.ones((64, 4), np.float32), np.zeros((64, 1), np.float32))
    ).repeat()
    if dataset_delay_ms:
        delay = _sleep_ms(dataset_delay_ms)
        features = features.map(lambda x, y: (delay(x), y))
    features = features.batch(8).prefetch(2)
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(1)(inputs)
    if compute_delay_ms:
        delay = _sleep_ms(compute_delay_ms)
        hidden = keras.layers.Lambda(lambda t: tf.reshape(delay(t), [-1, 1]))(hidden)
    # FastStepModel skips AutoGraph in its train step (~15 s of tracing otherwise).
    model = FastStepModel(inputs, hidden)
    model.compile("sgd", "mse")
    monitor = InputWaitMonitor()
    model.fit(
        monitor.wrap(features),
        epochs=epochs,
        steps_per_epoch=steps,
        callbacks=[monitor],
        verbose=0,
    )
    return monitor


def _check_sums(monitor, steps):
    for e in monitor.epochs:
        assert e["steps"] == steps
        for key in ("wait_s", "compute_s", "startup_s", "other_s", "epoch_s"):
            assert e[key] >= 0, key
        parts = e["wait_s"] + e["compute_s"] + e["startup_s"] + e["other_s"]
        assert parts == pytest.approx(e["epoch_s"], abs=0.002)
        # Without validation, most of an epoch is inside its steps (a loose bound: on a
        # loaded machine the callbacks between steps take longer, not the steps' share).
        assert e["other_s"] <= 0.5 * e["epoch_s"]


def test_input_wait_is_measured_when_input_is_slow():
    # 8 records a batch, 5 ms each: ~40 ms per batch to produce; compute ~1 ms.
    monitor = _fit(dataset_delay_ms=5, compute_delay_ms=0, steps=10)
    _check_sums(monitor, 10)
    second = monitor.epochs[1]
    assert second["startup_s"] == 0  # tracing happened in the first epoch only
    assert second["wait_s"] > 0.2  # ~10 x 40 ms (minus what the prefetch hid)
    assert second["wait_s"] > 3 * second["compute_s"]
    assert monitor.summary()["input_bound"] is True


def test_compute_is_measured_when_the_model_is_slow(tmp_path):
    monitor = _fit(dataset_delay_ms=0, compute_delay_ms=30, steps=8)
    _check_sums(monitor, 8)
    second = monitor.epochs[1]
    assert second["compute_s"] > 0.2  # 8 x 30 ms
    assert second["wait_s"] < 0.5 * second["compute_s"]
    report = monitor.write_json(str(tmp_path / "run" / "input_wait.json"))
    assert report["input_bound"] is False
    written = json.loads((tmp_path / "run" / "input_wait.json").read_text())
    assert written["total"]["steps"] == 16
    assert len(written["epochs"]) == 2
    total = written["total"]
    assert total["epoch_s"] == pytest.approx(
        total["wait_s"] + total["compute_s"] + total["startup_s"] + total["other_s"], abs=0.01
    )
