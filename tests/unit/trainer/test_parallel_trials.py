"""Parallel trials (trainer/parallel_trials.py): the oracle in this process, trials in worker
processes. The workers here are tests/support/fake_trial_worker.py (the same protocol, no
TensorFlow, a trial's score is its learning rate); tests/e2e/test_tuning_e2e.py runs the
real workers on a pipeline's data."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import keras_tuner as kt
import pytest

from trainer import parallel_trials
from trainer.parallel_trials import TrialError, TrialWorkers, run_trials, workers_for

FAKE_WORKER = (
    sys.executable,
    str(Path(__file__).resolve().parents[2] / "support" / "fake_trial_worker.py"),
)
RATES = [0.1, 0.2, 0.3, 0.4]


def _oracle(tmp_path: Path, max_trials: int = 4):
    hp = kt.HyperParameters()
    hp.Choice("learning_rate", RATES)
    oracle = kt.oracles.RandomSearchOracle(
        objective=kt.Objective("val_loss", "min"), max_trials=max_trials, hyperparameters=hp, seed=1
    )
    oracle._set_project_dir(str(tmp_path), "search")
    return oracle


def _workers(tmp_path: Path, count: int = 2, timeout: float = 120, **fake) -> TrialWorkers:
    fake = {"log": str(tmp_path / "trials.log"), **fake}
    return TrialWorkers(
        tuner_fn="unused.by.the.fake",
        fn_args={"working_dir": str(tmp_path / "work"), "custom_config": {"fake": fake}},
        count=count,
        timeout_seconds=timeout,
        threads=1,
        command=FAKE_WORKER,
    )


def _log(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "trials.log").read_text().splitlines()]


def test_every_trial_is_scored_by_the_workers_and_they_overlap(tmp_path):
    oracle = _oracle(tmp_path)
    run_trials(oracle, _workers(tmp_path, seconds=1.0), "val_loss")
    trials = list(oracle.trials.values())
    assert sorted(t.hyperparameters.values["learning_rate"] for t in trials) == RATES
    for trial in trials:
        assert trial.status == "COMPLETED"
        assert trial.score == trial.hyperparameters.values["learning_rate"]
    best = oracle.get_best_trials(1)[0]
    assert best.hyperparameters.values["learning_rate"] == 0.1
    log = _log(tmp_path)
    assert len({e["pid"] for e in log}) == 2  # two worker processes
    assert {e["threads"] for e in log if "start" in e} == {"1"}
    # Two trials ran at the same time: a second started before the first ended.
    starts = sorted(e["start"] for e in log if "start" in e)
    ends = sorted(e["end"] for e in log if "end" in e)
    assert starts[1] < ends[0]


def test_a_crashed_worker_fails_the_search_naming_the_trial(tmp_path):
    oracle = _oracle(tmp_path)
    with pytest.raises(TrialError, match=r"learning_rate.*0\.3.*exited with code 3") as error:
        run_trials(oracle, _workers(tmp_path, crash=0.3, seconds=0.2), "val_loss")
    # The end of the worker's output is quoted.
    assert "fake worker: crashing on purpose" in str(error.value)
    # Nothing is scored for the crashed trial.
    crashed = [
        t for t in oracle.trials.values() if t.hyperparameters.values["learning_rate"] == 0.3
    ]
    assert all(t.score is None for t in crashed)


def test_a_trial_that_raises_fails_the_search_with_its_error(tmp_path):
    with pytest.raises(
        TrialError, match=r"(?s)failed in its worker process worker-\d \(pid \d+\):.*does not build"
    ):
        run_trials(_oracle(tmp_path), _workers(tmp_path, **{"raise": 0.2}), "val_loss")


def test_a_hung_trial_times_out_and_its_workers_are_stopped(tmp_path, monkeypatch):
    made = []
    real = parallel_trials._Worker

    def worker(*args):
        made.append(real(*args))
        return made[-1]

    monkeypatch.setattr(parallel_trials, "_Worker", worker)
    with pytest.raises(TrialError, match="reported no score within"):
        run_trials(_oracle(tmp_path), _workers(tmp_path, timeout=3, hang=0.4), "val_loss")
    assert made and all(w.process.poll() is not None for w in made)


def test_workers_for_asks_for_parallel_trials_capped_by_the_budget(monkeypatch, caplog):
    # absl's warnings reach caplog whatever level an earlier test left the root logger at
    # (`python -m kubeflow`'s main, run in-process by its tests, sets it to ERROR).
    caplog.set_level(logging.WARNING, logger="absl")
    monkeypatch.setattr(parallel_trials, "cores", lambda: 2)
    fn_args = SimpleNamespace(
        working_dir="/w",
        custom_config={"tuner_fn": "trainer.taxi.train.tuner_fn"},
        data_accessor=object(),
    )
    tuning = {"max_trials": 3, "parallel_trials": 8, "trial_timeout_minutes": 0.5}
    workers = workers_for(fn_args, tuning)
    assert (workers.count, workers.timeout_seconds) == (3, 30.0)
    assert workers.threads == 1
    assert "parallel_trials 3 is more than the 2 core(s) here" in caplog.text
    assert workers_for(fn_args, {**tuning, "parallel_trials": 2}).threads == 1
    monkeypatch.setattr(parallel_trials, "cores", lambda: 8)
    assert workers_for(fn_args, {**tuning, "parallel_trials": 2}).threads == 4
    assert "data_accessor" not in workers.fn_args
    assert workers.fn_args["working_dir"] == "/w"
    assert workers_for(fn_args, {"max_trials": 3}) is None
    assert workers_for(fn_args, {"max_trials": 1, "parallel_trials": 2}) is None
    with pytest.raises(ValueError, match="tuner_fn"):
        workers_for(SimpleNamespace(custom_config={}), tuning)


def test_the_tuner_writes_the_same_outputs_as_a_sequential_search(tmp_path):
    """TFX's Tuner executor writes best_hyperparameters and tuner_results from the search's
    oracle: after a parallel search they hold every trial, best first."""
    from tfx.components.tuner.executor import write_best_hyperparameters
    from tfx.types import standard_artifacts

    from trainer.tuning import OBJECTIVE, _Search

    search = _Search(
        SimpleNamespace(),
        None,
        None,
        None,
        _workers(tmp_path),
        oracle=_oracle(tmp_path / "o", max_trials=3),
        directory=str(tmp_path / "search"),
        project_name="search",
        overwrite=True,
    )
    assert search.oracle.objective.name == OBJECTIVE.name
    search.search()
    outputs = {}
    for key, kind in (
        ("best_hyperparameters", standard_artifacts.HyperParameters),
        ("tuner_results", standard_artifacts.TunerResults),
    ):
        artifact = kind()
        artifact.uri = str(tmp_path / key)
        outputs[key] = [artifact]
    write_best_hyperparameters(search, outputs)
    best = json.loads((tmp_path / "best_hyperparameters" / "best_hyperparameters.txt").read_text())
    results = json.loads((tmp_path / "tuner_results" / "tuner_results.json").read_text())
    assert len(results) == 3
    assert [r["score"] for r in results] == sorted(r["score"] for r in results)
    assert best["values"]["learning_rate"] == results[0]["learning_rate"]


@pytest.mark.slow  # two fresh interpreters importing TensorFlow and TFX
@pytest.mark.timeout(900)
def test_real_workers_run_on_their_own_cores_with_their_share_of_threads(tmp_path):
    """`python -m trainer.parallel_trials` itself, with a stub tuner_fn (tests/support/stub_tuner.py):
    each worker is pinned to its own cores, and TensorFlow's pools are sized to them."""
    shares = parallel_trials.core_shares(2)
    workers = TrialWorkers(
        tuner_fn="stub_tuner.tuner_fn",
        fn_args={"working_dir": str(tmp_path / "work"), "custom_config": {}},
        count=2,
        timeout_seconds=600,
        threads=max(1, parallel_trials.cores() // 2),
    )
    oracle = _oracle(tmp_path, max_trials=2)
    run_trials(oracle, workers, "val_loss")
    assert sorted(t.score for t in oracle.trials.values()) == sorted(
        t.hyperparameters.values["learning_rate"] for t in oracle.trials.values()
    )
    seen = [json.loads(p.read_text()) for p in sorted((tmp_path / "work").glob("*/worker.json"))]
    assert len(seen) == 2
    for noted, share in zip(seen, shares, strict=True):
        assert noted["intra_op_threads"] == noted["inter_op_threads"] == workers.threads
        if share is not None:
            assert noted["cores"] == share
