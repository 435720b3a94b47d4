"""Command line: `tfxp run` (the main job) and `tfxp predict` (score a CSV)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from pipeline.config import DATASETS, dataset_config


def _add_config_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default="taxi", choices=sorted(DATASETS), help="dataset config")
    p.add_argument("--data-root", help="raw data folder holding span-<N>/ drops")
    p.add_argument("--run-dir", help="where the pipeline root, ML Metadata and pushed models go")


def _config(args: argparse.Namespace):
    config = dataset_config(args.dataset)
    changes = {}
    if args.data_root:
        changes["data_root"] = args.data_root
    if args.run_dir:
        changes["run_dir"] = args.run_dir
    for name in ("train_steps", "eval_steps"):
        if getattr(args, name, None) is not None:
            changes[name] = getattr(args, name)
    if getattr(args, "no_cache", False):
        changes["enable_cache"] = False
    return config.replace(**changes)


def cmd_run(args: argparse.Namespace) -> int:
    from pipeline.runner import PipelineRunError, run_local

    config = _config(args)
    try:
        summary = run_local(
            config,
            from_nodes=args.from_node or (),
            to_nodes=args.to_node or (),
            verbose=args.verbose,
        )
    except PipelineRunError as e:
        print(f"\nERROR: {e}", file=sys.stderr)
        return 1
    print()
    print(summary.to_json() if args.json else summary.render())
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from components.csv_checks import CsvInputError
    from pipeline.predict import PredictError, predict_csv

    config = _config(args)
    try:
        result = predict_csv(config, args.csv, output=args.output, model_dir=args.model)
    except (PredictError, CsvInputError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    print(result)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfxp", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the whole pipeline locally (LocalDagRunner)")
    _add_config_flags(run)
    run.add_argument("--train-steps", type=int, help="training steps (default from config)")
    run.add_argument("--eval-steps", type=int)
    run.add_argument("--no-cache", action="store_true", help="re-execute every component")
    run.add_argument("--from-node", action="append", help="partial run: start at this component")
    run.add_argument("--to-node", action="append", help="partial run: stop after this component")
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    run.add_argument("-v", "--verbose", action="store_true", help="stream TFX's logs too")
    run.set_defaults(func=cmd_run)

    pred = sub.add_parser("predict", help="score a CSV's rows with the pushed model")
    _add_config_flags(pred)
    pred.add_argument("csv", help="CSV with the raw feature columns (label optional)")
    pred.add_argument("-o", "--output", help="write rows + predictions to this CSV")
    pred.add_argument("--model", help="SavedModel dir (default: latest pushed model)")
    pred.set_defaults(func=cmd_predict)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


def exit_now(code: int) -> None:
    """Exits without interpreter teardown.

    Everything is written and ML Metadata is closed by now; tearing down
    TensorFlow's and Beam's threads and objects would add ~4 s and print
    harmless "Exception ignored" noise from TensorFlow's finalizers.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())


def console_main() -> None:
    """Entry point of the `tfxp` console script."""
    exit_now(main())
