"""Airflow DAG of the pipeline: the one definition, run by TFX's AirflowDagRunner.

Put this folder on Airflow's DAG path (AIRFLOW__CORE__DAGS_FOLDER=<repo>/airflow)
with the project importable (the repo's .venv does that). The DAG id is the
pipeline's name ("taxi"). It runs on a schedule (hourly by default), and its
first task, the sensor `wait_for_new_span`, lets a run go on only when a
span newer than every ingested one is published; otherwise the run is
skipped, not failed. Trigger it by hand, or run it without a scheduler with
`airflow dags test taxi 2026-01-01`. See docs/orchestrators.md.

Settings, read when Airflow parses this file (all optional):
  TFXP_DATASET      dataset config (default: taxi, pipeline.datasets.DEFAULT_DATASET)
  TFXP_DATA_ROOT    raw data, <root>/span-<N>/*.csv (default: the dataset's)
  TFXP_RUN_DIR      pipeline root, ML Metadata (metadata.sqlite) and pushed
                    models (default: runs/<pipeline>-airflow in the repository)
  TFXP_TRAIN_STEPS, TFXP_EVAL_STEPS   training / evaluation steps
  TFXP_DATA_VERSION a tag or DVC revision (`tfxp run --data-version`): that span, those bytes
  TFXP_SCHEDULE     a cron expression or preset (default @hourly); "none": triggered only
  TFXP_SENSOR_POKE  seconds between the sensor's looks for a new span (default 300)
  TFXP_BEAM         where Beam work runs, as `tfxp run --beam` (default in-process: the
                    DAG is parsed often, so it does not size spans as `--beam auto` does),
                    with TFXP_BEAM_SPARK_MASTER (spark: the master URL; default the
                    cluster `tfxp engine start` runs), TFXP_BEAM_JOB_ENDPOINT,
                    TFXP_BEAM_ENVIRONMENT_TYPE, TFXP_BEAM_ENVIRONMENT_CONFIG,
                    TFXP_BEAM_TEMP_LOCATION and TFXP_BEAM_ARGS (raw Beam flags,
                    space-separated)
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping

# Keras 2 for tf.Transform and the trainer; must precede the first TF import.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from tfx.orchestration.airflow.airflow_dag_runner import (
    AirflowDagRunner,
    AirflowPipelineConfig,
)

from pipeline.beam import BeamOptions
from pipeline.config import PROJECT_ROOT, PipelineConfig
from pipeline.datasets import DEFAULT_DATASET, dataset_config
from pipeline.definition import AIRFLOW, create_pipeline
from pipeline.overrides import pipeline_config
from runtime import beam_speedups
from tfxp.preflight import preflight

ENV_PREFIX = "TFXP_"


def config_from_env(env: Mapping[str, str] = os.environ) -> PipelineConfig:
    """The pipeline config for this DAG: the dataset's, with TFXP_* overrides (Beam is
    the plan's: `beam_from_env`)."""
    dataset = env.get(ENV_PREFIX + "DATASET", DEFAULT_DATASET)

    def number(name: str) -> int | None:
        value = env.get(ENV_PREFIX + name)
        return int(value) if value else None

    overrides = dict(
        # Its own store: the local runner's runs/<pipeline> keeps its history apart.
        run_dir=env.get(ENV_PREFIX + "RUN_DIR")
        or str(PROJECT_ROOT / "runs" / f"{dataset_config(dataset).pipeline_name}-airflow"),
        data_root=env.get(ENV_PREFIX + "DATA_ROOT") or None,
        train_steps=number("TRAIN_STEPS"),
        eval_steps=number("EVAL_STEPS"),
    )
    config = pipeline_config(dataset, **overrides)
    name = env.get(ENV_PREFIX + "DATA_VERSION")
    if name:  # as `tfxp run --data-version`: the span it names, held to its recorded bytes
        from metadata.store import StoreLocation
        from tfxp.datasets.versions import resolve_version

        location = StoreLocation(sqlite_path=config.metadata_path)
        config = config.replace(**resolve_version(config, location, name))
    return config


def beam_from_env(env: Mapping[str, str]) -> BeamOptions | None:
    """TFXP_BEAM* as Beam options (None: not set, the dataset's in-process default)."""
    mode = env.get(ENV_PREFIX + "BEAM")
    if not mode:
        return None

    def setting(name: str) -> str | None:
        return env.get(f"{ENV_PREFIX}BEAM_{name}") or None

    spark_master, executor_memory = setting("SPARK_MASTER"), None
    if mode == "spark" and not spark_master:  # as `tfxp run --beam spark`
        from tfxp.engine import running_cluster

        running = running_cluster()
        spark_master, executor_memory = running.master_url, running.worker_memory
    return BeamOptions(
        mode=mode,
        job_endpoint=setting("JOB_ENDPOINT"),
        spark_master=spark_master,
        spark_executor_memory=executor_memory,
        environment_type=setting("ENVIRONMENT_TYPE"),
        environment_config=setting("ENVIRONMENT_CONFIG"),
        temp_location=setting("TEMP_LOCATION"),
        # As `tfxp run`: every SDK worker caches Beam's DoFn introspection.
        plugins=(beam_speedups.PLUGIN,),
        extra_args=tuple((setting("ARGS") or "").split()),
    )


DEFAULT_SCHEDULE = "@hourly"
SENSOR_TASK = "wait_for_new_span"


def schedule_from_env(env: Mapping[str, str] = os.environ) -> str | None:
    value = env.get(ENV_PREFIX + "SCHEDULE", DEFAULT_SCHEDULE).strip()
    return None if value.lower() in ("", "none") else value


AIRFLOW_DAG_CONFIG = {
    # Each scheduled run waits for a new span (the sensor); "none": triggered only.
    "schedule": schedule_from_env(),
    "start_date": datetime.datetime(2026, 1, 1),
    "catchup": False,
    "max_active_runs": 1,  # one writer at a time on the SQLite ML Metadata store
    "tags": ["tfx"],
}


def new_span_ready(config: PipelineConfig) -> bool:
    """The sensor's poke: is a span newer than every ingested one published?"""
    from metadata.store import StoreLocation, open_store
    from tfxp.monitor.watch import next_span_ready

    store = None
    if os.path.exists(config.metadata_path):
        store = open_store(StoreLocation(sqlite_path=config.metadata_path))
    span = next_span_ready(config, store)
    print(f"new span: {span if span is not None else 'none yet'} under {config.data_root}")
    return span is not None


def add_span_sensor(dag, config: PipelineConfig, poke_seconds: float):
    """`wait_for_new_span` before the pipeline's first tasks. Reschedule mode frees
    the worker slot between pokes; soft_fail skips (not fails) a run that saw no
    new span before the next one is due."""
    from airflow.sensors.python import PythonSensor

    roots = list(dag.roots)
    sensor = PythonSensor(
        task_id=SENSOR_TASK,
        dag=dag,
        python_callable=new_span_ready,
        op_args=[config],
        mode="reschedule",
        poke_interval=poke_seconds,
        timeout=50 * 60,
        soft_fail=True,
    )
    for task in roots:
        sensor >> task
    return sensor


def build_dag(config: PipelineConfig, env: Mapping[str, str] = os.environ):
    """The DAG for `config`, planned by the same pre-run check as `tfxp run` (a failure
    is the DAG's import error in Airflow, naming the problem and the fix)."""
    plan = preflight(config, beam_from_env(env))
    # Airflow runs each task in a process that parses this file: the Beam
    # components there get the same DoFn-introspection cache as `tfxp run`.
    beam_speedups.install()
    runner = AirflowDagRunner(AirflowPipelineConfig(airflow_dag_config=AIRFLOW_DAG_CONFIG))
    dag = runner.run(create_pipeline(plan, orchestrator=AIRFLOW))
    add_span_sensor(dag, plan.config, float(env.get(ENV_PREFIX + "SENSOR_POKE", "300")))
    return dag


DAG = build_dag(config_from_env())
