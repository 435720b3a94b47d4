"""Flags and config shared by every command: which dataset, where its data and runs are."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from metadata.store import (
    MetadataStoreError,
    StoreLocation,
    add_mysql_flags,
    add_store_flags,
    location_from,
    location_from_args,
    open_store,
)
from pipeline.beam import (
    AUTO,
    BEAM_MODES,
    ENVIRONMENT_TYPES,
    REMOTE_MODES,
    BeamOptions,
    auto_mode,
)
from pipeline.config import PipelineConfig
from pipeline.datasets import dataset_config, dataset_names
from pipeline.overrides import pipeline_config
from pipeline.spans import select_spans
from runtime import beam_speedups
from tfxp.storage.storage import config_locations


def add_config_flags(p: argparse.ArgumentParser, *, store: bool = False) -> None:
    """The dataset and where things are; with `store`, the ML Metadata store's flags too."""
    p.add_argument(
        "--dataset",
        default="taxi",
        choices=dataset_names(),
        help="a dataset: schema/<NAME>/dataset.yaml (`tfxp init` makes one)",
    )
    p.add_argument("--data-root", help="raw data folder holding span-<N>/ drops")
    p.add_argument("--run-dir", help="where the pipeline root, ML Metadata and pushed models go")
    # Object storage (s3://, gs://): see docs/object-storage.md.
    p.add_argument("--pipeline-root", help="artifacts here instead of <run-dir>/pipeline_root")
    p.add_argument("--serving-dir", help="push models here instead of <run-dir>/serving")
    p.add_argument(
        "--state-dir",
        help="local dir for ML Metadata, logs and the run lock (default: the run dir, or "
        "runs/remote/... when the run dir is s3:// or gs://)",
    )
    if store:
        add_mysql_flags(
            p.add_argument_group(
                "ML Metadata on MySQL/MariaDB (default: SQLite in the run directory)"
            )
        )


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


def _beam_options(args: argparse.Namespace, config: PipelineConfig) -> BeamOptions | None:
    """The Beam flags as options (None: no Beam flag given, the dataset's default)."""
    mode = getattr(args, "beam", None)
    extra = tuple(getattr(args, "beam_arg", None) or ())
    if mode == AUTO:
        mode, args.beam_choice = _auto(config)
        if mode == "in-process" and not extra:
            return None  # the config's own Beam arguments stand
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


def _auto(config: PipelineConfig) -> tuple[str, str | None]:
    """`--beam auto`: the mode for this run's input, and a line saying why (None:
    nothing worth saying, the run stays in-process as before)."""
    try:
        spans = select_spans(config)
    except ValueError:  # remote data, or a span problem the pre-run check reports
        return "in-process", None
    size = sum(s.nbytes for s in spans)
    mode = auto_mode(size, os.cpu_count() or 1)
    if mode == "in-process":
        return mode, None
    label = ", ".join(s.label for s in spans)
    return mode, (
        f"Beam: {mode}, one worker per core ({label}: {size / 2**20:.0f} MB of input); "
        "--beam in-process keeps it in this process"
    )


def config_from_args(args: argparse.Namespace) -> PipelineConfig:
    """The config these flags ask for (flags a command lacks count as not given).

    Raises ValueError (BeamConfigError) for Beam options a mode cannot run with.
    """

    def flag(name: str) -> Any:
        return getattr(args, name, None)

    overrides: dict[str, Any] = dict(
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
    config = pipeline_config(args.dataset, **overrides)
    if flag("data_version"):
        if flag("span") is not None or flag("version") is not None:
            raise ValueError("--data-version names a span itself: drop --span/--version")
        from tfxp.datasets.versions import resolve_version

        overrides.update(resolve_version(config, store_location(args, config), args.data_version))
        config = pipeline_config(args.dataset, **overrides)
    beam = _beam_options(args, config)
    if beam is None:
        return config
    if beam.mode == "multi-process" and not config.num_shards and config.example_gen == "csv":
        # Beam hands out work by file (a GZIP shard cannot be split), and the
        # ingest sizes shards at 256 MB of CSV: a span under that is one shard,
        # which one worker would read alone. Two shards per worker keep all busy.
        # (Image ingest cuts at least ten shards per worker itself when the data allows.)
        overrides["num_shards"] = 2 * (beam.num_workers or os.cpu_count() or 1)
    return pipeline_config(args.dataset, **overrides, beam=beam)


def store_location(args: argparse.Namespace, config: PipelineConfig) -> StoreLocation:
    """The ML Metadata store: --mysql-* flags, then MLMD_MYSQL_* from the environment,
    then SQLite in the run's local directory (`config.metadata_path`).

    Raises MetadataStoreError (one line, what to do) on incomplete MySQL settings.
    """
    return location_from(
        mysql_host=getattr(args, "mysql_host", None),
        mysql_port=getattr(args, "mysql_port", None),
        mysql_database=getattr(args, "mysql_database", None),
        mysql_user=getattr(args, "mysql_user", None),
        default_run_dir=config.local_dir,
    )


# The commands that read ML Metadata alone (`tfxp runs`, `tfxp lineage`).


def open_lineage(args: argparse.Namespace, dataset: str | None = None):
    """The `Lineage` queries over the store the flags name (the dataset's by default)."""
    from metadata.lineage import Lineage

    config = dataset_config(dataset or args.dataset)
    location = location_from_args(args, config.local_dir)
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
            default="taxi",
            choices=dataset_names(),
            help="which pipeline's runs (default taxi)",
        )
    p.add_argument("--json", action="store_true", help="stable JSON (sorted keys) for scripts")
    add_store_flags(p, default_run_dir_help=" (default: the dataset's, runs/taxi)")


def standalone_main(register, doc: str, argv: list[str] | None = None) -> int:
    """`python -m tfxp.cli.<group> ...`: one command group's parser without the rest of `tfxp`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    parser = argparse.ArgumentParser(prog="tfxp", description=doc)
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)
