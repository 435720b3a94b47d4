"""Runs the pipeline under LocalDagRunner with progress, a log file and a summary."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any

from pipeline.beam import BeamOptions
from pipeline.config import PipelineConfig
from pipeline.node_ids import VALIDATION_GATE
from pipeline.plan import RunPlan
from pipeline.run_id import new_run_id
from runtime import alerts
from tfxp.local import notify
from tfxp.local.process import logging_to, program_name_only_argv, worker_output_to
from tfxp.local.progress import Printer, ProgressHandler, interrupts, was_interrupted
from tfxp.local.run_guard import StoreRefused, run_lock, unless_a_run_holds
from tfxp.local.warm_workers import warm_workers
from tfxp.preflight import PreflightError, check_locations, preflight


class PipelineRunError(RuntimeError):
    """A run failed; the message says which component, why, and where the log is."""

    def __init__(self, message: str, component: str | None = None) -> None:
        super().__init__(message)
        self.component = component
        self.run_id: str | None = None


class RunInterruptedError(PipelineRunError):
    """Ctrl-C stopped the run; completed components are cached."""


class ValidationBlockedError(PipelineRunError):
    """The validation gate stopped the run; the message shows the findings as a table.

    `record`: the gate's own text, a line per finding (what ML Metadata keeps and
    alerts send)."""

    def __init__(self, message: str, component: str | None = None, record: str = "") -> None:
        super().__init__(message, component)
        self.record = record or message


def quiet_third_party() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=UserWarning)


def plan_local_run(
    config: PipelineConfig,
    beam: BeamOptions | None = None,
    *,
    run_id: str | None = None,
    local_dirs: bool = True,
    sqlite_store: bool = True,
    alert_failures: bool = True,
) -> RunPlan:
    """The pre-run check of a local run, which plans it (tfxp/preflight.py); a failure
    is a PipelineRunError from "the pre-run check", alerted unless `alert_failures` is
    False (a watcher that will retry)."""
    try:
        plan = preflight(config, beam, local_dirs=False)
        if local_dirs:
            _check_locations(plan.config, sqlite_store)
        return plan
    except PreflightError as e:
        raise _check_failed(config, run_id, e, alert_failures) from None


def _check_locations(config: PipelineConfig, sqlite_store: bool) -> None:
    """check_locations; the SQLite store only while no run holds the run lock. A run
    in progress may be creating it (0 bytes for a moment): then it is checked once
    this run holds the lock (run_guard.run_lock)."""
    with unless_a_run_holds(config) as idle:
        check_locations(config, check_sqlite_store_file=sqlite_store and idle)


def _check_failed(
    config: PipelineConfig, run_id: str | None, e: PreflightError, alert: bool
) -> PipelineRunError:
    """The pre-run check's failure as the run's error, alerted when `alert`."""
    error = PipelineRunError(str(e), "the pre-run check")
    error.run_id = run_id
    send = notify.notifier(config, None)  # no run log yet: undelivered goes to stderr
    if send and alert:
        # Before the run has an id (its config was refused), the alert says so.
        send.send(
            alerts.failed(config.pipeline_name, run_id or "(not started)", error.component, str(e))
        )
    return error


def run_local(
    run: PipelineConfig | RunPlan,
    *,
    run_id: str | None = None,
    from_nodes: Sequence[str] = (),
    to_nodes: Sequence[str] = (),
    printer: Printer = print,
    verbose: bool = False,
    metadata_connection_config: Any | None = None,
    warm_beam_workers: bool = True,
    alert_failures: bool = True,
):
    """Runs a plan (`plan_local_run`) with LocalDagRunner; returns a RunSummary.

    Given a config, the run is planned here first (its own Beam arguments).
    `metadata_connection_config` selects another ML Metadata store (e.g.
    MySQL/MariaDB); by default SQLite at `config.metadata_path`.
    `warm_beam_workers`: multi-process Beam forks its SDK workers from one
    process that imported their libraries (tfxp/local/warm_workers.py).
    Raises PipelineRunError naming the failed component and the log file
    (its `run_id` set). Webhook alerts (runtime/alerts.py) go out when the run
    is blocked, fails (unless `alert_failures` is False: a watcher that will
    retry), pushes a model, or a component refuses the model.
    """
    sqlite = metadata_connection_config is None
    quiet_third_party()
    run_id = run_id or new_run_id()
    if isinstance(run, RunPlan):
        plan = run
        # Planned already: only this machine's directories are left to check.
        try:
            _check_locations(plan.config, sqlite)
        except PreflightError as e:
            raise _check_failed(plan.config, run_id, e, alert_failures) from None
    else:
        plan = plan_local_run(
            run, run_id=run_id, sqlite_store=sqlite, alert_failures=alert_failures
        )
    config = plan.config

    from runtime import beam_speedups

    beam_speedups.install()

    os.makedirs(config.log_dir, exist_ok=True)
    log_path = os.path.join(config.log_dir, f"{run_id}.log")
    # First: the workers' zygote imports while the pipeline compiles and ingests;
    # a partial run (e.g. ExampleGen alone) may start no workers, so it waits for one.
    partial = bool(from_nodes or to_nodes)
    # Alerts go out from here, around the run: no component waits on the network.
    send = notify.notifier(config, log_path)
    try:
        with (
            warm_workers(config.beam_args, log_path, warm_beam_workers, start_now=not partial),
            _serving_check_child(config, partial),
        ):
            return _run(
                plan,
                run_id,
                log_path,
                (from_nodes, to_nodes),
                (printer, verbose, send),
                metadata_connection_config,
            )
    except RunInterruptedError as e:
        e.run_id = run_id
        raise  # someone is at the terminal: nobody needs telling
    except ValidationBlockedError as e:
        e.run_id = run_id
        if send:
            label = notify.span_label(config)
            send.send(alerts.blocked(config.pipeline_name, run_id, label, e.record))
        raise
    except PipelineRunError as e:
        e.run_id = run_id
        if send and alert_failures:
            send.send(alerts.failed(config.pipeline_name, run_id, e.component, str(e)))
        raise


def _serving_check_child(
    config: PipelineConfig, partial: bool
) -> contextlib.AbstractContextManager:
    """A whole run that ends in a serving check starts its fresh process now: its
    TensorFlow import then runs beside this process's start-up, not after the Evaluator."""
    if partial or not config.serving_check_rows:
        return contextlib.nullcontext()
    from components.release.serving_check.check import child_started_early

    return child_started_early()


def _run(
    plan: RunPlan,
    run_id: str,
    log_path: str,
    partial: tuple[Sequence[str], Sequence[str]],
    output: tuple[Printer, bool, alerts.Notifier | None],
    metadata_connection_config: Any | None,
):
    """run_local's run once the run id and log are set: compile, execute, summarize."""
    from tfx.orchestration import metadata

    from metadata.summary import summarize_run

    printer, verbose, send = output
    config = plan.config
    ir, run_options = _compiled(plan, run_id, *partial, metadata_connection_config)
    progress = ProgressHandler(len(ir.nodes), printer)
    with logging_to(log_path, progress, verbose):
        printer(f"run {run_id}: pipeline '{config.pipeline_name}', data {config.data_root}")
        if config.data_version:
            printer(
                f"  data version {config.data_version}: span {config.span}, "
                f"sha256 {config.data_sha256}"
            )
        printer(f"  log: {log_path}")
        started = time.perf_counter()
        with worker_output_to(log_path, config.beam_args, verbose):
            _execute(
                config,
                run_id,
                ir,
                run_options,
                (progress, printer),
                log_path,
                metadata_connection_config,
            )
        wall = time.perf_counter() - started
        connection = metadata_connection_config or metadata.sqlite_metadata_connection_config(
            config.metadata_path
        )
        with metadata.Metadata(connection) as m:
            summary = summarize_run(m.store, config, run_id, wall_seconds=wall, log_path=log_path)
            _gate_outcome(m.store, config, summary, printer)
            if not partial[0] and not partial[1]:
                notify.finish(m.store, config, summary, send, printer)
            return summary


def _compiled(plan: RunPlan, run_id, from_nodes, to_nodes, metadata_connection_config):
    """(the pipeline's IR stamped with `run_id`, the partial-run options or None)."""
    from tfx.dsl.compiler import compiler
    from tfx.orchestration.portable import runtime_parameter_utils
    from tfx.proto.orchestration import pipeline_pb2

    from pipeline.definition import create_pipeline

    ir = compiler.Compiler().compile(
        create_pipeline(plan, metadata_connection_config=metadata_connection_config)
    )
    # LocalDagRunner stamps runs with datetime.now(); substituting our own id
    # first lets the summary find this run's executions in ML Metadata.
    runtime_parameter_utils.substitute_runtime_parameter(ir, {"pipeline-run-id": run_id})
    run_options = None
    if from_nodes or to_nodes:
        run_options = pipeline_pb2.RunOptions()
        run_options.partial_run.from_nodes.extend(from_nodes)
        run_options.partial_run.to_nodes.extend(to_nodes)
        run_options.partial_run.snapshot_settings.latest_pipeline_run_strategy.SetInParent()
    return ir, run_options


def _execute(config, run_id, ir, run_options, reporting, log_path, connection_config) -> None:
    """LocalDagRunner on `ir`; a failure becomes PipelineRunError naming the component."""
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    progress, printer = reporting
    try:
        # A server-backed store (MySQL) takes concurrent runs; SQLite does not.
        sqlite = connection_config is None
        lock = run_lock(config, run_id, printer) if sqlite else contextlib.nullcontext()
        with lock, interrupts(progress), program_name_only_argv():
            LocalDagRunner().run_with_ir(ir, run_options=run_options)
    except StoreRefused as e:  # the store, checked once the lock is held
        raise PipelineRunError(str(e), "the pre-run check") from None
    except (KeyboardInterrupt, Exception) as e:
        if was_interrupted(progress, e):
            where = progress.interrupted_during or progress.current or "start-up"
            raise RunInterruptedError(
                f"run {run_id} interrupted during {where}; completed "
                "components are cached, so rerunning the same command resumes from there.",
                where,
            ) from None
        raise _failure(e, config, run_id, progress.current, log_path, connection_config) from e


def _failure(
    e: BaseException,
    config: PipelineConfig,
    run_id: str,
    current: str | None,
    log_path: str,
    connection_config: Any | None,
) -> PipelineRunError:
    """The error a failed run raises: the gate's block as its table, else the
    component and the innermost cause (with what is corrupt, when input is)."""
    failed = current or "the pipeline"
    cause = _root_cause(e)
    if failed == VALIDATION_GATE and cause.startswith("validation gate blocked"):
        _record_block(config, run_id, cause, connection_config)
        shown = blocked_summary(config, run_id, cause)
        return ValidationBlockedError(
            f"{shown}\n  full log: {log_path}",
            failed,
            record=f"{cause}\n  full log: {log_path}",
        )
    corrupt = _diagnose_corrupt_input(config, run_id, cause, connection_config)
    return PipelineRunError(f"{failed} failed: {cause}{corrupt}\n  full log: {log_path}", failed)


def blocked_summary(config: PipelineConfig, run_id: str, cause: str, width: int = 0) -> str:
    """The gate's block for the terminal: its findings as a table cut to the terminal's
    width, from the findings JSON the gate wrote beside its report; `cause` (a line
    per finding) when that file is missing."""
    from tfxp.presentation.gate_table import read_result, render_text

    report = os.path.join(config.report_dir, f"{run_id}.html") if config.report_dir else ""
    result = read_result(report[: -len(".html")] + ".json" if report else None)
    if result is None:
        return cause
    width = width or shutil.get_terminal_size(fallback=(120, 24)).columns
    report_line = f"\n  report: {report}" if os.path.isfile(report) else ""
    return render_text(result, width) + report_line


def _record_block(
    config: PipelineConfig, run_id: str, message: str, connection_config: Any | None
) -> None:
    from tfx.orchestration import metadata

    from metadata.gate_report import record_block

    connection = connection_config or metadata.sqlite_metadata_connection_config(
        config.metadata_path
    )
    try:
        with metadata.Metadata(connection) as m:
            record_block(m.store, config, run_id, message)
    except Exception as e:  # noqa: BLE001 - recording must never hide the block itself
        logging.warning("could not record the gate's block in ML Metadata: %s", e)


def _gate_outcome(store, config: PipelineConfig, summary, printer: Printer) -> None:
    """The gate's decision and report on the summary; warnings printed."""
    from metadata.gate_report import finish_report

    try:
        outcome = finish_report(store, config, summary.run_id)
    except Exception as e:  # noqa: BLE001 - the run itself succeeded; say what is missing, don't fail it
        printer(f"(could not read the validation gate's result: {e})")
        return
    summary.validation = outcome.decision
    summary.report_path = outcome.report
    if not outcome.warnings or outcome.result is None:  # no result: no gate, no warnings
        return
    from tfxp.presentation.gate_table import render_text

    # The same table as a block's, cut to the terminal's width.
    printer(render_text(outcome.result, shutil.get_terminal_size(fallback=(120, 24)).columns))


# Words TensorFlow, zlib and Beam use when a record file is damaged.
_CORRUPTION_HINTS = (
    "decompress",
    "corrupted record",
    "data loss",
    "dataloss",
    "truncated",
    "crc",
    "incorrect header check",
    "zlib",
    "unexpected end",
    "not a valid tfrecord",
)


def _diagnose_corrupt_input(
    config: PipelineConfig, run_id: str, cause: str, connection_config: Any | None = None
) -> str:
    """Names the corrupt shard(s) behind a data-loss error, or returns ''."""
    if not any(hint in cause.lower() for hint in _CORRUPTION_HINTS):
        return ""
    try:
        from tfx.orchestration import metadata

        from metadata.examples import failed_execution_examples, recorded_counts
        from tfxp.storage.verify import verify_artifact

        connection = connection_config or metadata.sqlite_metadata_connection_config(
            config.metadata_path
        )
        with metadata.Metadata(connection) as m:
            lines = [
                f"Examples artifact {art.id}, shard {shard.path}: {shard.error}"
                for art in failed_execution_examples(m.store, run_id)
                for shard in verify_artifact(
                    art.id, art.uri, recorded_counts(m.store, art.id)
                ).bad_shards
            ]
    except Exception as e:  # noqa: BLE001 - the diagnosis must never hide the original error
        return f"\n  (could not check the input shards: {e})"
    if not lines:
        return ""
    return (
        "\n  corrupt input: "
        + "\n  corrupt input: ".join(lines)
        + "\n  `tfxp verify` checks every shard; rerun with --no-cache from the producing"
        " component (or restore the file) to regenerate it"
    )


def _root_cause(e: BaseException) -> str:
    """The innermost exception's message: Beam wraps user errors several times."""
    seen = set()
    inner = e.__cause__ or e.__context__
    while inner is not None and id(e) not in seen:
        seen.add(id(e))
        e, inner = inner, inner.__cause__ or inner.__context__
    text = str(e).strip()
    # Beam appends "[while running '...']" tails; keep the user's message.
    return text.split(" [while running")[0] if text else type(e).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use local_runner.py or `tfxp run`")
