"""The taxi pipeline on a real Spark cluster: a master and two worker JVMs on loopback
(the session's `spark_cluster`, started as `tfxp engine start spark --workers 2` does),
every Beam component run by the project's runner (`tfxp run --beam spark`).

Against the in-process run of the same rows (the session's `taxi_runs.first`):
- each split's examples are the same multiset;
- statistics are equal to 1e-6 relative, transformed examples to 1e-6;
- eval metrics within 0.01; the model is blessed and pushed;
- the master's REST API (`/json/`) shows the run's application finished, and the
  executors' logs show tasks on both workers.
Faults, on a cluster of their own: one worker JVM SIGKILLed while Transform runs; the
run completes, or fails naming Transform and completes when run again, and Transform's
output equals the in-process run's either way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import (
    SAMPLE_ROWS,
    split_examples,
    statistics_values,
    transformed_values,
    write_sample,
)
from spark_cluster import running_spark_cluster

from beam_spark import cluster
from beam_spark.cluster_api import executor_runs, master_json
from pipeline.config import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

TFXP = str(Path(sys.executable).parent / "tfxp")
# As the session's in-process runs (e2e_support.small_config).
STEPS = ["--train-steps", "40", "--eval-steps", "2"]
APP_NAME = "taxi-on-spark"
RUN_TIMEOUT_S = 2000


@dataclass
class SparkRun:
    tmp: Path
    code: int
    stdout: str
    stderr: str
    cluster: cluster.Cluster

    @property
    def pipeline_root(self) -> Path:
        return self.tmp / "run" / "pipeline_root"

    def summary(self) -> dict:
        assert self.code == 0, self.stdout[-3000:] + self.stderr[-5000:]
        return json.loads(self.stdout[self.stdout.index("\n{") :])


def _run(forkserver, tmp: Path, master: str, *extra: str, stdout=subprocess.PIPE):
    """`tfxp run --beam spark` on the sample in `tmp`, forked from the session's fork
    server (a process of its own, without a fresh interpreter's imports)."""
    args = [TFXP, "run", "--data-root", str(tmp / "data"), "--run-dir", str(tmp / "run"), *STEPS]
    args += ["--beam", "spark", "--spark-master", master]
    args += [f"--beam-arg=--spark_app_name={APP_NAME}", *extra]
    return forkserver.popen(
        args, cwd=PROJECT_ROOT, stdout=stdout, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture(scope="module")
def spark_run(spark_cluster, forkserver, tmp_path_factory) -> SparkRun:
    tmp = tmp_path_factory.mktemp("spark")
    write_sample(tmp / "data")
    run = _run(forkserver, tmp, spark_cluster.master_url, "--json")
    out, err = run.communicate(timeout=RUN_TIMEOUT_S)
    (tmp / "run.out").write_text(out)  # kept for a look after a failure
    (tmp / "run.err").write_text(err)
    return SparkRun(tmp, run.returncode, out, err, spark_cluster)


def test_the_run_on_spark_blesses_and_pushes(spark_run):
    summary = spark_run.summary()
    assert summary["blessed"] is True and summary["pushed"], summary
    states = {c["node_id"]: c["state"] for c in summary["components"]}
    for node in ("CsvExampleGen", "StatisticsGen", "Transform", "Evaluator", "Pusher"):
        assert states[node] == "COMPLETE", states


def test_examples_are_the_same_multiset_split_by_split(spark_run, taxi_runs):
    spark_run.summary()
    ours = split_examples(str(spark_run.pipeline_root))
    theirs = split_examples(taxi_runs.config.pipeline_root)
    assert set(ours) == set(theirs) == {"Split-train", "Split-eval"}
    assert sum(sum(c.values()) for c in ours.values()) == SAMPLE_ROWS
    for split in ours:
        assert ours[split] == theirs[split], split  # the same examples, as many times each


def test_statistics_equal_the_in_process_run(spark_run, taxi_runs):
    spark_run.summary()
    ours = statistics_values(spark_run.pipeline_root)
    theirs = statistics_values(Path(taxi_runs.config.pipeline_root))
    assert ours.keys() == theirs.keys() and ours
    # Means and deviations combine in another order across tasks: floats within 1e-6.
    assert ours == pytest.approx(theirs, rel=1e-6)


def _assert_transformed_equal(ours: dict, theirs: dict) -> None:
    import numpy as np

    assert ours.keys() == theirs.keys() and ours
    for key in ours:
        # The analyzers' sums combine in another order across tasks: floats within 1e-6.
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-6, atol=1e-6, err_msg=str(key))


def test_transformed_examples_equal_the_in_process_run(spark_run, taxi_runs):
    spark_run.summary()
    _assert_transformed_equal(
        transformed_values(spark_run.pipeline_root),
        transformed_values(Path(taxi_runs.config.pipeline_root)),
    )


def test_eval_metrics_equal_the_in_process_run_within_0_01(spark_run, taxi_runs):
    ours = spark_run.summary()["metrics"]
    theirs = taxi_runs.first.metrics
    for name in ("binary_accuracy", "auc", "example_count"):
        assert ours[name] == pytest.approx(theirs[name], abs=0.01), (name, ours, theirs)


def test_the_master_shows_the_applications_finished_with_tasks_on_both_workers(spark_run):
    spark_run.summary()
    apps = [
        a for a in master_json(spark_run.cluster.web_ui)["completedapps"] if a["name"] == APP_NAME
    ]
    # One Spark application for the run: its Beam components (ExampleGen, StatisticsGen,
    # Transform, Evaluator) share it (--spark_keep_context, pipeline/beam.py).
    assert len(apps) == 1, apps
    assert {a["state"] for a in apps} == {"FINISHED"}, apps
    work = os.path.join(spark_run.cluster.directory, "work")
    runs = executor_runs(work, [a["id"] for a in apps])
    tasks: dict[str, dict[str, int]] = {}
    for r in runs:
        tasks.setdefault(r.app_id, {}).setdefault(r.worker, 0)
        tasks[r.app_id][r.worker] += r.tasks
    assert {w for per in tasks.values() for w, n in per.items() if n} == {"worker-1", "worker-2"}
    # The largest application (Transform's analysis) spread over both workers.
    largest = max(tasks.values(), key=lambda per: sum(per.values()))
    assert all(largest.get(w, 0) > 0 for w in ("worker-1", "worker-2")), tasks


def _kill_a_worker_once_it_works(own: cluster.Cluster, run, deadline: float) -> bool:
    """SIGKILLs worker-1's JVM once an application has finished a task there; False if
    the run ended first."""
    victim = own.workers[0]
    work = os.path.join(own.directory, "work")
    while time.monotonic() < deadline and run.poll() is None:
        active = [a["id"] for a in master_json(own.web_ui).get("activeapps", [])]
        if active and any(r.tasks for r in executor_runs(work, active) if r.worker == victim.name):
            os.kill(victim.pid, signal.SIGKILL)
            return True
        time.sleep(0.5)
    return False


def test_a_worker_killed_during_transform_leaves_its_output_equal(
    spark_run, taxi_runs, forkserver, tmp_path
):
    """Transform alone, again (--no-cache) on the run's own store, on a cluster of its
    own whose worker-1 is SIGKILLed while Transform's application runs."""
    spark_run.summary()
    partial = ["--from-node", "Transform", "--to-node", "Transform", "--no-cache"]
    with running_spark_cluster(tmp_path / "cluster") as own:
        run = _run(forkserver, spark_run.tmp, own.master_url, *partial)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        killed = _kill_a_worker_once_it_works(own, run, deadline)
        out, err = run.communicate(timeout=max(1.0, deadline - time.monotonic()))
        assert killed, f"the run ended before a worker could be killed:\n{err[-3000:]}"
        if run.returncode != 0:
            # A clear failure names the component; the rerun, on the worker left, completes.
            assert "Transform" in err, err[-3000:]
            again = _run(forkserver, spark_run.tmp, own.master_url, *partial)
            out, err = again.communicate(timeout=RUN_TIMEOUT_S)
            assert again.returncode == 0, out[-3000:] + err[-3000:]
    _assert_transformed_equal(
        transformed_values(spark_run.pipeline_root, index=-1),
        transformed_values(Path(taxi_runs.config.pipeline_root)),
    )
