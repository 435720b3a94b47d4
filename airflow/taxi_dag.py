"""Airflow DAG of the pipeline: the one definition, run by TFX's AirflowDagRunner.

Put this folder on Airflow's DAG path (AIRFLOW__CORE__DAGS_FOLDER=<repo>/airflow)
with the project importable (the repo's .venv does that). The DAG id is the
pipeline's name ("taxi"); it has no schedule: trigger it, or run it without a
scheduler with `airflow dags test taxi 2026-01-01`. See airflow/README.md.

Settings, read when Airflow parses this file (all optional):
  TFXP_DATASET      dataset config (default: taxi)
  TFXP_DATA_ROOT    raw data, <root>/span-<N>/*.csv (default: the dataset's)
  TFXP_RUN_DIR      pipeline root, ML Metadata (metadata.sqlite) and pushed
                    models (default: runs/<pipeline>-airflow in the repository)
  TFXP_TRAIN_STEPS, TFXP_EVAL_STEPS   training / evaluation steps
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping

# Keras 2 for tf.Transform and the trainer; must precede the first TF import.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from tfx.orchestration.airflow.airflow_dag_runner import (  # noqa: E402
    AirflowDagRunner,
    AirflowPipelineConfig,
)

from pipeline.config import PROJECT_ROOT, PipelineConfig, dataset_config  # noqa: E402
from pipeline.definition import create_pipeline  # noqa: E402

ENV_PREFIX = "TFXP_"


def config_from_env(env: Mapping[str, str] = os.environ) -> PipelineConfig:
    """The pipeline config for this DAG: the dataset's, with TFXP_* overrides."""
    config = dataset_config(env.get(ENV_PREFIX + "DATASET", "taxi"))
    changes: dict = {
        # Its own store: the local runner's runs/<pipeline> keeps its history apart.
        "run_dir": env.get(
            ENV_PREFIX + "RUN_DIR", str(PROJECT_ROOT / "runs" / f"{config.pipeline_name}-airflow")
        )
    }
    if env.get(ENV_PREFIX + "DATA_ROOT"):
        changes["data_root"] = env[ENV_PREFIX + "DATA_ROOT"]
    for name in ("train_steps", "eval_steps"):
        value = env.get(ENV_PREFIX + name.upper())
        if value:
            changes[name] = int(value)
    return config.replace(**changes)


AIRFLOW_DAG_CONFIG = {
    # Runs when triggered (or by `airflow dags test`); set a schedule to poll for new spans.
    "schedule": None,
    "start_date": datetime.datetime(2026, 1, 1),
    "catchup": False,
    "max_active_runs": 1,  # one writer at a time on the SQLite ML Metadata store
    "tags": ["tfx"],
}

DAG = AirflowDagRunner(AirflowPipelineConfig(airflow_dag_config=AIRFLOW_DAG_CONFIG)).run(
    create_pipeline(config_from_env())
)
