"""`tfxp report`: the path of a run's HTML validation report."""

from __future__ import annotations

import argparse
import sys

from tfxp.cli.common import add_config_flags, config_from_args


def cmd_report(args: argparse.Namespace) -> int:
    from metadata.gate_report import ReportError, find_report
    from tfxp.storage.storage import StorageError, enable_filesystems, is_remote

    config = config_from_args(args)
    try:
        if is_remote(config.report_dir):
            enable_filesystems([config.report_dir])
        path = find_report(config, args.run_id)
    except (ReportError, StorageError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


def register(sub) -> None:
    rep = sub.add_parser("report", help="print the path of a run's HTML validation report")
    add_config_flags(rep, store=True)
    rep.add_argument("--run-id", help="this run's report (default: the newest)")
    rep.set_defaults(func=cmd_report)
