"""Flags and config shared by every command: which dataset, where its data and runs are."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from components.io.encryption import SSE_MODES, StorageEncryption, read_storage
from metadata.store import (
    PASSWORD_ENV,
    MetadataStoreError,
    StoreLocation,
    location_from,
    open_store,
)
from pipeline.beam import AUTO, BEAM_MODES, ENVIRONMENT_TYPES, REMOTE_MODES, BeamOptions
from pipeline.config import PipelineConfig
from pipeline.datasets import DEFAULT_DATASET, dataset_config, dataset_names
from pipeline.overrides import pipeline_config
from runtime import beam_speedups
from tfxp.storage.storage import config_locations


def add_config_flags(p: argparse.ArgumentParser, *, store: bool = False) -> None:
    """The dataset and where things are; with `store`, the ML Metadata store's flags too."""
    p.add_argument(
        "--dataset",
        default=DEFAULT_DATASET,
        choices=dataset_names(),
        help="a dataset: schema/<NAME>/dataset.yaml (`tfxp init` makes one)",
    )
    p.add_argument("--data-root", help="raw data folder holding span-<N>/ drops")
    add_run_dir_flag(p, "where the pipeline root, ML Metadata and pushed models go")
    # Object storage (s3://, gs://): see docs/object-storage.md.
    p.add_argument("--pipeline-root", help="artifacts here instead of <run-dir>/pipeline_root")
    p.add_argument("--serving-dir", help="push models here instead of <run-dir>/serving")
    p.add_argument(
        "--state-dir",
        help="local dir for ML Metadata, logs and the run lock (default: the run dir, or "
        "runs/remote/... when the run dir is s3:// or gs://)",
    )
    add_storage_flags(p)
    if store:
        add_mysql_flags(
            p.add_argument_group(
                "ML Metadata on MySQL/MariaDB (default: SQLite in the run directory)"
            )
        )


def add_run_dir_flag(p: argparse.ArgumentParser | argparse._ArgumentGroup, help: str) -> None:
    """`--run-dir`: what it holds for this command is `help` (a run's directory, or the
    store a query reads: `store_location`)."""
    p.add_argument("--run-dir", help=help)


def add_store_flags(p: argparse.ArgumentParser, *, default_run_dir_help: str = "") -> None:
    """--run-dir (the store to read) and the --mysql-* flags (`store_location`)."""
    g = p.add_argument_group("ML Metadata store (default: SQLite in the run directory)")
    add_run_dir_flag(g, "run directory whose metadata.sqlite to read" + default_run_dir_help)
    add_mysql_flags(g)


def add_mysql_flags(group: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The --mysql-* flags every command that reads or writes ML Metadata takes; each
    has an environment default (metadata/store.py `location_from`)."""
    group.add_argument("--mysql-host", help="ML Metadata on MySQL/MariaDB (env MLMD_MYSQL_HOST)")
    group.add_argument(
        "--mysql-port", type=int, help="default 3306 (env MLMD_MYSQL_PORT)", metavar="PORT"
    )
    group.add_argument("--mysql-database", help="env MLMD_MYSQL_DATABASE", metavar="NAME")
    group.add_argument(
        "--mysql-user",
        help=f"env MLMD_MYSQL_USER; the password is read from {PASSWORD_ENV}",
        metavar="USER",
    )


def add_storage_flags(p: argparse.ArgumentParser) -> None:
    """The dataset file's `storage:` settings, per command (docs/protecting-data.md)."""
    g = p.add_argument_group("encryption of what is written to s3:// and gs://")
    g.add_argument("--sse", choices=SSE_MODES, help="S3 server-side encryption (storage.sse)")
    g.add_argument("--kms-key-id", help="S3 SSE-KMS key id or ARN (storage.kms_key_id)")
    g.add_argument("--gcs-kms-key", help="GCS CMEK key name the bucket must use by default")
    g.add_argument(
        "--require-encryption",
        action="store_true",
        default=None,
        help="refuse to start where a writer could write in the clear",
    )


def storage_from_args(args: argparse.Namespace, config: PipelineConfig) -> StorageEncryption:
    """The dataset's `storage:` with the flags given on top (ValueError when invalid)."""
    merged = config.storage.to_dict()
    for flag, key in (
        ("sse", "sse"),
        ("kms_key_id", "kms_key_id"),
        ("gcs_kms_key", "gcs_kms_key"),
        ("require_encryption", "require_encryption"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            merged[key] = value
    return read_storage(merged, "storage (dataset file and flags)")


def add_beam_flags(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Where the Beam components run (pipeline/beam.py; docs/beyond-one-machine.md);
    returns the flags' group, for a command's own Beam flags."""
    g = p.add_argument_group("Beam (ExampleGen, StatisticsGen, Transform, Evaluator)")
    g.add_argument(
        "--beam",
        choices=(AUTO, *BEAM_MODES),
        default=AUTO,
        help="where Beam work runs (default auto: in-process, or multi-process from "
        "64 MB of input on); spark: on a Spark cluster through the project's Beam runner "
        "(`tfxp engine start`); portable/flink/spark-job-server submit to a Beam job "
        "service whose SDK workers are separate processes; dataflow to Google Cloud",
    )
    g.add_argument(
        "--spark-master",
        metavar="URL",
        help="--beam spark: the cluster, spark://HOST:PORT or local[N] (default: the one "
        "`tfxp engine start` runs)",
    )
    g.add_argument("--job-endpoint", metavar="HOST:PORT", help="the Beam job service")
    g.add_argument(
        "--environment-type",
        type=str.upper,
        choices=ENVIRONMENT_TYPES,
        help="how the job service starts SDK workers (default EXTERNAL: a worker pool)",
    )
    g.add_argument(
        "--environment-config",
        metavar="CONFIG",
        help="EXTERNAL: the worker pool's HOST:PORT (`tfxp beam workers`); DOCKER: the image",
    )
    g.add_argument("--temp-location", help="Beam's temp location (dataflow: gs://BUCKET/tmp)")
    g.add_argument(
        "--sdk-container-image",
        help="an image with the project installed (instead of shipping it with --setup_file)",
    )
    g.add_argument("--beam-workers", type=int, help="multi-process: SDK workers (0: per core)")
    g.add_argument(
        "--beam-arg",
        action="append",
        metavar="--FLAG=VALUE",
        help="a raw Beam pipeline flag, repeatable, last wins (e.g. --beam-arg=--project=p)",
    )
    return g


def beam_from_args(args: argparse.Namespace, config: PipelineConfig) -> BeamOptions | None:
    """The Beam flags as options for the run plan (None: no Beam flag given, the
    dataset's default). `--beam auto` stays `auto`: the plan picks the mode from the
    bytes of the spans it selects (pipeline/plan.py)."""
    mode = getattr(args, "beam", None)
    extra = tuple(getattr(args, "beam_arg", None) or ())
    if mode is None and not extra:
        return None
    mode = mode or "in-process"
    remote = mode in REMOTE_MODES
    # Remote workers open s3:// with TensorFlow too (Transform, TFMA load
    # SavedModels), which needs the plugin that registers the filesystem.
    s3 = any(loc.uri.startswith("s3://") for loc in config_locations(config))
    spark_master, executor_memory = _spark_master(args, mode)
    return BeamOptions(
        mode=mode,
        job_endpoint=args.job_endpoint,
        spark_master=spark_master,
        spark_executor_memory=executor_memory,
        environment_type=args.environment_type,
        environment_config=args.environment_config,
        temp_location=args.temp_location,
        sdk_container_image=args.sdk_container_image,
        num_workers=args.beam_workers or 0,
        # Every SDK worker caches Beam's DoFn introspection, as the driver does.
        plugins=(beam_speedups.PLUGIN, *(("tfxp.storage.beam_plugin",) if remote and s3 else ())),
        extra_args=extra,
    )


def _spark_master(args: argparse.Namespace, mode: str) -> tuple[str | None, str | None]:
    """--beam spark: the master named, or that of the cluster `tfxp engine start` runs
    (whose executors then get all a worker offers: Spark's default of 1g would never
    start on a smaller worker). Raises ValueError when there is neither."""
    named = getattr(args, "spark_master", None)
    if named and mode != "spark":
        raise ValueError(f"--spark-master is for --beam spark (this run: --beam {mode})")
    if mode != "spark" or named:
        return named, None
    from tfxp.engine import running_cluster

    running = running_cluster()
    return running.master_url, running.worker_memory


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields these flags set (None: not given, or a flag the command lacks).
    Pure: nothing is read, listed or opened."""

    def flag(name: str) -> Any:
        return getattr(args, name, None)

    if flag("data_version") and (flag("span") is not None or flag("version") is not None):
        raise ValueError("--data-version names a span itself: drop --span/--version")
    return dict(
        data_root=flag("data_root") or None,
        run_dir=flag("run_dir") or None,
        artifact_root=flag("pipeline_root") or None,
        serving_root=flag("serving_dir") or None,
        state_dir=flag("state_dir") or None,
        train_steps=flag("train_steps"),
        eval_steps=flag("eval_steps"),
        enable_cache=False if flag("no_cache") else None,
        warn_only=flag("warn_only") or None,
        span=flag("span"),
        version=flag("version"),
        window=flag("window"),
        num_shards=flag("num_shards"),
    )


def config_from_args(args: argparse.Namespace) -> PipelineConfig:
    """The config these flags ask for, built once; `--data-version` pins the span and
    bytes its record names (read from ML Metadata). Beam is the run plan's to choose
    (`beam_from_args`, pipeline/plan.py)."""
    config = pipeline_config(args.dataset, **overrides_from_args(args))
    config = config.replace(storage=storage_from_args(args, config))
    name = getattr(args, "data_version", None)
    if name:
        from tfxp.datasets.versions import resolve_version

        config = config.replace(
            **resolve_version(config, store_location(args, config.local_dir), name)
        )
    return config


def store_location(
    args: argparse.Namespace, default_run_dir: str, *, run_dir: str | None = None
) -> StoreLocation:
    """The ML Metadata store the flags name: --mysql-* flags, then MLMD_MYSQL_* from the
    environment, then SQLite in `run_dir` (a command whose --run-dir names the store
    to read) or `default_run_dir` (a run's local directory, `config.local_dir`).

    Raises MetadataStoreError (one line, what to do) on incomplete MySQL settings.
    """
    return location_from(
        run_dir=run_dir,
        mysql_host=getattr(args, "mysql_host", None),
        mysql_port=getattr(args, "mysql_port", None),
        mysql_database=getattr(args, "mysql_database", None),
        mysql_user=getattr(args, "mysql_user", None),
        default_run_dir=default_run_dir,
    )


# The commands that read ML Metadata alone (`tfxp runs`, `tfxp lineage`).


def open_lineage(args: argparse.Namespace, dataset: str | None = None):
    """The `Lineage` queries over the store the flags name (the dataset's by default)."""
    from metadata.lineage import Lineage

    config = dataset_config(dataset or args.dataset)
    location = store_location(args, config.local_dir, run_dir=getattr(args, "run_dir", None))
    store = open_store(location)
    return Lineage(store, config.pipeline_name, location.describe())


def printed(func):
    """A command returning its text -> one printing it, or one ERROR line and exit code 1."""

    def wrapped(args: argparse.Namespace) -> int:
        from metadata.store import LineageError

        try:
            text = func(args)
        except (LineageError, MetadataStoreError, ValueError) as e:
            message = " ".join(str(e).split())  # one line, whatever the cause
            print(f"ERROR: {message}", file=sys.stderr)
            return 1
        print(text)
        return 0

    return wrapped


def add_store_query_flags(p: argparse.ArgumentParser, *, dataset_flag: bool = True) -> None:
    """--dataset (optional), --json and the ML Metadata store's flags."""
    if dataset_flag:
        p.add_argument(
            "--dataset",
            default=DEFAULT_DATASET,
            choices=dataset_names(),
            help=f"which pipeline's runs (default {DEFAULT_DATASET})",
        )
    p.add_argument("--json", action="store_true", help="stable JSON (sorted keys) for scripts")
    add_store_flags(p, default_run_dir_help=f" (default: the dataset's, runs/{DEFAULT_DATASET})")


def standalone_main(register, doc: str, argv: list[str] | None = None) -> int:
    """`python -m tfxp.cli.<group> ...`: one command group's parser without the rest of `tfxp`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    parser = argparse.ArgumentParser(prog="tfxp", description=doc)
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)
