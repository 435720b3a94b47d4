"""`tfxp report` (the path of a run's validation report) and `tfxp schema propose`."""

from __future__ import annotations

import argparse
import os
import sys

from tfxp.cli.common import add_config_flags, config_from_args


def cmd_report(args: argparse.Namespace) -> int:
    from tfxp.metadata.report import ReportError, find_report
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


def cmd_schema_propose(args: argparse.Namespace) -> int:
    from tfx.orchestration import metadata

    from tfxp.metadata.report import ReportError, propose_schema

    config = config_from_args(args)
    if not os.path.exists(config.metadata_path):
        print(
            f"ERROR: no ML Metadata store at {config.metadata_path}; run the pipeline first",
            file=sys.stderr,
        )
        return 1
    try:
        connection = metadata.sqlite_metadata_connection_config(config.metadata_path)
        with metadata.Metadata(connection) as m:
            proposal = propose_schema(m.store, config, args.output)
    except ReportError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    span = f" (span {proposal.span})" if proposal.span is not None else ""
    print(f"statistics: {proposal.statistics_uri}{span}")
    if proposal.diff:
        print(proposal.diff, end="")
    else:
        print(f"no difference: {config.schema_file} already fits the latest statistics")
    print(f"proposed schema written to {proposal.proposal_path}")
    print(f"the curated schema {config.schema_file} was not changed; copy what you accept by hand")
    return 0


def register(sub) -> None:
    rep = sub.add_parser("report", help="print the path of a run's HTML validation report")
    add_config_flags(rep)
    rep.add_argument("--run-id", help="this run's report (default: the newest)")
    rep.set_defaults(func=cmd_report)

    schema = sub.add_parser("schema", help="curated schema tools")
    schema_sub = schema.add_subparsers(dest="schema_command", required=True)
    prop = schema_sub.add_parser(
        "propose",
        help="propose a schema from the latest statistics and print the diff (never overwrites)",
    )
    add_config_flags(prop)
    prop.add_argument("-o", "--output", help="where to write the proposal (default: run dir)")
    prop.set_defaults(func=cmd_schema_propose)
