"""`tfxp run`: the whole pipeline locally (LocalDagRunner)."""

from __future__ import annotations

import argparse
import os
import sys

from metadata.store import MetadataStoreError
from tfxp.cli.common import (
    add_beam_flags,
    add_config_flags,
    beam_from_args,
    config_from_args,
    store_location,
)


def cmd_run(args: argparse.Namespace) -> int:
    from pipeline.run_id import new_run_id
    from tfxp.local.runner import (
        PipelineRunError,
        RunInterruptedError,
        ValidationBlockedError,
        plan_local_run,
        run_local,
    )

    try:
        config = config_from_args(args)
        location = store_location(args, config.local_dir)
        if args.lakefs:
            from tfxp.storage.branches import parse

            if parse(config.data_root) is None:
                raise ValueError(
                    f"--lakefs: data root {config.data_root} is not s3://REPO/BRANCH/...; "
                    "point --data-root at the repository's S3 gateway path"
                )
        beam = beam_from_args(args, config)
    except (MetadataStoreError, ValueError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    # SQLite: the runner's own connection to config.metadata_path, with its file checks.
    connection = (
        location.connection_config(create=True, read_only=False) if location.is_mysql else None
    )
    run_id = new_run_id()
    try:
        # The run is planned once, here: spans, Beam mode, schema, settings (pipeline/plan.py).
        plan = plan_local_run(config, beam, run_id=run_id, local_dirs=False)
        from runtime.beam_workers import check_services

        check_services(plan.config.beam_args)  # a portable run's job service and worker pool
        if plan.beam.note:
            print(plan.beam.note)
        if plan.config.window > 1:
            from tfxp.local.window import ingest_older_spans

            ingest_older_spans(plan, metadata_connection_config=connection)
        summary = run_local(
            plan,
            run_id=run_id,
            from_nodes=args.from_node or (),
            to_nodes=args.to_node or (),
            verbose=args.verbose,
            metadata_connection_config=connection,
            warm_beam_workers=not args.fresh_workers,
        )
    except (PipelineRunError, ValueError) as e:  # SpanError is a ValueError
        print(f"\nERROR: {e}", file=sys.stderr)
        report = os.path.join(config.report_dir, "")
        if isinstance(e, ValidationBlockedError):
            print(
                f"(`tfxp report` prints the report's path; reports are in {report})",
                file=sys.stderr,
            )
        # A shell's convention for a command its user interrupted (128 + SIGINT).
        return 130 if isinstance(e, RunInterruptedError) else 1
    finally:
        # Alerts are posted in the background; give them their deadline before exiting.
        from runtime import alerts

        alerts.wait_for_deliveries(alerts.deadline_seconds())
    if args.lakefs:
        _record_bucket_ref(config, location)
    print()
    print(summary.to_json() if args.json else summary.render())
    return 0


def _record_bucket_ref(config, location) -> None:
    """A data root in lakeFS's layout (s3://REPO/BRANCH/...): which branch and commit."""
    from tfxp.datasets.versions import record_bucket_ref

    try:
        found = record_bucket_ref(config, location)
    except Exception as e:  # noqa: BLE001 - the run succeeded; a missing record is worth a line, not a failure
        print(f"(could not record the data root's branch: {e})")
        return
    if found is not None:
        print(f"data: span {found.span} from {found.describe()}")


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run the whole pipeline locally (LocalDagRunner)")
    add_config_flags(run, store=True)
    run.add_argument("--train-steps", type=int, help="training steps (default from config)")
    run.add_argument("--eval-steps", type=int)
    run.add_argument("--no-cache", action="store_true", help="re-execute every component")
    run.add_argument("--from-node", action="append", help="partial run: start at this component")
    run.add_argument("--to-node", action="append", help="partial run: stop after this component")
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    run.add_argument("--span", type=int, help="train on this span (default: the latest)")
    run.add_argument("--version", type=int, help="with --span: this version (default: latest)")
    run.add_argument("--window", type=int, help="train on the newest K spans up to --span")
    run.add_argument(
        "--data-version",
        metavar="NAME",
        help="train on the span a tag or DVC revision names (`tfxp data tag`, `data add "
        "--dvc`), refusing if its bytes differ from the recorded content sha256",
    )
    run.add_argument("--num-shards", type=int, help="TFRecord shards per split (0: sized)")
    run.add_argument(
        "--lakefs",
        action="store_true",
        help="the data root is s3://REPO/BRANCH/... of a lakeFS S3 gateway: record the "
        "repository, branch and (when known) commit of the span the run read",
    )
    run.add_argument("-v", "--verbose", action="store_true", help="stream TFX's logs too")
    run.add_argument(
        "--warn-only",
        action="append",
        metavar="KIND",
        help="validation gate: report this anomaly kind (schema, drift, skew, or a TFDV "
        "anomaly type) as a warning instead of blocking; repeatable",
    )
    beam = add_beam_flags(run)
    beam.add_argument(
        "--fresh-workers",
        action="store_true",
        help="multi-process: start each SDK worker as a fresh interpreter (default: forked "
        "from one process that imported their libraries once)",
    )
    run.set_defaults(func=cmd_run)
