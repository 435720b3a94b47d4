"""The `tfxp` command: one module per command group, flags shared through `common`.

`tfxp run` runs the whole pipeline (`train` retrains on N local workers);
`predict`, `verify`, `data`, `runs`, `lineage`, `report` and `schema`
inspect and feed it; `infer` scores a span with the blessed model (recorded in
ML Metadata); `watch` runs it on each new span, `models` names the
pushed versions (promote, rollback); `serve` serves them online
(TF Serving's REST and gRPC APIs); `ui` serves the console (a web page over
the same store); `beam workers` serves Beam SDK workers for
`run --beam portable`; `engine` starts a Spark cluster for `run --beam spark`.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

from runtime.access import owner_only_umask
from tfxp.cli import (
    beam,
    data,
    engine,
    infer,
    init,
    lineage,
    models,
    predict,
    report,
    run,
    runs,
    schema,
    serve,
    tensorboard,
    train,
    ui,
    verify,
    watch,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfxp", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    for command in (
        init,
        run,
        train,
        predict,
        infer,
        verify,
        data,
        runs,
        lineage,
        report,
        schema,
        models,
        watch,
        ui,
        tensorboard,
        serve,
        beam,
        engine,
    ):
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # TensorFlow's C++ and Google's deprecation chatter would bury our output.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.filterwarnings("ignore", category=FutureWarning)
    args = build_parser().parse_args(argv)
    # Logs, reports, model cards and predictions hold data: owner-only unless the
    # user chose a umask (runtime/access.py says how).
    owner_only_umask()
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


def console_main() -> None:
    """Entry point of the `tfxp` console script."""
    exit_now(guarded_main())
