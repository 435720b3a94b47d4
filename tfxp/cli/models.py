"""`tfxp models`: pushed model versions by name (the registry).

    tfxp models list [--dataset D] [--json]      versions, their aliases, and alias history
    tfxp models promote VERSION [--alias champion] [--why TEXT]
    tfxp models rollback [--alias champion] [--why TEXT]
    tfxp models compare [--labels FILE.csv] [--window 24h] [--json]

An alias (champion, challenger, ...) names one pushed version. Its changes are
recorded in ML Metadata with who, when and why (`tfxp lineage model champion`
shows them), and the serving path it points to, `<serving>/<alias>` (a link)
and `<serving>/<alias>.json`, changes in one atomic step.
"""

from __future__ import annotations

import argparse
import json
import sys

from metadata.store import LineageError, MetadataStoreError, open_store
from tfxp.cli.common import add_config_flags, config_from_args, store_location


def _open(args: argparse.Namespace, *, writable: bool):
    from metadata.lineage import Lineage

    config = config_from_args(args)
    location = store_location(args, config.local_dir)
    store = open_store(location, writable=writable)
    return config, Lineage(store, config.pipeline_name, location.describe())


def cmd_list(args: argparse.Namespace) -> str:
    from dataclasses import asdict

    from metadata import aliases
    from tfxp.models import registry

    config, lineage = _open(args, writable=False)
    versions = registry.versions(lineage)
    changes = aliases.history(lineage.store, lineage.pipeline)
    if args.json:
        return json.dumps(
            {
                "pipeline": lineage.pipeline,
                "serving_dir": config.serving_dir,
                "versions": [asdict(v) for v in versions],
                "alias_changes": [c.to_dict() for c in changes],
            },
            indent=2,
            sort_keys=True,
        )
    lines = [f"models of pipeline '{lineage.pipeline}' pushed to {config.serving_dir}"]
    if not versions:
        lines.append("  no pushed version yet (a blessed model is pushed by `tfxp run`)")
    else:
        lines.append(f"  {'version':<12} {'model':>6}  {'spans':<8} {'run':<24} aliases")
    for v in versions:
        spans = ",".join(str(s) for s in v.spans) or "-"
        lines.append(
            f"  {v.version:<12} #{v.model_id:<5}  {spans:<8} {v.run_id or '-':<24} "
            f"{', '.join(v.aliases) or '-'}"
        )
    if changes:
        lines.append("alias changes (newest last):")
    for c in changes[-10:]:
        was = f" (was {c.previous_version})" if c.previous_version else ""
        why = f": {c.why}" if c.why else ""
        lines.append(f"  {c.when}  {c.alias:<10} -> {c.version}{was}  {c.action} by {c.who}{why}")
    return "\n".join(lines)


def _report(outcome, verb: str) -> str:
    was = f" (was {outcome.previous_version})" if outcome.previous_version else ""
    return (
        f"{verb} version {outcome.version.version} (model #{outcome.version.model_id}) to "
        f"{outcome.change.alias}{was}\n"
        f"  serving path: {outcome.serving_path} -> {outcome.version.path}\n"
        f"  recorded in ML Metadata as execution #{outcome.change.execution_id} "
        f"by {outcome.change.who} at {outcome.change.when}"
    )


def cmd_promote(args: argparse.Namespace) -> str:
    from tfxp.models import registry

    config, lineage = _open(args, writable=True)
    outcome = registry.promote(config, lineage, args.version, args.alias, why=args.why or "")
    return _report(outcome, "promoted")


def cmd_rollback(args: argparse.Namespace) -> str:
    from tfxp.models import registry

    config, lineage = _open(args, writable=True)
    outcome = registry.rollback(config, lineage, args.alias, why=args.why or "")
    return _report(outcome, "rolled back")


def cmd_compare(args: argparse.Namespace) -> str:
    import logging

    # Beam (imported with the definition) warns about crcmod although it uses google-crc32c.
    logging.getLogger().addFilter(lambda r: not str(r.msg).startswith("crcmod package"))
    from components.validation.serving_log import WindowOptions
    from pipeline.config import serving_log_dir
    from pipeline.eval_config import task
    from tfxp.models import compare
    from tfxp.monitor.watch import parse_duration

    config = config_from_args(args)
    window = None
    if args.window:
        try:
            window = WindowOptions(hours=parse_duration(args.window) / 3600)
        except ValueError as e:
            raise ValueError(f"--window: {e}") from None
    classes = []
    if config.tabular is not None:
        classes = list(config.tabular.classes or [])
    elif config.image is not None:
        classes = list(config.image.class_names)
    result = compare.compare(
        args.log_dir or serving_log_dir(config),
        task(config),
        window=window,
        labels_path=args.labels,
        id_column=args.id_column,
        label_column=args.label_column or "label",
        classes=classes,
    )
    if args.json:
        return json.dumps(compare.to_dict(result), indent=2, sort_keys=True)
    return compare.render(result)


def _run(func):
    def wrapped(args: argparse.Namespace) -> int:
        try:
            text = func(args)
        except (LineageError, MetadataStoreError, ValueError) as e:
            message = " ".join(str(e).split())
            print(f"ERROR: {message}", file=sys.stderr)
            return 1
        print(text)
        return 0

    return wrapped


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `models list|promote|rollback` to the `tfxp` parser."""
    models = sub.add_parser("models", help="pushed model versions, aliases, promote and rollback")
    msub = models.add_subparsers(dest="models_command", required=True)

    ls = msub.add_parser("list", help="pushed versions with their aliases, and alias history")
    add_config_flags(ls, store=True)
    ls.add_argument("--json", action="store_true", help="stable JSON (sorted keys)")
    ls.set_defaults(func=_run(cmd_list))

    promote = msub.add_parser("promote", help="give an alias (default champion) to a version")
    promote.add_argument("version", help="a pushed version (`tfxp models list`)")
    promote.add_argument("--alias", default="champion", help="default champion")
    promote.add_argument("--why", help="the reason, kept in ML Metadata with who and when")
    add_config_flags(promote, store=True)
    promote.set_defaults(func=_run(cmd_promote))

    rollback = msub.add_parser("rollback", help="give an alias back to its previous version")
    rollback.add_argument("--alias", default="champion", help="default champion")
    rollback.add_argument("--why", help="the reason, kept in ML Metadata with who and when")
    add_config_flags(rollback, store=True)
    rollback.set_defaults(func=_run(cmd_rollback))

    cmp = msub.add_parser(
        "compare",
        help="champion vs challenger on logged requests: agreement, and metrics on late labels",
        description="Reads the request log `tfxp serve` writes (<data root>/serving-log/): "
        "agreement of the served and shadow predictions on the same request ids, and with "
        "--labels each version's metrics on the requests it scored.",
    )
    add_config_flags(cmp)
    cmp.add_argument("--log-dir", help="the request log (default <data root>/serving-log)")
    cmp.add_argument(
        "--window",
        metavar="DURATION",
        help="only files opened this far back from the newest (default: every file)",
    )
    cmp.add_argument(
        "--labels", metavar="FILE.csv", help="labels that arrived later, joined by request id"
    )
    cmp.add_argument("--id-column", default="request_id", help="default request_id")
    cmp.add_argument(
        "--label-column",
        help="the label column (default label): a class index or name, 0/1, or a number",
    )
    cmp.add_argument("--json", action="store_true", help="stable JSON (sorted keys)")
    cmp.set_defaults(func=_run(cmd_compare))
