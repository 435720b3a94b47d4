"""The skew check on live traffic: the latest span's statistics against the request log.

`tfxp watch --skew-every` calls `check_serving_skew` on a schedule, with no new
span and no pipeline run. It is the gate's own check (components/validation:
`load_serving_data` reads the log window, `evaluate` compares), fed with the
statistics StatisticsGen recorded for the newest span of this data folder (found
through ML Metadata) and the curated schema and thresholds. Only the skew
findings count here: the schema and drift checks of that span were the run's.

The result is published as `serving-skew.json` beside ML Metadata (the run
dir's local state folder; written, then renamed), where the console
(`tfxp ui`) reads the last one.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.config import PipelineConfig, serving_log_dir

RESULT_FILE = "serving-skew.json"
SKEWED, CLEAR, NO_LOG = "skew", "clear", "no-log"


class SkewCheckError(RuntimeError):
    """The check cannot run (no statistics yet, an unreadable log); the message says why."""


@dataclass
class SkewResult:
    state: str  # SKEWED, CLEAR or NO_LOG
    checked_at: str  # ISO 8601, UTC
    span: int | None
    statistics_uri: str
    log_dir: str
    window: dict[str, Any] | None = None  # components.validation.serving_log.Window.to_dict()
    described: str = ""  # the window in words (or why there is none)
    blocking: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    measurements: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SkewResult:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in raw.items() if k in known})


def _short(finding: Any) -> str:
    """A skew finding without its `where` (the window is said once, beside the list)."""
    if finding.measured is not None:
        return (
            f"{finding.feature}: {finding.measure} {finding.measured:.4g} {finding.op} "
            f"threshold {finding.threshold:g}"
        )
    return f"{finding.feature}: {finding.description}"


def check_serving_skew(config: PipelineConfig, store: Any, now: dt.datetime | None = None):
    """Runs the gate's skew check on the latest log window; a SkewResult (not yet recorded)."""
    from tfx.types import standard_artifacts

    from components.io.log_policy import Applier, LogPolicyError
    from components.io.native_stderr import native_stderr_to_log
    from components.validation.checks import evaluate
    from components.validation.findings import BLOCK, SKEW
    from components.validation.gate import load_statistics
    from components.validation.hashed_columns import skew_view
    from components.validation.schema_importer import load_schema
    from components.validation.serving_data import load_serving_data
    from components.validation.serving_log import ServingLogError
    from components.validation.settings import load_settings
    from metadata.gate_report import latest_statistics

    when = (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds")
    log_dir = serving_log_dir(config)
    if "://" in log_dir:  # a data root in a bucket: TensorFlow's file systems for it
        from tfxp.storage.storage import enable_filesystems

        enable_filesystems([log_dir])
    found, span = latest_statistics(store, config)
    if found is None:
        raise SkewCheckError(
            f"ML Metadata ({config.metadata_path}) holds no statistics of {config.data_root}: "
            "run the pipeline once (tfxp run) before checking skew on the serving log"
        )
    schema = load_schema(config.schema_file)
    try:
        # "" for the CSV: only logged traffic is checked here.
        applier = Applier(config.request_log) if config.request_log else None
        serving = load_serving_data(schema, "", log_dir, config.serving_log_window, applier)
    except (ServingLogError, LogPolicyError) as e:
        raise SkewCheckError(str(e)) from e
    result = SkewResult(NO_LOG, when, span, found.uri, log_dir)
    if serving.window is None:
        result.described = f"no served requests in {log_dir}"
        return result
    artifact = standard_artifacts.ExampleStatistics()
    artifact.set_mlmd_artifact(found)
    settings = load_settings(config.validation_file).with_warn_only(config.warn_only)
    # TFDV's C++ warnings (a line per feature absent from one side) stay off the terminal.
    with native_stderr_to_log("TFDV"):
        gate = evaluate(
            load_statistics(artifact),
            schema,
            settings,
            serving=serving.statistics,
            current_span=span,
            serving_rows=serving.rows,
            serving_source=serving.source,
            skew_view=skew_view(applier, []) if applier else None,
        )
    skew = [f for f in gate.findings if f.kind == SKEW]
    result.window = serving.window.to_dict()
    result.described = serving.source
    result.blocking = [_short(f) for f in skew if f.severity == BLOCK]
    result.warnings = [_short(f) for f in skew if f.severity != BLOCK]
    result.measurements = [asdict(m) for m in gate.measurements if m.kind == SKEW]
    result.state = SKEWED if result.blocking else CLEAR
    return result


def result_path(config: PipelineConfig) -> str:
    return os.path.join(config.local_dir, RESULT_FILE)


def record(config: PipelineConfig, result: SkewResult) -> str:
    """Publishes `result` as the last skew check (write, then rename)."""
    path = result_path(config)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), f".{RESULT_FILE}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(result.to_dict(), f, indent=2, sort_keys=True)
    os.replace(tmp, path)
    return path


def last_result(config: PipelineConfig) -> SkewResult | None:
    """The last recorded check, or None (never checked, or an unreadable file)."""
    return read_result(config.local_dir)


def read_result(state_dir: str) -> SkewResult | None:
    """The last check recorded in a run directory's local state folder, or None."""
    try:
        with open(os.path.join(state_dir, RESULT_FILE)) as f:
            return SkewResult.from_dict(json.load(f))
    except (OSError, ValueError, TypeError):
        return None
