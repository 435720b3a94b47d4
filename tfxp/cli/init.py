"""`tfxp init NAME --csv FILE... --label COLUMN`: a dataset from CSV files, no code.

The command's flags and its error handling; the inference and the writing are
in tfxp/init/command.py (its steps in tfxp/init_*.py).
"""

from __future__ import annotations

import argparse
import sys

from pipeline.dataset_sections import TASKS
from tfxp.init import command as dataset_init
from tfxp.init import profile


def cmd_init(args: argparse.Namespace) -> int:
    try:
        return dataset_init.run_init(args)
    except profile.InitError as e:
        print(f"ERROR: {e}\nnothing was written", file=sys.stderr)
        return 1


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `init` to the `tfxp` parser."""
    p = sub.add_parser(
        "init",
        help="create a dataset from CSV files: schema, thresholds and a dataset file, no code",
        description=dataset_init.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", help="the dataset's name (lowercase letters, digits, - and _)")
    p.add_argument("--csv", nargs="+", required=True, metavar="PATH", help="the CSV files")
    p.add_argument("--label", required=True, metavar="COLUMN", help="the column to predict")
    p.add_argument("--task", choices=TASKS, help="default: inferred from the label's values")
    p.add_argument("--exclude", nargs="+", metavar="COL", help="columns the model must not use")
    p.add_argument(
        "--keep-unlabelled",
        action="store_true",
        help="refuse rows with a blank label instead of dropping them (and keep them in runs)",
    )
    g = p.add_argument_group(
        "event tables (one row per event): one SequenceExample per key, a sequence model"
    )
    g.add_argument("--sequence-key", metavar="COLUMN", help="the column naming each sequence")
    g.add_argument(
        "--order-by", metavar="COLUMN", help="orders a key's events (numbers or ISO timestamps)"
    )
    g.add_argument(
        "--max-length", type=int, help="steps kept per sequence (default: from the data)"
    )
    g.add_argument("--sequence-model", choices=("gru", "conv"), help="default: gru")
    p.add_argument("--link", action="store_true", help="link the files instead of copying them")
    p.add_argument("--data-root", help="keep the spans here (local or s3://) instead of data/NAME")
    p.add_argument(
        "--force", action="store_true", help="rewrite an existing dataset's files (never the data)"
    )
    p.set_defaults(func=cmd_init)
