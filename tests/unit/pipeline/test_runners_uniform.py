"""The runners share one overrides -> config function and one pre-run check."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.datasets import dataset_config
from pipeline.overrides import pipeline_config
from pipeline.plan import plan_run
from tfxp.preflight import PreflightError, preflight


def test_none_keeps_the_dataset_default() -> None:
    config = pipeline_config("taxi", train_steps=None, data_root=None, warn_only=["drift"])
    base = dataset_config("taxi")
    assert config.train_steps == base.train_steps and config.data_root == base.data_root
    assert config.warn_only == ("drift",)


def test_unknown_settings_and_datasets_are_refused() -> None:
    with pytest.raises(ValueError, match="pipeline_name"):
        pipeline_config("taxi", pipeline_name="x")
    with pytest.raises(ValueError):
        pipeline_config("no-such-dataset")


def test_cli_flags_and_airflow_env_give_the_same_config(tmp_path: Path) -> None:
    import importlib.util

    from tfxp.cli import build_parser
    from tfxp.cli.common import config_from_args

    argv = ["run", "--data-root", str(tmp_path / "d"), "--run-dir", str(tmp_path / "r")]
    argv += ["--train-steps", "7", "--eval-steps", "2"]
    args = build_parser().parse_args(argv)
    spec = importlib.util.spec_from_file_location(
        "taxi_dag_config", Path(__file__).resolve().parents[3] / "airflow" / "taxi_dag.py"
    )
    # Only the function: executing the module would import Airflow and build the DAG.
    source = spec.origin and Path(spec.origin).read_text()
    namespace: dict = {}
    head = source[: source.index("AIRFLOW_DAG_CONFIG = {")]
    head = head.replace("from tfx.orchestration.airflow.airflow_dag_runner import (", "if False: (")
    head = head.replace("from tfxp.preflight import preflight  # noqa: E402\n", "")
    exec(compile(head, "taxi_dag.py", "exec"), namespace)  # noqa: S102 - the DAG's own code
    env = {
        "TFXP_DATA_ROOT": str(tmp_path / "d"),
        "TFXP_RUN_DIR": str(tmp_path / "r"),
        "TFXP_TRAIN_STEPS": "7",
        "TFXP_EVAL_STEPS": "2",
    }
    assert namespace["config_from_env"](env) == config_from_args(args)
    beam_flags = ["--beam", "portable", "--job-endpoint", "h:1", "--environment-config", "h:2"]
    beam_flags += ["--beam-arg=--sdk_worker_parallelism=2"]
    beam_env = {
        "TFXP_BEAM": "portable",
        "TFXP_BEAM_JOB_ENDPOINT": "h:1",
        "TFXP_BEAM_ENVIRONMENT_CONFIG": "h:2",
        "TFXP_BEAM_ARGS": "--sdk_worker_parallelism=2",
    }
    # Beam is the plan's to apply: both hand it the same options.
    from pipeline.beam import beam_args
    from tfxp.cli.common import beam_from_args

    beam_cli = build_parser().parse_args(argv + beam_flags)
    env_options = namespace["beam_from_env"]({**env, **beam_env})
    assert env_options == beam_from_args(beam_cli, config_from_args(beam_cli))
    assert "--runner=PortableRunner" in beam_args(env_options)
    spark_env = {"TFXP_BEAM": "spark", "TFXP_BEAM_SPARK_MASTER": "spark://h:7077"}
    on_spark = namespace["beam_from_env"]({**env, **spark_env})
    spark_cli = build_parser().parse_args(
        argv + ["--beam", "spark", "--spark-master", "spark://h:7077"]
    )
    assert on_spark == beam_from_args(spark_cli, config_from_args(spark_cli))
    assert beam_args(on_spark)[:2] == (
        "--runner=beam_spark.SparkRunner",
        "--spark_master=spark://h:7077",
    )
    # A named data version resolves to the same span and bytes in both.
    from metadata import sources
    from metadata.store import StoreLocation
    from tfxp.datasets.versions import writable_store

    store = writable_store(StoreLocation(str(tmp_path / "r" / "metadata.sqlite")))
    sha = "5a" * 32
    sources.record(
        store, kind="dvc", pipeline="taxi", data_root=str(tmp_path / "d"), span=3,
        content_sha256=sha, uri="u", rev="v1", commit="c" * 40,
    )  # fmt: skip
    pinned = namespace["config_from_env"]({**env, "TFXP_DATA_VERSION": "v1"})
    assert pinned == config_from_args(build_parser().parse_args(argv + ["--data-version", "v1"]))
    assert (pinned.span, pinned.data_version, pinned.data_sha256) == (3, "v1", sha)


def test_preflight_names_a_missing_schema(tmp_path: Path) -> None:
    config = pipeline_config("taxi", run_dir=str(tmp_path / "r"), schema_file=str(tmp_path / "s"))
    with pytest.raises(PreflightError, match="schema .* does not exist"):
        preflight(config)
    assert not (tmp_path / "r").exists()  # nothing created before the checks pass


def test_preflight_names_an_empty_data_root(tmp_path: Path) -> None:
    config = pipeline_config("taxi", run_dir=str(tmp_path / "r"), data_root=str(tmp_path / "d"))
    with pytest.raises(PreflightError, match=str(tmp_path / "d")):
        preflight(config, local_dirs=False)


def test_kubeflow_compile_runs_the_same_check(tmp_path: Path) -> None:
    from kubeflow.compiler import build_pipeline
    from kubeflow.config import KubeflowConfig, KubeflowConfigError

    config = KubeflowConfig(
        image="registry.example.com/ml/tfx-pipeline:t",
        pipeline_root="gs://bucket/root",
        data_root="/pipeline/data/no-such-folder",
    )
    with pytest.raises(KubeflowConfigError, match="no-such-folder"):
        build_pipeline(config)


def test_kubeflow_refuses_a_rolling_window() -> None:
    from pipeline.definition import KUBEFLOW, create_pipeline

    with pytest.raises(ValueError, match="window"):
        create_pipeline(plan_run(dataset_config("taxi").replace(window=2)), orchestrator=KUBEFLOW)


def test_airflow_and_kubeflow_import_no_local_run_code() -> None:
    # The pre-run check is every runner's (tfxp.preflight); tfxp.local is the local run's
    # own. import-linter checks kubeflow/ too, but airflow/ is no package it can see.
    import ast

    root = Path(__file__).resolve().parents[3]
    found = []
    for path in sorted([*root.glob("airflow/*.py"), *root.glob("kubeflow/**/*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            found += [
                (path.name, n) for n in names if n == "tfxp.local" or n.startswith("tfxp.local.")
            ]
    assert found == []
    assert "from tfxp.preflight import preflight" in (root / "airflow" / "taxi_dag.py").read_text()
