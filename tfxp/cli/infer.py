"""`tfxp infer`: score a span with the blessed (or a named) model, recorded in ML Metadata."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from tfxp.cli.common import add_config_flags, config_from_args, store_location


def cmd_infer(args: argparse.Namespace) -> int:
    from components.batch_inference.scoring import ScoringError
    from components.batch_inference.serving import ServingModelError
    from metadata.store import MetadataStoreError
    from tfxp.models.infer import InferError, run_infer

    try:
        config = config_from_args(args)
        if args.data_root:  # the rows to score, whatever the dataset file's batch_inference says
            config = config.replace(
                inference=dataclasses.replace(
                    config.inference, data_root=os.path.abspath(args.data_root)
                )
            )
        result = run_infer(
            config,
            store_location(args, config.local_dir),
            span=args.span,
            version=args.version,
            model=args.model,
            output=args.output,
        )
    except (InferError, ScoringError, ServingModelError, MetadataStoreError, ValueError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        print("Nothing was published.", file=sys.stderr)
        return 1
    print(result)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "infer",
        help="score a span with the blessed model; predictions as CSV and TFRecords, "
        "recorded in ML Metadata",
    )
    add_config_flags(p, store=True)
    p.add_argument(
        "--span",
        type=int,
        help="span-<N> of the dataset's inference data root (default: the newest)",
    )
    p.add_argument("--version", type=int, help="only this version of the span")
    p.add_argument(
        "--model",
        default="blessed",
        help="'blessed' (the newest pushed model, default) or a pushed version number",
    )
    p.add_argument(
        "-o",
        "--output",
        help="predictions folder to create (default: <run-dir>/predictions/span-<N>-<run id>)",
    )
    p.set_defaults(func=cmd_infer)
