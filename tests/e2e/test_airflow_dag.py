"""The Airflow DAG (airflow/taxi_dag.py): its shape, and one real run under `airflow dags test`.

Airflow runs in subprocesses with AIRFLOW_HOME (and its SQLite database) in a
temporary folder, so nothing is written to ~/airflow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_support import small_config, write_sample

from pipeline.config import PROJECT_ROOT

DAG_ID = "taxi"
DAGS_FOLDER = PROJECT_ROOT / "airflow"
AIRFLOW = Path(sys.executable).parent / "airflow"


def _airflow_env(tmp: Path, config) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        AIRFLOW_HOME=str(tmp / "airflow-home"),
        AIRFLOW__CORE__DAGS_FOLDER=str(DAGS_FOLDER),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        # Importing TFX and TensorFlow takes longer than Airflow's default 30 s on a busy machine.
        AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT="600",
        AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING",
        TFXP_DATA_ROOT=config.data_root,
        TFXP_RUN_DIR=config.run_dir,
        TFXP_TRAIN_STEPS=str(config.train_steps),
        TFXP_EVAL_STEPS=str(config.eval_steps),
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    return env


@pytest.mark.timeout(900)
def test_dag_has_every_component_in_order(tmp_path: Path):
    """Parses the DAG file as Airflow would and reads its tasks and edges."""
    config = small_config(tmp_path)
    probe = (
        "import importlib.util, json\n"
        f"spec = importlib.util.spec_from_file_location('taxi_dag', {str(DAGS_FOLDER / 'taxi_dag.py')!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "dag = mod.DAG\n"
        "print(json.dumps({'dag_id': dag.dag_id, 'schedule': str(dag.schedule_interval),\n"
        "  'tasks': {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks},\n"
        "  'config': {k: getattr(mod.config_from_env(), k) for k in\n"
        "             ('data_root', 'run_dir', 'train_steps', 'eval_steps')}}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env=_airflow_env(tmp_path, config),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    dag = json.loads(result.stdout.strip().splitlines()[-1])

    from ml_metadata.proto import metadata_store_pb2

    from pipeline.definition import create_pipeline

    pipeline = create_pipeline(
        config,
        metadata_connection_config=metadata_store_pb2.ConnectionConfig(
            fake_database=metadata_store_pb2.FakeDatabaseConfig()
        ),
    )
    assert dag["dag_id"] == DAG_ID == config.pipeline_name
    assert dag["schedule"] == "None"
    assert dag["tasks"] == {
        node.id: sorted(u.id for u in node.upstream_nodes) for node in pipeline.components
    }
    assert dag["config"] == {
        "data_root": config.data_root,
        "run_dir": config.run_dir,
        "train_steps": config.train_steps,
        "eval_steps": config.eval_steps,
    }


@pytest.fixture(scope="module")
def migrated_airflow_db(tmp_path_factory) -> Path:
    """One `airflow db migrate` (tens of seconds) for every run here; each copies the file."""
    tmp = tmp_path_factory.mktemp("airflow-db")
    env = _airflow_env(tmp, small_config(tmp))
    migrate = subprocess.run(
        [str(AIRFLOW), "db", "migrate"], env=env, capture_output=True, text=True, timeout=600
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    return tmp / "airflow-home" / "airflow.db"


def _airflow_home(tmp: Path, config, migrated_db: Path) -> dict[str, str]:
    env = _airflow_env(tmp, config)
    home = Path(env["AIRFLOW_HOME"])
    home.mkdir(parents=True)
    shutil.copy(migrated_db, home / "airflow.db")
    return env


def _read_only_store(config):
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    connection = metadata_store_pb2.ConnectionConfig()
    connection.sqlite.filename_uri = config.metadata_path
    connection.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(connection)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_airflow_dags_test_runs_the_pipeline(tmp_path: Path, migrated_airflow_db: Path):
    """One `airflow dags test` run on a 3,000-row sample; then ML Metadata is checked."""
    from ml_metadata.proto import metadata_store_pb2

    write_sample(tmp_path / "data")
    config = small_config(tmp_path)
    env = _airflow_home(tmp_path, config, migrated_airflow_db)

    run = subprocess.run(
        [str(AIRFLOW), "dags", "test", DAG_ID, "2026-01-01"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    log = run.stdout[-4000:] + run.stderr[-4000:]
    assert run.returncode == 0, log

    store = _read_only_store(config)
    states = {
        e.properties["component_id"].string_value: metadata_store_pb2.Execution.State.Name(
            e.last_known_state
        )
        for e in store.get_executions()
    }
    from pipeline.definition import (
        BASELINE_RESOLVER,
        PREVIOUS_STATISTICS_RESOLVER,
        create_pipeline,
    )

    expected = {node.id for node in create_pipeline(config).components}
    assert set(states) == expected, log
    for component, state in states.items():
        # TFX's Airflow launcher records a resolver's execution as CACHED.
        resolvers = (BASELINE_RESOLVER, PREVIOUS_STATISTICS_RESOLVER)
        allowed = {"COMPLETE", "CACHED"} if component in resolvers else {"COMPLETE"}
        assert state in allowed, (component, state, log)

    blessings = store.get_artifacts_by_type("ModelBlessing")
    assert [b.custom_properties["blessed"].int_value for b in blessings] == [1]
    pushed = store.get_artifacts_by_type("PushedModel")
    assert [p.custom_properties["pushed"].int_value for p in pushed] == [1]
    assert os.listdir(config.serving_dir)  # the pushed SavedModel version
    # The validation gate ran under Airflow too and wrote its report.
    assert [n for n in os.listdir(config.report_dir) if n.endswith(".html")], log


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_gate_blocks_a_drifted_span_under_airflow(tmp_path: Path, migrated_airflow_db: Path):
    """Span 1 recorded by a local run; span 2 (fares shifted, Cash tripled) under Airflow:
    `airflow dags test` fails at ValidationGate and nothing downstream of it ran."""
    from ml_metadata.proto import metadata_store_pb2
    from test_validation_e2e import write_generated

    from data.generate import Drift
    from pipeline import definition as d
    from pipeline.runner import run_local

    data = tmp_path / "data"
    write_generated(data / "span-1", 2000, seed=1)
    write_generated(data / "serving", 1000, seed=9, label=False)
    config = small_config(tmp_path)
    # The drift baseline: span 1's statistics in the same ML Metadata store.
    run_local(config.replace(span=1), to_nodes=[d.VALIDATION_GATE], printer=lambda _: None)
    drift = Drift(shift={"fare": 10.0}, reweight={"payment_type": {"Cash": 3.0}})
    write_generated(data / "span-2", 2000, seed=2, drift=drift)

    env = _airflow_home(tmp_path, config, migrated_airflow_db)
    run = subprocess.run(
        [str(AIRFLOW), "dags", "test", DAG_ID, "2026-01-01"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    log = run.stdout[-6000:] + run.stderr[-6000:]
    assert run.returncode != 0, log
    assert "validation gate blocked the run" in run.stdout + run.stderr, log
    assert "drift fare" in run.stdout + run.stderr, log

    store = _read_only_store(config)
    airflow_runs = [
        e
        for e in store.get_executions()
        if "component_id" in e.properties  # TFX's Airflow launcher sets it; LocalDagRunner not
    ]
    states = {
        e.properties["component_id"].string_value: metadata_store_pb2.Execution.State.Name(
            e.last_known_state
        )
        for e in airflow_runs
    }
    assert states.get(d.VALIDATION_GATE) not in (None, "COMPLETE", "CACHED"), states
    downstream = {d.TRANSFORM, d.TRAINER, d.EVALUATOR, d.PUSHER}
    assert not downstream & set(states), f"ran after the gate blocked: {states}"
    assert store.get_artifacts_by_type("Model") == []
    assert not os.path.exists(config.serving_dir) or os.listdir(config.serving_dir) == []
