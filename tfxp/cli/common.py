"""Flags and config shared by every command: which dataset, where its data and runs are."""

from __future__ import annotations

import argparse
from typing import Any

from pipeline.config import PipelineConfig
from pipeline.datasets import dataset_names
from pipeline.overrides import pipeline_config
from tfxp.metadata.store import StoreLocation, add_mysql_flags, location_from


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


def config_from_args(args: argparse.Namespace) -> PipelineConfig:
    """The config these flags ask for (flags a command lacks count as not given)."""

    def flag(name: str) -> Any:
        return getattr(args, name, None)

    return pipeline_config(
        args.dataset,
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
