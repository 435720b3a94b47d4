"""`tfxp watch`: run the pipeline on every new span, until Ctrl-C.

    tfxp watch [--dataset taxi] [--interval 30] [--max-attempts 3] [--once]

Each new, completely published span of the dataset's data root (local, or
s3:// with --data-root) starts one run; which spans were handled is kept in ML
Metadata, so a restarted watcher goes on where the last one stopped. Alerts
go to the webhooks in TFXP_ALERT_WEBHOOKS (and the dataset's `alerts:`).
"""

from __future__ import annotations

import argparse
import sys

from tfxp.cli.common import add_config_flags, config_from_args, store_location
from tfxp.metadata.store import MetadataStoreError


def cmd_watch(args: argparse.Namespace) -> int:
    from tfxp import alerts
    from tfxp.metadata.store import open_store
    from tfxp.watch import Watcher, WatchOptions

    try:
        config = config_from_args(args)
        location = store_location(args, config)
    except (MetadataStoreError, ValueError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    if args.interval <= 0 or args.max_attempts < 1 or args.backoff < 0:
        print(
            "ERROR: --interval must be > 0, --max-attempts >= 1 and --backoff >= 0",
            file=sys.stderr,
        )
        return 1
    connection = (
        location.connection_config(create=True, read_only=False) if location.is_mysql else None
    )
    run_kwargs = {
        "verbose": args.verbose,
        "metadata_connection_config": connection,
    }
    hooks = alerts.webhooks(config.alert_webhook_env)
    print(
        f"alerts: {len(hooks)} webhook(s)"
        + (f" ({', '.join(h.label for h in hooks)})" if hooks else f" (set {alerts.WEBHOOKS_ENV})")
    )
    watcher = Watcher(
        config,
        lambda: open_store(location, create=True),
        options=WatchOptions(
            interval=args.interval,
            max_attempts=args.max_attempts,
            backoff=args.backoff,
            once=args.once,
        ),
        run_kwargs=run_kwargs,
    )
    code = watcher.run_forever()
    alerts.wait_for_deliveries(alerts.deadline_seconds())
    return code


def register(sub: argparse._SubParsersAction) -> None:
    w = sub.add_parser(
        "watch",
        help="run the pipeline on every new span (local or s3://), until Ctrl-C",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_flags(w, store=True)
    w.add_argument("--interval", type=float, default=30.0, help="seconds between looks (30)")
    w.add_argument(
        "--max-attempts", type=int, default=3, help="runs of a failing span before giving up (3)"
    )
    w.add_argument(
        "--backoff",
        type=float,
        default=30.0,
        help="seconds before the first retry, doubling after each (30)",
    )
    w.add_argument("--once", action="store_true", help="run the spans waiting now, then exit")
    w.add_argument("--train-steps", type=int, help="training steps (default from the dataset)")
    w.add_argument("--eval-steps", type=int)
    w.add_argument("-v", "--verbose", action="store_true", help="stream TFX's logs too")
    w.set_defaults(func=cmd_watch)
