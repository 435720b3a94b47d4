"""Command line: `tfxp run` (the main job) and `tfxp predict` (score a CSV)."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

from pipeline.config import dataset_config
from pipeline.datasets import dataset_names


def _add_config_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset",
        default="taxi",
        choices=dataset_names(),
        help="a dataset: schema/<NAME>/dataset.yaml (`tfxp init` makes one)",
    )
    p.add_argument("--data-root", help="raw data folder holding span-<N>/ drops")
    p.add_argument("--run-dir", help="where the pipeline root, ML Metadata and pushed models go")
    # Object storage (s3://, gs://): see README "Object storage".
    p.add_argument("--pipeline-root", help="artifacts here instead of <run-dir>/pipeline_root")
    p.add_argument("--serving-dir", help="push models here instead of <run-dir>/serving")
    p.add_argument(
        "--state-dir",
        help="local dir for ML Metadata, logs and the run lock (default: the run dir, or "
        "runs/remote/... when the run dir is s3:// or gs://)",
    )


def _config(args: argparse.Namespace):
    config = dataset_config(args.dataset)
    changes = {}
    if args.data_root:
        changes["data_root"] = args.data_root
    if args.run_dir:
        changes["run_dir"] = args.run_dir
    if getattr(args, "pipeline_root", None):
        changes["artifact_root"] = args.pipeline_root
    if getattr(args, "serving_dir", None):
        changes["serving_root"] = args.serving_dir
    if getattr(args, "state_dir", None):
        changes["state_dir"] = args.state_dir
    for name in ("train_steps", "eval_steps"):
        if getattr(args, name, None) is not None:
            changes[name] = getattr(args, name)
    if getattr(args, "no_cache", False):
        changes["enable_cache"] = False
    if getattr(args, "warn_only", None):
        changes["warn_only"] = tuple(args.warn_only)
    for name in ("span", "version", "window", "num_shards"):
        if getattr(args, name, None) is not None:
            changes[name] = getattr(args, name)
    return config.replace(**changes)


def cmd_run(args: argparse.Namespace) -> int:
    from pipeline.runner import PipelineRunError, ValidationBlockedError, run_local

    config = _config(args)
    connection = None
    if args.mysql_host:
        from pipeline.metadata_store import MetadataStoreError, location_from

        try:
            connection = location_from(
                mysql_host=args.mysql_host,
                mysql_port=args.mysql_port,
                mysql_database=args.mysql_database,
                mysql_user=args.mysql_user,
            ).connection_config(create=True, read_only=False)
        except MetadataStoreError as e:
            print(f"ERROR: {e}", file=sys.stderr)
            return 1
    try:
        if config.window > 1:
            from pipeline.spans import ingest_older_spans

            ingest_older_spans(config, metadata_connection_config=connection)
        summary = run_local(
            config,
            from_nodes=args.from_node or (),
            to_nodes=args.to_node or (),
            verbose=args.verbose,
            metadata_connection_config=connection,
        )
    except (PipelineRunError, ValueError) as e:  # SpanError is a ValueError
        print(f"\nERROR: {e}", file=sys.stderr)
        report = os.path.join(config.report_dir, "")
        if isinstance(e, ValidationBlockedError):
            print(
                f"(`tfxp report` prints the report's path; reports are in {report})",
                file=sys.stderr,
            )
        return 1
    print()
    print(summary.to_json() if args.json else summary.render())
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from components.csv_checks import CsvInputError
    from pipeline.predict import PredictError, predict_csv

    config = _config(args)
    try:
        result = predict_csv(config, args.csv, output=args.output, model_dir=args.model)
    except (PredictError, CsvInputError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    print(result)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    import json

    from tfx.orchestration import metadata

    from pipeline.run_guard import RunGuardError, check_metadata_store
    from pipeline.verify import examples_artifacts, verify_artifact

    config = _config(args)
    try:
        if not os.path.exists(config.metadata_path):
            raise RunGuardError(
                f"no ML Metadata store at {config.metadata_path}; run the pipeline first"
            )
        check_metadata_store(config.metadata_path)
        connection = metadata.sqlite_metadata_connection_config(config.metadata_path)
        with metadata.Metadata(connection) as m:
            artifacts = examples_artifacts(m.store, args.artifact_ids)
            reports = [verify_artifact(m.store, a) for a in artifacts]
    except (RunGuardError, ValueError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([r.to_dict() for r in reports], indent=2, sort_keys=True))
    else:
        print("\n".join(r.render() for r in reports) or "no Examples artifacts in this store")
    return 0 if all(r.ok for r in reports) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfxp", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the whole pipeline locally (LocalDagRunner)")
    _add_config_flags(run)
    run.add_argument("--train-steps", type=int, help="training steps (default from config)")
    run.add_argument("--eval-steps", type=int)
    run.add_argument("--no-cache", action="store_true", help="re-execute every component")
    run.add_argument("--from-node", action="append", help="partial run: start at this component")
    run.add_argument("--to-node", action="append", help="partial run: stop after this component")
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    run.add_argument("--span", type=int, help="train on this span (default: the latest)")
    run.add_argument("--version", type=int, help="with --span: this version (default: latest)")
    run.add_argument("--window", type=int, help="train on the newest K spans up to --span")
    run.add_argument("--num-shards", type=int, help="TFRecord shards per split (0: sized)")
    run.add_argument("-v", "--verbose", action="store_true", help="stream TFX's logs too")
    run.add_argument(
        "--warn-only",
        action="append",
        metavar="KIND",
        help="validation gate: report this anomaly kind (schema, drift, skew, or a TFDV "
        "anomaly type) as a warning instead of blocking; repeatable",
    )
    mysql = run.add_argument_group(
        "ML Metadata on MySQL/MariaDB (default: SQLite in the run directory)"
    )
    mysql.add_argument("--mysql-host", help="store ML Metadata on this server")
    mysql.add_argument("--mysql-port", type=int, metavar="PORT", help="default 3306")
    mysql.add_argument("--mysql-database", metavar="NAME")
    mysql.add_argument("--mysql-user", metavar="USER", help="password from MLMD_MYSQL_PASSWORD")
    run.set_defaults(func=cmd_run)

    pred = sub.add_parser("predict", help="score a CSV's rows with the pushed model")
    _add_config_flags(pred)
    pred.add_argument("csv", help="CSV with the raw feature columns (label optional)")
    pred.add_argument("-o", "--output", help="write rows + predictions to this CSV")
    pred.add_argument("--model", help="SavedModel dir (default: latest pushed model)")
    pred.set_defaults(func=cmd_predict)

    ver = sub.add_parser("verify", help="check every shard of Examples artifacts")
    _add_config_flags(ver)
    ver.add_argument("artifact_ids", nargs="*", type=int, help="artifact ids (default: all)")
    ver.add_argument("--json", action="store_true")
    ver.set_defaults(func=cmd_verify)

    from tfxp.dataset_init import register as register_init

    register_init(sub)
    from pipeline.data_cli import register as register_data

    register_data(sub)
    from pipeline.lineage_cli import register as register_lineage

    register_lineage(sub)
    from pipeline.report_cli import register as register_report

    register_report(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # TensorFlow's C++ and Google's deprecation chatter would bury our output.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.filterwarnings("ignore", category=FutureWarning)
    args = build_parser().parse_args(argv)
    return args.func(args)


def exit_now(code: int) -> None:
    """Exits without interpreter teardown.

    Everything is written and ML Metadata is closed by now; tearing down
    TensorFlow's and Beam's threads and objects would add ~4 s and print
    harmless "Exception ignored" noise from TensorFlow's finalizers.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def guarded_main(argv: Sequence[str] | None = None) -> int:
    """main() whose every outcome becomes an exit code for `exit_now`.

    tensorflow-io's S3 plugin aborts the interpreter at teardown ("pure virtual
    method called", exit status 134) even after a successful run, so no path of
    ours may reach normal interpreter exit once it is loaded: success exits 0,
    failure 1 (130 on Ctrl-C), both through os._exit.
    """
    try:
        return main(argv)
    except SystemExit as e:  # argparse: --help (0), usage errors (2)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BaseException:  # noqa: BLE001 - reported, then a failure exit code
        import traceback

        traceback.print_exc()
        return 1


if __name__ == "__main__":
    exit_now(guarded_main())


def console_main() -> None:
    """Entry point of the `tfxp` console script."""
    exit_now(guarded_main())
