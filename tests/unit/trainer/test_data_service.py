"""tf.data service: a real dispatcher and workers, in-process on free ports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import child
import pytest
import tensorflow as tf

from trainer import data_service
from trainer.input import input_fn
from trainer.ports import free_port

SHARDS = 4
PER_SHARD = 25
LABEL = "label_xf"
FEATURE_SPEC = {
    "id": tf.io.FixedLenFeature([], tf.int64),
    "value": tf.io.FixedLenFeature([], tf.float32),
    LABEL: tf.io.FixedLenFeature([], tf.int64),
}
ROOT = Path(__file__).resolve().parents[3]


def _example(i: int) -> bytes:
    feature = {
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "value": tf.train.Feature(float_list=tf.train.FloatList(value=[i * 0.25])),
        LABEL: tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 3])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    for s in range(SHARDS):
        with tf.io.TFRecordWriter(str(root / f"part-{s}.gz"), options) as writer:
            for i in range(s * PER_SHARD, (s + 1) * PER_SHARD):
                writer.write(_example(i))
    return str(root / "part-*.gz")


@pytest.fixture(scope="module")
def cluster():
    with data_service.start_cluster(2) as running:
        yield running


def _records(dataset, steps=None) -> Counter:
    if steps is not None:
        dataset = dataset.take(steps)
    out = Counter()
    for feats, label in dataset:
        for i, v, y in zip(feats["id"].numpy(), feats["value"].numpy(), label.numpy(), strict=True):
            out[(int(i), float(v), int(y))] += 1
    return out


def _local(shards, **kwargs) -> Counter:
    return _records(input_fn(shards, FEATURE_SPEC, LABEL, 8, repeat=False, **kwargs))


def test_cluster_has_a_dispatcher_and_two_workers(cluster):
    assert cluster.address.startswith("grpc://localhost:")
    assert len(cluster.workers) == 2


@pytest.mark.parametrize("shuffle", [False, True])
def test_distributed_epoch_yields_the_same_records_as_local(shards, cluster, shuffle):
    local = _local(shards, shuffle=shuffle)
    assert sum(local.values()) == SHARDS * PER_SHARD
    served = _local(shards, shuffle=shuffle, data_service_address=cluster.address)
    assert served == local


def test_address_without_protocol_and_no_compression(shards, cluster):
    address = data_service.strip_protocol(cluster.address)
    served = _local(shards, data_service_address=address, data_service_compression=None)
    assert served == _local(shards)


def test_parallel_epochs_has_every_worker_produce_everything(shards, cluster):
    served = _local(
        shards,
        cache=True,
        data_service_address=cluster.address,
        data_service_mode="parallel_epochs",
    )
    assert served == Counter({k: 2 * n for k, n in _local(shards).items()})


def test_repeat_through_the_service_serves_whole_epochs(shards, cluster):
    dataset = input_fn(
        shards, FEATURE_SPEC, LABEL, 10, repeat=True, data_service_address=cluster.address
    )
    # Batches are cut on the workers: count records, not batches.
    ids = Counter()
    iterator = iter(dataset)
    while sum(ids.values()) < 2 * SHARDS * PER_SHARD:
        feats, _ = next(iterator)
        ids.update(int(i) for i in feats["id"].numpy())
    assert sum(ids.values()) == 2 * SHARDS * PER_SHARD
    assert set(ids) == set(range(SHARDS * PER_SHARD))


def test_augment_runs_on_the_workers(shards, cluster):
    def negate(feats, label):
        return {**feats, "value": -feats["value"]}, label

    served = _local(shards, augment=negate, data_service_address=cluster.address)
    assert served == Counter({(i, -v, y): n for (i, v, y), n in _local(shards).items()})


def test_command_serves_until_interrupted(shards, forkserver):
    port = free_port()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}
    proc = forkserver.popen(  # the command in a process of its own, forked
        [sys.executable, "-m", "trainer.data_service", "--workers", "2", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        lines = [child.readline(proc, timeout=120) for _ in range(3)]
        assert f"dispatcher at grpc://localhost:{port}" in lines[0], lines
        assert "2 worker(s)" in lines[1], lines
        served = _local(shards, data_service_address=f"localhost:{port}")
        assert served == _local(shards)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = child.finish(proc, timeout=30)
    assert proc.returncode == 0
    assert "stopped" in out


def test_trainer_hyperparameters_for_the_service_and_augment():
    from trainer.base import Hyperparameters, import_augment

    hp = Hyperparameters.from_custom_config(
        {"hyperparameters": {"data_service_address": "hostA:5050", "shuffle_block": 32}}
    )
    assert (hp.data_service_address, hp.data_service_mode) == ("hostA:5050", "distributed_epoch")
    assert Hyperparameters().data_service_address is None
    with pytest.raises(ValueError, match="parallel_epochs"):
        Hyperparameters.from_custom_config({"hyperparameters": {"data_service_mode": "bogus"}})
    assert import_augment(None) is None
    assert import_augment("trainer.data_service.strip_protocol") is data_service.strip_protocol
