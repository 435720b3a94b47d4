"""Flags and config shared by every command: which dataset, where its data and runs are."""

from __future__ import annotations

import argparse

from pipeline.config import DATASETS, PipelineConfig, dataset_config
from tfxp.metadata.store import StoreLocation, add_mysql_flags, location_from


def add_config_flags(p: argparse.ArgumentParser, *, store: bool = False) -> None:
    """The dataset and where things are; with `store`, the ML Metadata store's flags too."""
    p.add_argument("--dataset", default="taxi", choices=sorted(DATASETS), help="dataset config")
    p.add_argument("--data-root", help="raw data folder holding span-<N>/ drops")
    p.add_argument("--run-dir", help="where the pipeline root, ML Metadata and pushed models go")
    # Object storage (s3://, gs://): see README "Object storage".
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


def config_from_args(args: argparse.Namespace):
    config = dataset_config(args.dataset)
    changes = {}
    if args.data_root:
        changes["data_root"] = args.data_root
    if args.run_dir:
        changes["run_dir"] = args.run_dir
    if getattr(args, "pipeline_root", None):
        changes["artifact_root"] = args.pipeline_root
    if getattr(args, "serving_dir", None):
        changes["serving_root"] = args.serving_dir
    if getattr(args, "state_dir", None):
        changes["state_dir"] = args.state_dir
    for name in ("train_steps", "eval_steps"):
        if getattr(args, name, None) is not None:
            changes[name] = getattr(args, name)
    if getattr(args, "no_cache", False):
        changes["enable_cache"] = False
    if getattr(args, "warn_only", None):
        changes["warn_only"] = tuple(args.warn_only)
    for name in ("span", "version", "window", "num_shards"):
        if getattr(args, name, None) is not None:
            changes[name] = getattr(args, name)
    return config.replace(**changes)


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
