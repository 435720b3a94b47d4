"""The taxi Trainer on two worker processes on loopback (MultiWorkerMirroredStrategy, CPU ring).

Each worker is its own process with its own TF_CONFIG (free ports) running
TFX's Trainer executor on the same Transform output and arguments, as Vertex
AI replicas run it. Compared with one worker on the same data and steps.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from transform_output import TRAIN_SHARDS, TaxiTransform, taxi_transform  # noqa: F401

from tfxp.local.workers import WorkerResult, launch, trainer_args
from trainer.curves import TENSORBOARD_DIR
from trainer.distribution import INPUT_WAIT_FILE, WORKER_INPUT_WAIT_FILE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

TRAIN_STEPS = 100
WORKER_DEADLINE_S = 600  # per launch; the workers are killed after it


@dataclasses.dataclass(frozen=True)
class Trained:
    out: Path
    model_dir: str
    model_run_dir: Path
    results: list[WorkerResult]
    tmp: Path  # the workers' TMPDIR


def _train(taxi: TaxiTransform, out: Path, workers: int, forkserver) -> Trained:
    config = taxi.config.replace(train_steps=TRAIN_STEPS, eval_steps=2)
    args = dataclasses.replace(trainer_args(config, out), examples=taxi.examples)
    tmp = out / "tmp"
    tmp.mkdir(parents=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMPDIR", str(tmp))  # where a non-chief writes its throw-away copy
        # Each worker forked from the session's fork server (tests/conftest.py).
        results = launch(args, workers, out, WORKER_DEADLINE_S, popen=forkserver.popen)
    logs = {r.index: r.log.read_text()[-3000:] for r in results if r.returncode != 0}
    assert not logs, f"workers failed or timed out: {logs}"
    return Trained(out, args.serving_model_dir, Path(args.model_run_dir), results, tmp)


@pytest.fixture(scope="module")
def one_worker(taxi_transform: TaxiTransform, tmp_path_factory, forkserver) -> Trained:  # noqa: F811
    return _train(taxi_transform, tmp_path_factory.mktemp("one_worker"), 1, forkserver)


@pytest.fixture(scope="module")
def two_workers(taxi_transform: TaxiTransform, tmp_path_factory, forkserver) -> Trained:  # noqa: F811
    return _train(taxi_transform, tmp_path_factory.mktemp("two_workers"), 2, forkserver)


def _accuracy(model_dir: str, raw_examples: list[str]) -> float:
    """Binary accuracy of the exported model on raw examples, through its own signatures."""
    import tensorflow as tf

    loaded = tf.saved_model.load(model_dir)
    serve = loaded.signatures["serving_default"]
    transform = loaded.signatures["transform_features"]
    right = total = 0
    for batch in tf.data.TFRecordDataset(raw_examples, compression_type="GZIP").batch(1024):
        label = tf.reshape(transform(examples=batch)["tips_xf"], [-1]).numpy() == 1
        predicted = tf.reshape(serve(examples=batch)["probability"], [-1]).numpy() > 0.5
        right += int((label == predicted).sum())
        total += len(label)
    assert total > 3000
    return right / total


def test_chief_writes_the_serving_model(two_workers: Trained):
    import tensorflow as tf

    loaded = tf.saved_model.load(two_workers.model_dir)
    assert {"serving_default", "transform_features"} <= set(loaded.signatures)
    chief_log = two_workers.results[0].log.read_text()
    assert "worker-0 is worker 0 of 2 (chief)" in chief_log


def test_non_chief_copy_is_deleted(two_workers: Trained):
    log = two_workers.results[1].log.read_text()
    assert "worker-1 is worker 1 of 2" in log
    saved = re.search(r"worker-1 saved its copy to (\S+) and deleted it", log)
    assert saved, log[-2000:]
    copy = Path(saved.group(1))
    assert copy.parent == two_workers.tmp  # it was written, in its TMPDIR
    assert not copy.exists()
    assert not list(two_workers.tmp.glob("model-*"))


def test_train_files_are_sharded_by_file(two_workers: Trained):
    per_worker = TRAIN_SHARDS // 2
    for result in two_workers.results:
        log = result.log.read_text()
        assert f"worker {result.index} reads {per_worker} of {TRAIN_SHARDS} files" in log
        # The eval split is one file: each worker keeps every other record of it.
        assert "1 file(s) for 2 workers" in log


def test_each_worker_recorded_its_input_wait(two_workers: Trained):
    reports = [
        json.loads((two_workers.model_run_dir / WORKER_INPUT_WAIT_FILE.format(index=i)).read_text())
        for i in range(2)
    ]
    for report in reports:
        assert report["total"]["steps"] == TRAIN_STEPS  # the same steps on every worker
        assert report["total"]["wait_s"] > 0 and report["total"]["compute_s"] > 0
    # Two processes' own clocks: never the same figures.
    assert reports[0]["total"]["epoch_s"] != reports[1]["total"]["epoch_s"]
    chief = json.loads((two_workers.model_run_dir / INPUT_WAIT_FILE).read_text())
    assert chief == reports[0]


def test_one_worker_writes_one_input_wait_file(one_worker: Trained):
    found = sorted(p.name for p in one_worker.model_run_dir.iterdir())
    assert found == [INPUT_WAIT_FILE, TENSORBOARD_DIR]  # and the training curves
    assert "multi-worker training" not in one_worker.results[0].log.read_text()


def test_two_workers_match_one_worker_accuracy(
    one_worker: Trained,
    two_workers: Trained,
    taxi_transform: TaxiTransform,  # noqa: F811
):
    single = _accuracy(one_worker.model_dir, taxi_transform.raw_eval)
    double = _accuracy(two_workers.model_dir, taxi_transform.raw_eval)
    print(f"eval accuracy: 1 worker {single:.4f}, 2 workers {double:.4f}")
    assert single > 0.6  # it learned something to compare
    assert abs(single - double) <= 0.01
