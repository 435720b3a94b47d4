"""Retraining on the same data, code and hyperparameters gives the same model quality.

`tfxp run --no-cache` re-executes every component. With the Trainer's fixed
seeds (weights, shuffling) and TensorFlow's deterministic ops, the eval metrics
of the retrained model equal the first run's exactly, and `tfxp runs diff`
says so: data, schema, code, hyperparameters and metrics unchanged, only the
model artifact is new.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _own_metrics(metrics: dict[str, float]) -> dict[str, float]:
    # *_diff metrics compare with a baseline model, which the first run did not have.
    return {k: v for k, v in metrics.items() if not k.endswith("_diff")}


def test_no_cache_retrain_gives_identical_eval_metrics(taxi_runs):
    first, again = taxi_runs.first, taxi_runs.retrained
    assert again.executed, "the --no-cache run must execute, not reuse the cache"
    assert set(again.executed) >= {"CsvExampleGen", "Transform", "Trainer", "Evaluator"}
    assert _own_metrics(again.metrics) == _own_metrics(first.metrics)


def test_runs_diff_reports_the_retrain_unchanged(taxi_runs):
    from tfxp.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = ["runs", "diff", taxi_runs.first.run_id, taxi_runs.retrained.run_id]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--run-dir", taxi_runs.config.run_dir, "--json"])
    assert code == 0, err.getvalue()
    report = json.loads(out.getvalue())
    assert {"data", "schema", "code", "hyperparameters", "metrics"} <= set(report["unchanged"])
    assert set(report["changed"]) == {"model"}, report["changed"]
