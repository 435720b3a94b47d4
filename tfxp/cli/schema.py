"""`tfxp schema propose`: a schema proposal from the latest statistics, never over the curated one."""

from __future__ import annotations

import argparse
import sys

from tfxp.cli.common import add_config_flags, config_from_args, store_location


def cmd_schema_propose(args: argparse.Namespace) -> int:
    from metadata.gate_report import ReportError, propose_schema
    from metadata.store import MetadataStoreError, open_store

    config = config_from_args(args)
    try:
        proposal = propose_schema(
            open_store(store_location(args, config.local_dir)), config, args.output
        )
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
    schema = sub.add_parser("schema", help="curated schema tools")
    schema_sub = schema.add_subparsers(dest="schema_command", required=True)
    prop = schema_sub.add_parser(
        "propose",
        help="propose a schema from the latest statistics and print the diff (never overwrites)",
    )
    add_config_flags(prop, store=True)
    prop.add_argument("-o", "--output", help="where to write the proposal (default: run dir)")
    prop.set_defaults(func=cmd_schema_propose)
