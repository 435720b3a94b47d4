"""The one pre-run check of every runner: before any component runs (local), while
the Airflow DAG is built, and while the Kubeflow spec is compiled. It returns the
run's plan (pipeline/plan.py), which the runner hands to `create_pipeline`.

In order, each failing with a message that says what to do:
1. object storage: every s3:// or gs:// location answers, and the Spark master a
   `--beam spark` run names accepts connections (`storage=True`);
2. the plan: the schema file exists, the data root holds the span(s) the config
   asks for (remote data roots: what a listing answers, only with `storage=True`),
   the validation settings parse and `warn_only` names known kinds, the Beam
   options are complete;
3. the local run, ML Metadata and serving directories are writable and an
   existing SQLite store is readable (`local_dirs=True`).
Kubeflow compiles for a cluster, so it checks what the image bakes in (schema,
data layout, settings) and not this machine's directories or buckets.

The locations come first and cost seconds: a bad one fails before Beam or
TensorFlow do anything and leaves nothing half-created. Runners (local, Airflow,
Kubeflow) all read this module; it imports no runner's code.
"""

from __future__ import annotations

import os

from beam_spark.cluster_api import RestError, check_master
from components.validation.settings import ValidationConfigError
from metadata.store import MetadataStoreError, check_sqlite_store
from pipeline.beam import SPARK_RUNNER, BeamConfigError, BeamOptions
from pipeline.config import PipelineConfig
from pipeline.plan import PlanError, RunPlan, plan_run
from pipeline.spans import SpanError
from tfxp.storage.storage import StorageError, check_remote_locations


class PreflightError(RuntimeError):
    """The run cannot start; the message names the problem and the fix."""


def _writable_dir(path: str, what: str) -> None:
    if "://" in path:
        return  # remote locations are checked by the filesystem plugin on first write
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".write-test-{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as e:
        raise PreflightError(
            f"{what} {path} is not writable ({e.strerror}); choose another with --run-dir "
            "or fix its permissions"
        ) from None


def check_locations(config: PipelineConfig, *, check_sqlite_store_file: bool = True) -> None:
    """The run, pipeline-root and serving directories are writable, and an existing
    SQLite ML Metadata file opens (PreflightError otherwise)."""
    # The store first: a corrupt store must not leave new empty folders behind.
    if check_sqlite_store_file:
        try:
            check_sqlite_store(config.metadata_path)
        except MetadataStoreError as e:
            raise PreflightError(str(e)) from None
    _writable_dir(config.local_dir, "run directory")
    _writable_dir(config.pipeline_root, "pipeline root")
    _writable_dir(config.serving_dir, "serving directory")


def check_spark_master(beam_args: tuple[str, ...] | list[str]) -> None:
    """Under the project's Spark runner, its standalone master accepts connections:
    otherwise the first Beam component would wait for it and fail deep in its log."""
    flags = dict(a.split("=", 1) for a in beam_args if a.startswith("--") and "=" in a)
    if flags.get("--runner") != SPARK_RUNNER:
        return
    try:
        check_master(flags.get("--spark_master", ""))
    except (RestError, ValueError) as e:
        raise PreflightError(
            f"{e}: start a cluster with `tfxp engine start spark --workers 2` "
            "(`tfxp engine status` shows the one running), or name another with --spark-master"
        ) from None


def preflight(
    config: PipelineConfig,
    beam: BeamOptions | None = None,
    *,
    storage: bool = True,
    local_dirs: bool = True,
    sqlite_store: bool = True,
) -> RunPlan:
    """The run's plan (pipeline/plan.py: spans, Beam mode, schema, settings), between
    this machine's checks; raises PreflightError for the first problem found (see the
    module docstring)."""
    try:
        if storage:  # first: the plan lists remote spans through it
            check_remote_locations(config)
        plan = plan_run(config, beam, list_remote=storage)
        if storage:
            check_spark_master(plan.config.beam_args)
        if local_dirs:
            check_locations(plan.config, check_sqlite_store_file=sqlite_store)
    except (StorageError, SpanError, ValidationConfigError, PlanError, BeamConfigError) as e:
        raise PreflightError(str(e)) from None
    return plan
