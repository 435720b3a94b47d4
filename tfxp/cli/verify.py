"""`tfxp verify`: check every shard of Examples artifacts."""

from __future__ import annotations

import argparse
import sys

from tfxp.cli.common import add_config_flags, config_from_args, store_location


def cmd_verify(args: argparse.Namespace) -> int:
    import json

    from metadata.examples import examples_artifacts, recorded_counts
    from metadata.store import MetadataStoreError, open_store
    from tfxp.storage.verify import verify_artifact

    config = config_from_args(args)
    try:
        store = open_store(store_location(args, config.local_dir))
        artifacts = examples_artifacts(store, args.artifact_ids)
        reports = [verify_artifact(a.id, a.uri, recorded_counts(store, a.id)) for a in artifacts]
    except (MetadataStoreError, ValueError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([r.to_dict() for r in reports], indent=2, sort_keys=True))
    else:
        print("\n".join(r.render() for r in reports) or "no Examples artifacts in this store")
    return 0 if all(r.ok for r in reports) else 1


def register(sub: argparse._SubParsersAction) -> None:
    ver = sub.add_parser("verify", help="check every shard of Examples artifacts")
    add_config_flags(ver, store=True)
    ver.add_argument("artifact_ids", nargs="*", type=int, help="artifact ids (default: all)")
    ver.add_argument("--json", action="store_true")
    ver.set_defaults(func=cmd_verify)
