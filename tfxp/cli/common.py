"""Flags and config shared by every command: which dataset, where its data and runs are."""

from __future__ import annotations

import argparse

from pipeline.config import DATASETS, dataset_config


def add_config_flags(p: argparse.ArgumentParser) -> None:
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
