"""`tfxp watch`: run the pipeline on every new span, until Ctrl-C.

    tfxp watch [--dataset taxi] [--interval 30] [--max-attempts 3] [--once]
               [--skew-every 15m] [--skew-only]

Each new, completely published span of the dataset's data root (local, or
s3:// with --data-root) starts one run; which spans were handled is kept in ML
Metadata, so a restarted watcher goes on where the last one stopped. Alerts
go to the webhooks in TFXP_ALERT_WEBHOOKS (and the dataset's `alerts:`).

--skew-every DURATION also checks, on that schedule, the latest span's
statistics against the newest window of the request log `tfxp serve` writes
(<data root>/serving-log/), with no new span and no run; an alert goes out
when skew appears and when it clears. --skew-only does only that.
"""

from __future__ import annotations

import argparse
import sys

from metadata.store import MetadataStoreError
from tfxp.cli.common import add_config_flags, config_from_args, store_location


def cmd_watch(args: argparse.Namespace) -> int:
    from metadata.store import open_store
    from runtime import alerts
    from tfxp.monitor.watch import Watcher, WatchOptions, parse_duration

    try:
        config = config_from_args(args)
        location = store_location(args, config.local_dir)
    except (MetadataStoreError, ValueError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    try:
        skew_every = parse_duration(args.skew_every) if args.skew_every else None
    except ValueError as e:
        print(f"ERROR: --skew-every: {e}", file=sys.stderr)
        return 1
    if args.skew_window or args.skew_max_examples:
        try:
            config = config.replace(serving_log_window=_window(args, config))
        except ValueError as e:
            print(f"ERROR: {e}", file=sys.stderr)
            return 1
    if args.skew_only and not skew_every:
        print("ERROR: --skew-only needs --skew-every DURATION", file=sys.stderr)
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
            skew_every=skew_every,
            spans=not args.skew_only,
        ),
        run_kwargs=run_kwargs,
        notify=alerts.Notifier(
            hooks, alerts.file_logger(None), deadline=alerts.deadline_seconds()
        ).send,
    )
    code = watcher.run_forever()
    alerts.wait_for_deliveries(alerts.deadline_seconds())
    return code


def _window(args: argparse.Namespace, config):
    """The dataset's log window with --skew-window / --skew-max-examples applied."""
    from components.validation.serving_log import WindowOptions
    from tfxp.monitor.watch import parse_duration

    window = config.serving_log_window
    hours = window.hours
    if args.skew_window:
        try:
            hours = parse_duration(args.skew_window) / 3600
        except ValueError as e:
            raise ValueError(f"--skew-window: {e}") from None
    return WindowOptions(hours, args.skew_max_examples or window.max_examples)


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
    w.add_argument(
        "--skew-every",
        metavar="DURATION",
        help="check skew on the request log this often (90s, 15m, 2h, 1d), alerting when it "
        "appears and clears",
    )
    w.add_argument(
        "--skew-window",
        metavar="DURATION",
        help="how far back from the newest log file the check reads (default: the dataset's "
        "serving_log hours, 24h)",
    )
    w.add_argument(
        "--skew-max-examples",
        type=int,
        metavar="N",
        help="at most N served requests, newest first (default 100000)",
    )
    w.add_argument(
        "--skew-only", action="store_true", help="only check skew (with --skew-every): no runs"
    )
    w.add_argument("--train-steps", type=int, help="training steps (default from the dataset)")
    w.add_argument("--eval-steps", type=int)
    w.add_argument("-v", "--verbose", action="store_true", help="stream TFX's logs too")
    w.set_defaults(func=cmd_watch)
