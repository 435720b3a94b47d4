"""The Airflow DAG (airflow/taxi_dag.py): its shape, and one real run under `airflow dags test`.

Airflow runs in processes of its own with AIRFLOW_HOME (and its SQLite database)
in a temporary folder, so nothing is written to ~/airflow. `airflow db migrate` is
a fresh interpreter; the DAG probes and `airflow dags test` are forked from the
session's fork server (tests/conftest.py), which saves each the ~10 s import of
TensorFlow and TFX. Airflow itself is imported in the child, after its
environment is set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import small_config, write_sample, write_scaled_fares

from pipeline.config import PROJECT_ROOT
from pipeline.datasets import DATASET_PATH_ENV
from pipeline.plan import plan_run

DAG_ID = "taxi"
DAGS_FOLDER = PROJECT_ROOT / "airflow"
AIRFLOW = Path(sys.executable).parent / "airflow"
# The Airflow runs' taxi dataset file declares a small search (two trials at once, in
# worker processes); the Tuner then runs under Airflow before the Trainer.
TUNING = """
tuning:
  max_trials: 2
  parallel_trials: 2
  trial_steps: 10
  search_space:
    learning_rate: {choices: [0.003, 0.01]}
"""


def _tuned_taxi(home: Path):
    """The taxi dataset file with TUNING, in `home` (the DAG finds it via TFXP_DATASET_PATH)."""
    from pipeline.datasets import load_dataset_file

    folder = home / "taxi"
    folder.mkdir(parents=True)
    for source in (PROJECT_ROOT / "schema" / "taxi").iterdir():
        (folder / source.name).write_text(source.read_text())
    (folder / "dataset.yaml").write_text((folder / "dataset.yaml").read_text() + TUNING)
    return load_dataset_file(folder / "dataset.yaml").tuning


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
def test_dag_has_every_component_in_order(tmp_path: Path, forkserver):
    """Parses the DAG file as Airflow would and reads its tasks and edges (in a process
    forked from the session's fork server: Airflow is imported there, fresh)."""
    config = small_config(tmp_path)
    write_sample(Path(config.data_root))  # building the DAG runs the pre-run check
    probe = (
        "import importlib.util, json\n"
        f"spec = importlib.util.spec_from_file_location('taxi_dag', {str(DAGS_FOLDER / 'taxi_dag.py')!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "dag = mod.DAG\n"
        "print(json.dumps({'dag_id': dag.dag_id, 'schedule': str(dag.schedule_interval),\n"
        "  'tasks': {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks},\n"
        "  'sensor': {k: str(getattr(dag.get_task('wait_for_new_span'), k)) for k in\n"
        "             ('mode', 'poke_interval', 'soft_fail')},\n"
        "  'pokes': mod.new_span_ready(mod.config_from_env()),\n"
        "  'config': {k: getattr(mod.config_from_env(), k) for k in\n"
        "             ('data_root', 'run_dir', 'train_steps', 'eval_steps')}}))\n"
        "import os, sys; sys.stdout.flush(); os._exit(0)  # no TF teardown: ~2 s of CPU\n"
    )
    result = forkserver.run(
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
        plan_run(config),
        metadata_connection_config=metadata_store_pb2.ConnectionConfig(
            fake_database=metadata_store_pb2.FakeDatabaseConfig()
        ),
    )
    assert dag["dag_id"] == DAG_ID == config.pipeline_name
    assert dag["schedule"] == "@hourly"
    expected = {node.id: sorted(u.id for u in node.upstream_nodes) for node in pipeline.components}
    # The sensor for the next span comes before the pipeline's first tasks.
    for upstream in expected.values():
        if not upstream:
            upstream.append("wait_for_new_span")
    assert dag["tasks"] == {**expected, "wait_for_new_span": []}
    assert dag["sensor"] == {"mode": "reschedule", "poke_interval": "300.0", "soft_fail": "True"}
    assert dag["pokes"] is True  # span 1 is published, nothing ingested yet
    assert dag["config"] == {
        "data_root": config.data_root,
        "run_dir": config.run_dir,
        "train_steps": config.train_steps,
        "eval_steps": config.eval_steps,
    }


def _read_only_store(config):
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    connection = metadata_store_pb2.ConnectionConfig()
    connection.sqlite.filename_uri = config.metadata_path
    connection.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(connection)


def _states(store, after_id: int = 0) -> dict[str, str]:
    """component id -> state of the executions (newer than `after_id`) TFX's Airflow launcher made."""
    from ml_metadata.proto import metadata_store_pb2

    return {
        e.properties["component_id"].string_value: metadata_store_pb2.Execution.State.Name(
            e.last_known_state
        )
        for e in sorted(store.get_executions(), key=lambda e: e.id)
        if e.id > after_id
    }


@dataclass
class AirflowRuns:
    config: object
    first: subprocess.CompletedProcess  # span 1: the whole pipeline
    first_states: dict[str, str]
    tuned: dict  # the Tuner's best hyperparameters, as the Trainer's execution read them
    blessed: list[int]
    pushed: list[int]
    served: list[str]
    reports: list[str]
    drifted: subprocess.CompletedProcess  # span 2, fares x10: blocked at the gate
    drifted_states: dict[str, str]
    models_after_drifted: int


@pytest.fixture(scope="module")
def airflow_runs(tmp_path_factory, forkserver) -> AirflowRuns:
    """Two `airflow dags test` runs on one store: span 1 (3,000 rows) goes all the way;
    span 2, the same rows with fares times ten, must stop at the validation gate."""
    tmp = tmp_path_factory.mktemp("airflow")
    span1 = write_sample(tmp / "data")
    config = small_config(tmp, tuning=_tuned_taxi(tmp / "schema"))
    env = {**_airflow_env(tmp, config), DATASET_PATH_ENV: str(tmp / "schema")}

    migrate = subprocess.run(
        [str(AIRFLOW), "db", "migrate"], env=env, capture_output=True, text=True, timeout=600
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]

    def dags_test(date: str) -> subprocess.CompletedProcess:
        return forkserver.run(
            [str(AIRFLOW), "dags", "test", DAG_ID, date],
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
        )

    first = dags_test("2026-01-01")
    store = _read_only_store(config)
    first_states = _states(store)
    tuned = _tuned_hyperparameters(store)
    last_id = max((e.id for e in store.get_executions()), default=0)
    blessed = [
        b.custom_properties["blessed"].int_value
        for b in store.get_artifacts_by_type("ModelBlessing")
    ]
    pushed = [
        p.custom_properties["pushed"].int_value for p in store.get_artifacts_by_type("PushedModel")
    ]
    served = os.listdir(config.serving_dir) if os.path.isdir(config.serving_dir) else []
    reports = (
        [n for n in os.listdir(config.report_dir) if n.endswith(".html")]
        if os.path.isdir(config.report_dir)
        else []
    )
    del store

    write_scaled_fares(tmp / "data", 2, span1, 10)
    drifted = dags_test("2026-01-02")
    store = _read_only_store(config)
    return AirflowRuns(
        config,
        first,
        first_states,
        tuned,
        blessed,
        pushed,
        served,
        reports,
        drifted,
        _states(store, after_id=last_id),
        len(store.get_artifacts_by_type("Model")),
    )


def _tuned_hyperparameters(store) -> dict:
    """The best hyperparameters the Tuner wrote, found through the Trainer execution's input
    (ML Metadata's events), with the trials it recorded."""
    from ml_metadata.proto import metadata_store_pb2

    executions = {e.properties["component_id"].string_value: e.id for e in store.get_executions()}
    events = store.get_events_by_execution_ids([executions["Tuner"], executions["Trainer"]])
    [hyperparameters] = store.get_artifacts_by_type("HyperParameters")
    [results] = store.get_artifacts_by_type("TunerResults")
    linked = {(e.execution_id, e.type) for e in events if e.artifact_id == hyperparameters.id}
    return {
        "from_tuner_to_trainer": linked
        == {
            (executions["Tuner"], metadata_store_pb2.Event.OUTPUT),
            (executions["Trainer"], metadata_store_pb2.Event.INPUT),
        },
        "best": json.loads((Path(hyperparameters.uri) / "best_hyperparameters.txt").read_text())[
            "values"
        ],
        "trials": json.loads((Path(results.uri) / "tuner_results.json").read_text()),
    }


def _log(run: subprocess.CompletedProcess) -> str:
    return run.stdout[-4000:] + run.stderr[-4000:]


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_airflow_dags_test_runs_the_pipeline(airflow_runs: AirflowRuns):
    """`airflow dags test` on a 3,000-row sample; then ML Metadata is checked."""
    from pipeline.definition import create_pipeline
    from pipeline.node_ids import BASELINE_RESOLVER, PREVIOUS_STATISTICS_RESOLVER

    log = _log(airflow_runs.first)
    assert airflow_runs.first.returncode == 0, log
    states = airflow_runs.first_states
    expected = {node.id for node in create_pipeline(plan_run(airflow_runs.config)).components}
    assert set(states) == expected, log
    for component, state in states.items():
        # TFX's Airflow launcher records a resolver's execution as CACHED.
        resolvers = (BASELINE_RESOLVER, PREVIOUS_STATISTICS_RESOLVER)
        allowed = {"COMPLETE", "CACHED"} if component in resolvers else {"COMPLETE"}
        assert state in allowed, (component, state, log)
    assert airflow_runs.blessed == [1]
    # The Tuner ran its two trials and the Trainer took the best one's values.
    tuned = airflow_runs.tuned
    assert tuned["from_tuner_to_trainer"], tuned
    assert sorted(t["learning_rate"] for t in tuned["trials"]) == [0.003, 0.01], tuned
    assert tuned["best"]["learning_rate"] == tuned["trials"][0]["learning_rate"], tuned
    assert airflow_runs.pushed == [1]
    assert airflow_runs.served  # the pushed SavedModel version
    # The serving check passed it, and its model card sits beside it.
    (version,) = airflow_runs.served
    assert (Path(airflow_runs.config.serving_dir) / version / "model_card.html").is_file()
    # The validation gate ran under Airflow too and wrote its report.
    assert airflow_runs.reports, log


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_gate_blocks_a_drifted_span_under_airflow(airflow_runs: AirflowRuns):
    """Span 2 drifted from span 1: `airflow dags test` fails at ValidationGate, and nothing
    downstream of the gate ran (no Transform, Trainer, Evaluator or Pusher execution, no
    new model)."""
    from pipeline import node_ids

    run = airflow_runs.drifted
    out = run.stdout + run.stderr
    assert run.returncode != 0, _log(run)
    assert "validation gate blocked the run" in out, _log(run)
    assert "drift fare" in out and "(span 2 vs span 1" in out, _log(run)

    states = airflow_runs.drifted_states
    assert states.get(node_ids.VALIDATION_GATE) not in (None, "COMPLETE", "CACHED"), states
    downstream = {node_ids.TRANSFORM, node_ids.TRAINER, node_ids.EVALUATOR, node_ids.PUSHER}
    assert not downstream & set(states), f"ran after the gate blocked: {states}"
    assert airflow_runs.models_after_drifted == 1  # span 1's model only


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_console_shows_airflow_runs(airflow_runs: AirflowRuns):
    """`tfxp ui` over the Airflow runs' store (TFX's legacy launcher: `run` and
    `component_run` contexts): span 1's run complete, with its pages and lineage.

    Span 2's gate raised, but the legacy launcher leaves that execution RUNNING in ML
    Metadata (Airflow's task state has the failure), so from ML Metadata alone the run
    reads as still going."""
    from console_check import check_console

    from metadata.store import location_from

    shown = check_console(location_from(run_dir=airflow_runs.config.local_dir))
    assert shown == {
        "manual__2026-01-01T00:00:00+00:00": "complete",
        "manual__2026-01-02T00:00:00+00:00": "running",
    }, shown
