"""trainer.distribution: the cluster TF_CONFIG describes, sharding, and single-worker training as before."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from runtime.training_curves import read_curves
from trainer.curves import TENSORBOARD_DIR
from trainer.distribution import (
    INPUT_WAIT_FILE,
    TF_CONFIG,
    Cluster,
    ClusterConfigError,
    TrainingJob,
    cluster_from_env,
    per_worker_batch,
    shard_files,
    train_and_export,
    training_strategy,
)
from trainer.fast_steps import FastStepModel
from trainer.input import input_fn


def _env(cluster: dict, task_type: str, index: int) -> dict[str, str]:
    return {
        TF_CONFIG: json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})
    }


def test_no_tf_config_is_one_local_worker():
    assert cluster_from_env({}) == Cluster()
    assert not Cluster().multi_worker and Cluster().is_chief


def test_one_worker_in_tf_config_is_not_multi_worker():
    assert cluster_from_env(_env({"worker": ["a:1"]}, "worker", 0)) == Cluster()


def test_workers_only_worker_zero_is_chief():
    cluster = {"worker": ["a:1", "b:1", "c:1"]}
    second = cluster_from_env(_env(cluster, "worker", 1))
    assert (second.workers, second.index, second.is_chief) == (3, 1, False)
    assert cluster_from_env(_env(cluster, "worker", 0)).is_chief


def test_chief_counts_as_a_worker_and_comes_first():
    # Vertex AI's layout: worker pool 0 is the chief, pool 1 the workers.
    cluster = {"chief": ["c:1"], "worker": ["w:1", "w:2"]}
    chief = cluster_from_env(_env(cluster, "chief", 0))
    worker = cluster_from_env(_env(cluster, "worker", 0))
    assert (chief.workers, chief.index, chief.is_chief) == (3, 0, True)
    assert (worker.index, worker.is_chief, worker.name) == (1, False, "worker-0")


@pytest.mark.parametrize(
    "env, says",
    [
        ({TF_CONFIG: "{not json"}, "not a JSON object"),
        (_env({"worker": ["a:1", "b:1"], "ps": ["p:1"]}, "ps", 0), "task type 'ps'"),
        (_env({"worker": ["a:1", "b:1"]}, "worker", 2), "task index 2"),
        (_env({"chief": ["a:1", "b:1"]}, "chief", 0), "2 chiefs"),
    ],
)
def test_bad_tf_config_says_what_is_wrong(env, says):
    with pytest.raises(ClusterConfigError, match=says):
        cluster_from_env(env)


def test_single_worker_uses_the_default_strategy():
    assert training_strategy(Cluster()) is tf.distribute.get_strategy()


def test_global_batch_is_split_between_workers():
    assert per_worker_batch(256, Cluster(workers=2)) == 128
    assert per_worker_batch(256, Cluster()) == 256
    with pytest.raises(ValueError, match="batch_size=256 is the global batch.*3 workers"):
        per_worker_batch(256, Cluster(workers=3))


def _write_shards(folder, shards: int, per_shard: int) -> list[str]:
    folder.mkdir()
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    paths = []
    for s in range(shards):
        path = str(folder / f"part-{s}.gz")
        with tf.io.TFRecordWriter(path, options) as w:
            for r in range(per_shard):
                x = float(s * per_shard + r)
                example = tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            "x": tf.train.Feature(float_list=tf.train.FloatList(value=[x])),
                            "y": tf.train.Feature(
                                int64_list=tf.train.Int64List(value=[int(x) % 2])
                            ),
                        }
                    )
                )
                w.write(example.SerializeToString())
        paths.append(path)
    return paths


def test_files_are_dealt_between_workers(tmp_path):
    _write_shards(tmp_path / "d", 5, 1)
    pattern = str(tmp_path / "d" / "*")
    mine = [shard_files(pattern, Cluster(workers=2, index=i)) for i in range(2)]
    assert [len(files) for files, _ in mine] == [3, 2]
    assert all(shard is None for _, shard in mine)
    assert sorted(mine[0][0] + mine[1][0]) == sorted(tf.io.gfile.glob(pattern))
    assert shard_files(pattern, Cluster()) == (pattern, None)  # one worker: untouched


def test_fewer_files_than_workers_shards_records(tmp_path):
    paths = _write_shards(tmp_path / "d", 1, 10)
    spec = {"x": tf.io.FixedLenFeature([1], tf.float32), "y": tf.io.FixedLenFeature([1], tf.int64)}
    seen = []
    for index in range(3):
        files, shard = shard_files(paths, Cluster(workers=3, index=index))
        assert files == paths and shard == (3, index)
        data = input_fn(files, spec, "y", 4, shuffle=False, repeat=False, record_shard=shard)
        seen.append(sorted(float(v) for x, _ in data for v in x["x"].numpy().ravel()))
    # Disjoint, and together every record once.
    assert sorted(v for part in seen for v in part) == [float(i) for i in range(10)]
    assert seen[0] == [0.0, 3.0, 6.0, 9.0]


def test_no_files_is_an_error_naming_the_pattern(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        shard_files(str(tmp_path / "nothing-here*"), Cluster(workers=2))


def test_single_worker_trains_and_exports_as_before(tmp_path, monkeypatch):
    """No TF_CONFIG: the default strategy, the model in serving_model_dir, one input-wait file."""
    monkeypatch.delenv(TF_CONFIG, raising=False)
    paths = _write_shards(tmp_path / "d", 2, 64)
    spec = {"x": tf.io.FixedLenFeature([1], tf.float32), "y": tf.io.FixedLenFeature([1], tf.int64)}
    shards_seen = []

    def dataset(patterns, batch, training, record_shard):
        shards_seen.append((patterns, batch, record_shard))
        return input_fn(patterns, spec, "y", batch, shuffle=training)

    def build() -> keras.Model:
        assert not tf.distribute.has_strategy()  # the default strategy: no scope entered
        inputs = {"x": keras.Input(shape=(1,), name="x")}
        # FastStepModel, as every trainer's: a plain keras.Model's AutoGraph conversion
        # cost this test ~12 CPU-s (trainer/fast_steps.py).
        model = FastStepModel(inputs, keras.layers.Dense(1, activation="sigmoid")(inputs["x"]))
        model.compile(optimizer="adam", loss="binary_crossentropy")
        return model

    fn_args = SimpleNamespace(
        train_files=[str(tmp_path / "d" / "*")],
        eval_files=[paths[0]],
        train_steps=4,
        eval_steps=1,
        serving_model_dir=str(tmp_path / "serving"),
        model_run_dir=str(tmp_path / "model_run"),
    )
    model = train_and_export(
        fn_args,
        TrainingJob(
            build_model=build,
            dataset=dataset,
            signatures=lambda m: None,
            batch_size=16,
            eval_batch_size=32,
        ),
    )
    # The whole batch and the patterns as given: nothing sharded.
    assert shards_seen == [(fn_args.train_files, 16, None), (fn_args.eval_files, 32, None)]
    assert sorted(os.listdir(fn_args.model_run_dir)) == [INPUT_WAIT_FILE, TENSORBOARD_DIR]
    # TensorBoard's curves, read back from the event files: one point per epoch.
    curves = read_curves(str(tmp_path / "model_run" / TENSORBOARD_DIR))
    assert set(curves) == {"train", "validation"}
    assert set(curves["train"]) == {"epoch_loss", "epoch_learning_rate"}
    assert set(curves["validation"]) == {"epoch_loss"}
    assert [step for step, _ in curves["train"]["epoch_loss"]] == [0, 1, 2, 3]
    assert curves["train"]["epoch_learning_rate"][0][1] == pytest.approx(0.001)  # adam's
    history = model.history.history
    for kind, key in (("train", "loss"), ("validation", "val_loss")):
        logged = [value for _, value in curves[kind]["epoch_loss"]]
        assert logged == pytest.approx(history[key], rel=1e-6)
    report = json.loads((tmp_path / "model_run" / INPUT_WAIT_FILE).read_text())
    assert report["total"]["steps"] == 4
    loaded = keras.models.load_model(fn_args.serving_model_dir)
    x = np.array([[1.0], [2.0]], dtype=np.float32)
    np.testing.assert_allclose(loaded({"x": x}), model({"x": x}), rtol=1e-6)


def test_after_export_no_worker_exits_while_a_peer_may_need_it(tmp_path):
    """The chief returns only after every other worker's mark, the others only after the
    chief's: a collective's last fetch cannot find its peer gone."""
    import threading
    import time

    from trainer.distribution import EXPORT_SYNC_DIR, Cluster, _exit_handshake

    seen_on_return: dict[str, set[str]] = {}  # the marks present when each returned

    def worker(index: int, delay: float) -> None:
        time.sleep(delay)
        _exit_handshake(
            Cluster(workers=3, index=index, task_type="worker", task_id=index), str(tmp_path), 30
        )
        seen_on_return[f"w{index}"] = set(os.listdir(tmp_path / EXPORT_SYNC_DIR))

    # The chief first; the last worker marks a second after it started waiting.
    threads = [threading.Thread(target=worker, args=a) for a in ((0, 0.0), (1, 0.3), (2, 1.0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    # The chief returned after every other worker's mark, the others after the chief's.
    assert {"saved-1", "saved-2"} <= seen_on_return["w0"]
    assert "saved-0" in seen_on_return["w1"] and "saved-0" in seen_on_return["w2"]
    assert sorted(os.listdir(tmp_path / EXPORT_SYNC_DIR)) == ["saved-0", "saved-1", "saved-2"]


def test_a_worker_that_never_marks_fails_the_chief_naming_it(tmp_path):
    from trainer.distribution import Cluster, _exit_handshake

    chief = Cluster(workers=2, index=0, task_type="worker", task_id=0)
    with pytest.raises(
        RuntimeError, match=r"worker-0: after export, no mark from .*saved-1 within 1 s"
    ):
        _exit_handshake(chief, str(tmp_path), timeout_s=1)
