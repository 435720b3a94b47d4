"""A dataset made by `tfxp init` compiles for Kubeflow and configures Airflow by its name."""

from __future__ import annotations

import argparse
import io
import json

import pytest

from pipeline.datasets import DATASET_PATH_ENV
from tfxp.init.command import run_init


@pytest.fixture()
def shop(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv(DATASET_PATH_ENV, str(tmp_path / "schema"))
    csv = tmp_path / "shop.csv"
    rows = [f"{i / 7:.3f},{['red', 'blue', ''][i % 3]},{['a', 'b'][i % 2]}" for i in range(30)]
    csv.write_text("size,colour,bought\n" + "\n".join(rows) + "\n")
    args = argparse.Namespace(
        name="shop",
        csv=[str(csv)],
        label="bought",
        task=None,
        exclude=None,
        link=False,
        force=False,
        data_root=str(tmp_path / "data"),
    )
    assert run_init(args, out=io.StringIO()) == 0
    return "shop"


def test_kubeflow_compiles_a_tabular_dataset_by_name(shop):
    from kubeflow.compiler import compile_pipeline
    from kubeflow.config import KubeflowConfig

    job = compile_pipeline(
        KubeflowConfig(
            image="registry.example.com/ml/tfx-pipeline:t",
            pipeline_root="gs://example-bucket/tfx/shop",
            dataset=shop,
        )
    )
    assert job["pipelineSpec"]["pipelineInfo"]["name"] == "shop"
    text = json.dumps(job)
    assert "trainer.tabular.preprocessing.preprocessing_fn" in text
    assert "trainer.tabular.train.run_fn" in text
    # The feature treatments reach Transform and the Trainer through custom_config.
    assert '\\\\"tabular\\\\"' in text or '\\"tabular\\"' in text


def test_a_tuned_tabular_dataset_compiles_with_its_search(shop, tmp_path):
    """`tuning:` in a `tfxp init` dataset file: the compiled job's Tuner runs the generic
    tabular trainer's search (parallel trials included) and feeds the Trainer."""
    from kubeflow.compiler import compile_pipeline
    from kubeflow.config import KubeflowConfig

    dataset_file = tmp_path / "schema" / shop / "dataset.yaml"
    dataset_file.write_text(
        dataset_file.read_text()
        + "tuning:\n  max_trials: 2\n  parallel_trials: 2\n"
        + "  search_space: {hidden_units: {choices: [[8], [16]]}}\n"
    )
    job = compile_pipeline(
        KubeflowConfig(
            image="registry.example.com/ml/tfx-pipeline:t",
            pipeline_root="gs://example-bucket/tfx/shop",
            dataset=shop,
        )
    )
    tasks = job["pipelineSpec"]["root"]["dag"]["tasks"]
    hyperparameters = tasks["Trainer"]["inputs"]["artifacts"]["hyperparameters"]
    assert hyperparameters["taskOutputArtifact"]["producerTask"] == "Tuner"
    text = json.dumps(job)
    assert "trainer.tabular.train.tuner_fn" in text
    assert "parallel_trials" in text


@pytest.mark.slow
def test_airflow_dag_is_built_for_the_dataset_by_name(shop, tmp_path, forkserver):
    """airflow/taxi_dag.py parsed as Airflow would, with TFXP_DATASET naming the new dataset
    (in a process forked from the session's fork server: Airflow is imported there, fresh)."""
    import os
    import sys

    from pipeline.config import PROJECT_ROOT

    probe = (
        "import importlib.util, json\n"
        "spec = importlib.util.spec_from_file_location('dag', "
        f"{str(PROJECT_ROOT / 'airflow' / 'taxi_dag.py')!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "print(json.dumps({'dag_id': mod.DAG.dag_id, 'tasks': sorted(t.task_id for t in mod.DAG.tasks)}))\n"
        "import os, sys; sys.stdout.flush(); os._exit(0)  # no TF teardown: ~2 s of CPU\n"
    )
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow-home"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "TFXP_DATASET": shop,
        "TFXP_RUN_DIR": str(tmp_path / "run"),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    result = forkserver.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    dag = json.loads(result.stdout.strip().splitlines()[-1])
    assert dag["dag_id"] == "shop"
    assert {"CsvExampleGen", "Transform", "Trainer", "Evaluator", "Pusher"} <= set(dag["tasks"])
