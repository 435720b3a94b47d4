"""`tfxp predict`: score a CSV's rows with the pushed model."""

from __future__ import annotations

import argparse
import sys

from tfxp.cli.common import add_config_flags, config_from_args


def cmd_predict(args: argparse.Namespace) -> int:
    from components.example_gen.csv_checks import CsvInputError
    from tfxp.models.predict import PredictError, predict_csv

    config = config_from_args(args)
    if config.example_gen == "sequence":
        return _predict_events(config, args)
    try:
        result = predict_csv(config, args.csv, output=args.output, model_dir=args.model)
    except (PredictError, CsvInputError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    print(result)
    return 0


def _predict_events(config, args: argparse.Namespace) -> int:
    """An event table: one prediction per key (tfxp/models/predict_sequences.py)."""
    from tfxp.models.predict_sequences import SequencePredictError, predict_events

    try:
        result = predict_events(config, [args.csv], output=args.output, model_dir=args.model)
    except SequencePredictError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    print(result)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    pred = sub.add_parser("predict", help="score a CSV's rows with the pushed model")
    add_config_flags(pred)
    pred.add_argument(
        "csv",
        help="CSV with the raw feature columns (label optional); for a sequence dataset an "
        "event table, scored one prediction per key",
    )
    pred.add_argument("-o", "--output", help="write rows + predictions to this CSV")
    pred.add_argument("--model", help="SavedModel dir (default: latest pushed model)")
    pred.set_defaults(func=cmd_predict)
