"""`tfxp report` (the path of a run's validation report) and `tfxp schema propose`."""

from __future__ import annotations

import argparse
import sys

from tfxp.cli.common import add_config_flags, config_from_args, store_location


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
    from tfxp.metadata.report import ReportError, propose_schema
    from tfxp.metadata.store import MetadataStoreError, open_store

    config = config_from_args(args)
    try:
        proposal = propose_schema(open_store(store_location(args, config)), config, args.output)
    except (ReportError, MetadataStoreError) as e:
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
    add_config_flags(rep, store=True)
    rep.add_argument("--run-id", help="this run's report (default: the newest)")
    rep.set_defaults(func=cmd_report)

    schema = sub.add_parser("schema", help="curated schema tools")
    schema_sub = schema.add_subparsers(dest="schema_command", required=True)
    prop = schema_sub.add_parser(
        "propose",
        help="propose a schema from the latest statistics and print the diff (never overwrites)",
    )
    add_config_flags(prop, store=True)
    prop.add_argument("-o", "--output", help="where to write the proposal (default: run dir)")
    prop.set_defaults(func=cmd_schema_propose)
