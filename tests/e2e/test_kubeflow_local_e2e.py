"""The compiled Kubeflow PipelineJob, run task by task under KFP's local orchestrator (run-local).

Taxi: the data of the session's LocalDagRunner runs (`taxi_runs`: the
embedded sample as span 1), compiled with `python -m kubeflow compile` (the
file a user deploys; pipeline root a tmp folder standing for the bucket) for
the same train steps, run with `run-local`, and compared with the first of
those LocalDagRunner runs. Then a drifted span 2 (fares times ten), in another
folder given as the `data_root` runtime parameter (as
`kfp.Client.create_run_from_pipeline_package(..., arguments=...)` passes it),
on the same pipeline root: the drift baseline resolver finds the first run's
statistics, the gate blocks, and nothing downstream runs.

Digits: compiled with its default data root (the image's /pipeline/data/digits),
its dataset file with a small search (DIGITS_TUNING: two trials at once, in worker
processes of the Tuner's task), run to a pushed model trained with the best trial's values.

Runner: every job forks its tasks from a warm server (`--runner forked`: the
same commands in the same environment and working directory, without a fresh
interpreter's ~10 s of imports per task). The default runner's handler (a fresh
subprocess per task) is tested on the spec's entrypoint command in
tests/unit/kubeflow/local/test_kubeflow_local.py.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import write_scaled_fares

from kubeflow.local import job_runner
from kubeflow.local.job import LocalRun
from kubeflow.local.job_runner import run_local_job
from pipeline import node_ids

# The first taxi test may also pay for the session's `taxi_runs` (four LocalDagRunner
# runs) when no test before it did.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

IMAGE = "registry.example.com/ml/tfx-pipeline:test"
DIGITS_TUNING = """
tuning:
  max_trials: 2
  parallel_trials: 2
  trial_steps: 20
  search_space:
    dropout: {choices: [0.1, 0.2]}
"""
QUIET = {"printer": lambda _: None}


def _compile(out: Path, root: Path, *flags: str) -> Path:
    from kubeflow.__main__ import main

    args = ["compile", "--image", IMAGE, "--pipeline-root", str(root), "-o", str(out), *flags]
    assert main(args) == 0
    return out


@dataclass
class TaxiKfp:
    tmp: Path
    data: Path
    root: Path
    package: Path
    run: LocalRun


# One run-local job per fixture: a test's timeout covers at most one job's set-up
# (and `taxi_runs`, see above).
@pytest.fixture(scope="module")
def task_server(tmp_path_factory):
    """One warm task server for the taxi jobs (the digits job, on another worker, starts
    its own through the command)."""
    with job_runner.task_server("forked", str(tmp_path_factory.mktemp("kfp-tasks"))) as server:
        yield server


@pytest.fixture(scope="module")
def taxi(tmp_path_factory, taxi_runs, task_server) -> TaxiKfp:
    """The LocalDagRunner runs' span 1, compiled for it and their steps, run with run-local."""
    tmp = tmp_path_factory.mktemp("kfp-taxi")
    data = Path(taxi_runs.config.data_root)  # only read: the runs' data stays as it was
    root = tmp / "kfp-root"
    steps = str(taxi_runs.config.train_steps)
    package = _compile(tmp / "taxi.json", root, "--data-root", str(data), "--train-steps", steps)
    run = run_local_job(str(package), str(root), runner="forked", server=task_server, **QUIET)
    return TaxiKfp(tmp, data, root, package, run)


@pytest.fixture(scope="module")
def local_root(taxi_runs) -> Path:
    """The pipeline root of the LocalDagRunner runs of the same data and steps."""
    return Path(taxi_runs.config.pipeline_root)


@pytest.fixture(scope="module")
def drifted(taxi, task_server) -> LocalRun:
    """Span 2, drifted, in another folder passed as the runtime parameter; same pipeline root."""
    folder = taxi.tmp / "drifted"
    span1 = shutil.copytree(taxi.data / "span-1", folder / "span-1") / "data.csv"
    write_scaled_fares(folder, 2, span1, 10)
    return run_local_job(
        str(taxi.package),
        str(taxi.root),
        arguments={"data_root": str(folder)},
        runner="forked",
        server=task_server,
        **QUIET,
    )


def _failure(run: LocalRun) -> str:
    if run.succeeded:
        return ""
    task = run.tasks[run.failed_task]
    return f"{task.name} failed, log {task.log}:\n" + Path(task.log).read_text()[-3000:]


def _check_complete_run(run: LocalRun) -> None:
    from kfp.local import executor_output_utils

    assert run.succeeded, _failure(run)
    for task in run.tasks.values():
        if task.kind == "resolver":
            assert task.state == "resolved", task.name
            continue
        assert task.state == "complete" and task.returncode == 0, task.name
        # The ExecutorOutput each TFX entrypoint wrote parses, and names every output.
        written = executor_output_utils.load_executor_output(task.executor_output)
        assert set(written.artifacts) == set(task.outputs), task.name
        for key, artifacts in task.outputs.items():
            [artifact] = artifacts
            # The URI KFP assigned: <root>/<run>/<task>/<output key>, with files in it.
            assert artifact["uri"] == str(Path(run.run_root) / task.name / key)
            files = [p for p in Path(artifact["uri"]).rglob("*") if p.is_file()]
            assert files, f"{task.name}.{key}: no files at {artifact['uri']}"
    blessing = run.output(node_ids.EVALUATOR, "blessing")
    assert blessing["metadata"]["blessed"] == 1
    assert (Path(blessing["uri"]) / "BLESSED").is_file()
    pushed = run.output(node_ids.PUSHER, "pushed_model")
    assert pushed["metadata"]["pushed"] == 1
    destination = Path(pushed["metadata"]["pushed_destination"])
    assert destination.parent == Path(run.pipeline_root) / "serving"
    assert (destination / "saved_model.pb").is_file()
    # The serving check passed in its fresh process, and the card sits beside the push.
    check = run.output(node_ids.SERVING_CHECK, "blessing")
    assert check["metadata"]["blessed"] == 1, check["metadata"]
    assert check["metadata"]["verdict"] == "passed"
    assert check["metadata"]["latency_batch_64_p99_ms"] > 0
    assert (destination / "model_card.html").is_file()
    card = Path(run.output(node_ids.MODEL_CARD, "card")["uri"]) / "card.html"
    assert "slice-metrics" in card.read_text()


def _count_examples(split_dir: Path) -> int:
    count = 0
    for shard in split_dir.glob("*.gz"):
        with gzip.open(shard, "rb") as f:
            data = f.read()
        pos = 0
        while pos < len(data):  # TFRecord: length (8), crc (4), payload, crc (4)
            length = int.from_bytes(data[pos : pos + 8], "little")
            pos += 12 + length + 4
            count += 1
    return count


def _local_artifact(root: Path, node: str, key: str) -> Path:
    """The first LocalDagRunner run's output: the lowest execution id (later runs of the
    session's fixture, re-executions and a `--no-cache` retrain, wrote higher ones)."""
    return min((p for p in (root / node / key).iterdir() if p.is_dir()), key=lambda p: int(p.name))


def test_taxi_job_runs_every_task_to_a_pushed_model(taxi):
    _check_complete_run(taxi.run)
    # The first run on an empty pipeline root: the resolvers found nothing.
    for task in taxi.run.tasks.values():
        if task.kind == "resolver":
            assert all(v == [] for v in task.outputs.values()), task.name
    examples = taxi.run.output(node_ids.EXAMPLE_GEN, "examples")
    # From the ExampleGen driver (preCacheCheck), a custom property as TFX's V2 driver sets it.
    assert examples["metadata"]["custom:span"] == 1
    assert json.loads(examples["metadata"]["split_names"]) == ["train", "eval"]


def test_taxi_job_matches_a_local_dag_runner_run(taxi, local_root):
    from metadata.summary import read_eval_metrics

    kfp_examples = Path(taxi.run.output(node_ids.EXAMPLE_GEN, "examples")["uri"])
    local_examples = _local_artifact(local_root, node_ids.EXAMPLE_GEN, "examples")
    for split in ("train", "eval"):
        kfp_count = _count_examples(kfp_examples / f"Split-{split}")
        assert kfp_count == _count_examples(local_examples / f"Split-{split}"), split
        assert kfp_count > 0
    kfp_schema = Path(taxi.run.output(node_ids.SCHEMA_IMPORTER, "schema")["uri"]) / "schema.pbtxt"
    local_schema = _local_artifact(local_root, node_ids.SCHEMA_IMPORTER, "schema") / "schema.pbtxt"
    assert kfp_schema.read_text() == local_schema.read_text()

    kfp_metrics = read_eval_metrics(taxi.run.output(node_ids.EVALUATOR, "evaluation")["uri"])
    local_metrics = read_eval_metrics(
        str(_local_artifact(local_root, node_ids.EVALUATOR, "evaluation"))
    )
    assert kfp_metrics["example_count"] == local_metrics["example_count"]
    # Same data, steps and code; training is not seeded: within noise.
    for metric in ("binary_accuracy", "auc"):
        assert kfp_metrics[metric] == pytest.approx(local_metrics[metric], abs=0.05), metric


def test_drifted_span_blocks_the_gate_and_nothing_downstream_runs(taxi, drifted):
    run = drifted
    assert run.arguments["data_root"] == str(taxi.tmp / "drifted")
    # The runtime parameter reached ExampleGen: the newest span of that folder.
    assert run.output(node_ids.EXAMPLE_GEN, "examples")["metadata"]["custom:span"] == 2
    # The drift baseline: the first run's statistics, found in the pipeline root's registry.
    [baseline] = run.tasks[node_ids.PREVIOUS_STATISTICS_RESOLVER].outputs["statistics"]
    assert baseline["uri"] == taxi.run.output(node_ids.STATISTICS_GEN, "statistics")["uri"]
    assert run.failed_task == node_ids.VALIDATION_GATE
    log = Path(run.tasks[node_ids.VALIDATION_GATE].log).read_text()
    assert "validation gate blocked the run" in log
    assert "drift fare: Jensen-Shannon" in log
    for node in (node_ids.TRANSFORM, node_ids.TRAINER, node_ids.EVALUATOR, node_ids.PUSHER):
        assert run.tasks[node].state == "not run"
        assert not (Path(run.run_root) / node).exists()


def _tuned_digits(home: Path) -> None:
    from pipeline.config import PROJECT_ROOT

    folder = home / "digits"
    folder.mkdir(parents=True)
    for source in (PROJECT_ROOT / "schema" / "digits").iterdir():
        (folder / source.name).write_text(source.read_text())
    (folder / "dataset.yaml").write_text((folder / "dataset.yaml").read_text() + DIGITS_TUNING)


def test_digits_job_runs_every_task_to_a_pushed_model(tmp_path, monkeypatch, capsys):
    """As a new user would: compile, then `python -m kubeflow run-local`."""
    from kubeflow.__main__ import main
    from pipeline.datasets import DATASET_PATH_ENV

    _tuned_digits(tmp_path / "schema")
    monkeypatch.setenv(DATASET_PATH_ENV, str(tmp_path / "schema"))
    root = tmp_path / "kfp-root"
    package = _compile(tmp_path / "digits.json", root, "--dataset", "digits")
    runs = []
    real = job_runner.run_local_job
    monkeypatch.setattr(
        job_runner, "run_local_job", lambda *a, **k: runs.append(real(*a, **k)) or runs[-1]
    )
    capsys.readouterr()
    assert main(["run-local", "--package", str(package), "--runner", "forked"]) == 0  # root: spec's
    out = capsys.readouterr().out
    assert "tasks forked from a warm process" in out
    [run] = runs
    _check_complete_run(run)
    assert run.pipeline_root == str(root)
    assert f"pushed model: {root}/serving/" in out
    assert "previous_span_statistics_resolver" in out and "statistics: nothing" in out
    assert run.arguments["data_root"] == "/pipeline/data/digits"  # the image's, by default
    examples = run.output(node_ids.IMAGE_EXAMPLE_GEN, "examples")
    assert json.loads(examples["metadata"]["split_names"]) == ["train", "eval"]
    _check_tuned(run)


def _check_tuned(run: LocalRun) -> None:
    """The Tuner's two trials ran in two worker processes; the Trainer read its best values."""
    best = run.output(node_ids.TUNER, "best_hyperparameters")
    values = json.loads((Path(best["uri"]) / "best_hyperparameters.txt").read_text())["values"]
    trials = json.loads(
        (
            Path(run.output(node_ids.TUNER, "tuner_results")["uri"]) / "tuner_results.json"
        ).read_text()
    )
    assert sorted(t["dropout"] for t in trials) == [0.1, 0.2], trials
    assert values["dropout"] == trials[0]["dropout"], (values, trials)
    tuner_log = Path(run.tasks[node_ids.TUNER].log).read_text()
    pids = set(re.findall(r"trial \d+ scored \S+ in worker-\d \(pid (\d+)\)", tuner_log))
    assert len(pids) == 2, tuner_log[-3000:]
    assert (
        f"tuned hyperparameters: {{'dropout': {values['dropout']}}}"
        in Path(run.tasks[node_ids.TRAINER].log).read_text()
    )
