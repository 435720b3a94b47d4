"""The validation gate: nothing trains on data that failed the schema, drift or skew checks.

Stock TFX 1.16 validates statistics against the schema only (ExampleValidator)
and blocks nothing. This component runs after StatisticsGen with

  statistics           this run's span, per split
  schema               the curated schema (environments TRAINING/SERVING)
  baseline_statistics  the previous span's statistics, resolved from ML Metadata
                       by components/resolvers/previous_span_statistics.py (empty for the first span)

and reads the serving requests itself (components/validation/serving_data.py):
the latest window of the request log `tfxp serve` writes when there is one,
else the static serving CSV files (without the label). It writes a
findings file and a self-contained HTML report, then either publishes its
`result` (decision PASS or WARN, recorded as custom properties in ML Metadata)
or, when an anomaly blocks, raises `GateBlockedError`: the execution is
recorded FAILED, and since Transform is wired to run after the gate, nothing
downstream runs on every orchestrator (Local, Airflow, Kubeflow).

The report is written to the artifact (when published) and to
`report_dir/<pipeline run id>.html` (always, blocked runs included).
"""

from __future__ import annotations

import json
import os
from typing import Any

from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx import types
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, component_spec, standard_artifacts
from tfx.types.system_artifacts import Statistics as StatisticsSystemType
from tfx.utils import io_utils

from components.base import component
from components.base.custom_properties import custom_int, custom_str
from components.io.log_policy import Applier, LogPolicy
from components.io.native_stderr import native_stderr_to_log
from components.validation.checks import evaluate, split_statistics
from components.validation.findings import BLOCK, GateResult
from components.validation.hashed_columns import skew_view
from components.validation.serving_data import load_serving_data
from components.validation.serving_log import WindowOptions, published_files
from components.validation.settings import ValidationSettings

STATISTICS_KEY = "statistics"
SCHEMA_KEY = "schema"
BASELINE_KEY = "baseline_statistics"
RESULT_KEY = "result"
EXAMPLES_KEY = "examples"
BASELINE_EXAMPLES_KEY = "baseline_examples"
# ExampleGen records a drop's span as a custom property (the `span` property stays 0).
SPAN_PROPERTY = "span"
FINDINGS_FILE = "findings.json"
REPORT_FILE = "report.html"


class GateBlockedError(RuntimeError):
    """The gate found blocking anomalies; the message lists each one."""


class ValidationResult(types.Artifact):
    """The gate's decision; custom properties `decision`, `blocking`, `warnings`, `report`."""

    # "namespace.Name": the form KFP v2 accepts for custom artifact types.
    TYPE_NAME = "tfxp.ValidationResult"
    TYPE_ANNOTATION = StatisticsSystemType


# ---------------------------------------------------------------------------
# The component


class ValidationGateSpec(component_spec.ComponentSpec):
    PARAMETERS = {
        # ValidationSettings as JSON: thresholds and warn_only (part of the cache key).
        "settings": component_spec.ExecutionParameter(type=str),
        # Glob of serving CSV files ("" = the dataset has none) and their content hash (cache key).
        "serving_data": component_spec.ExecutionParameter(type=str),
        "serving_sha256": component_spec.ExecutionParameter(type=str),
        # The request-log folder ("" = none) and its window (WindowOptions JSON): when
        # the folder holds published files, skew is checked on them instead.
        "serving_log": component_spec.ExecutionParameter(type=str, optional=True),
        "serving_log_window": component_spec.ExecutionParameter(type=str, optional=True),
        # The dataset's request_log: policy (LogPolicy JSON, "" = none): how logged
        # columns were written, and the fingerprint every log file must carry.
        "log_policy": component_spec.ExecutionParameter(type=str, optional=True),
        # Where `<run id>.html` and `<run id>.json` go, blocked runs included.
        "report_dir": component_spec.ExecutionParameter(type=str),
    }
    INPUTS = {
        STATISTICS_KEY: component_spec.ChannelParameter(type=standard_artifacts.ExampleStatistics),
        SCHEMA_KEY: component_spec.ChannelParameter(type=standard_artifacts.Schema),
        BASELINE_KEY: component_spec.ChannelParameter(
            type=standard_artifacts.ExampleStatistics, optional=True
        ),
        # Only their span numbers are read, for the findings and the report.
        EXAMPLES_KEY: component_spec.ChannelParameter(
            type=standard_artifacts.Examples, optional=True
        ),
        BASELINE_EXAMPLES_KEY: component_spec.ChannelParameter(
            type=standard_artifacts.Examples, optional=True
        ),
    }
    OUTPUTS = {RESULT_KEY: component_spec.ChannelParameter(type=ValidationResult)}


def load_statistics(
    artifact: types.Artifact,
) -> dict[str, statistics_pb2.DatasetFeatureStatisticsList]:
    from tfx.components.statistics_gen import stats_artifact_utils

    out = {}
    for split in artifact_utils.decode_split_names(artifact.split_names):
        view = stats_artifact_utils.load_statistics(artifact, split)
        out[split] = split_statistics(view.proto(), split)
    return out


def _longest_cells(artifacts: list[types.Artifact] | None) -> dict[str, int]:
    """BYTES column -> characters of its longest cell, as CsvExampleGen recorded them."""
    from components.example_gen.csv_options import LONGEST_CELLS

    longest: dict[str, int] = {}
    for a in artifacts or []:
        raw = custom_str(a, LONGEST_CELLS)
        for name, n in (json.loads(raw) if raw else {}).items():
            longest[name] = max(longest.get(name, 0), int(n))
    return longest


def _span(artifacts: list[types.Artifact] | None) -> int | None:
    found = [custom_int(a, SPAN_PROPERTY) for a in artifacts or []]
    spans = [s for s in found if s is not None]
    return max(spans) if spans else None


def _write_atomic(path: str, data: str) -> None:
    fileio.makedirs(os.path.dirname(path))
    tmp = f"{path}.tmp-{os.getpid()}"
    with fileio.open(tmp, "w") as f:
        f.write(data)
    fileio.rename(tmp, path, overwrite=True)


def _check(
    input_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
    settings: ValidationSettings,
) -> tuple[
    GateResult,
    dict[str, statistics_pb2.DatasetFeatureStatisticsList],
    dict[str, statistics_pb2.DatasetFeatureStatisticsList] | None,
    statistics_pb2.DatasetFeatureStatisticsList | None,
]:
    """Runs every TFDV check of the gate: (result, current, baseline, serving statistics)."""
    stats_artifact = artifact_utils.get_single_instance(input_dict[STATISTICS_KEY])
    schema = io_utils.SchemaReader().read(
        io_utils.get_only_uri_in_dir(artifact_utils.get_single_uri(input_dict[SCHEMA_KEY]))
    )
    current = load_statistics(stats_artifact)
    baselines = list(input_dict.get(BASELINE_KEY) or [])
    baseline_artifact = baselines[0] if baselines else None
    baseline = load_statistics(baseline_artifact) if baseline_artifact else None
    log_dir = exec_properties.get("serving_log") or ""
    policy = LogPolicy.from_json(exec_properties.get("log_policy") or "")
    # The policy's key is needed only to read a log it hashed: loaded when there is one.
    applier = Applier(policy) if policy is not None and published_files(log_dir) else None
    serving = load_serving_data(
        schema,
        exec_properties.get("serving_data") or "",
        log_dir,
        WindowOptions.from_json(exec_properties.get("serving_log_window") or ""),
        policy=applier,
    )
    policy_notes: list[str] = []
    view = skew_view(applier, policy_notes) if applier and serving.window else None
    image_found, image_notes = _image_findings(current, baseline, settings, input_dict)
    sequence_found, sequence_notes = _sequence_findings(
        current, baseline, serving.statistics, input_dict, serving.source
    )
    with native_stderr_to_log("TFDV"):
        result = evaluate(
            current,
            schema,
            settings,
            baseline=baseline,
            serving=serving.statistics,
            current_span=_span(input_dict.get(EXAMPLES_KEY)),
            baseline_span=_span(input_dict.get(BASELINE_EXAMPLES_KEY)),
            serving_rows=serving.rows,
            serving_source=serving.source,
            no_serving=serving.missing,
            longest_cells=_longest_cells(input_dict.get(EXAMPLES_KEY)),
            extra_findings=_table_findings(
                current, serving.statistics, settings, input_dict, serving.source
            )
            + image_found
            + sequence_found,
            skew_view=view,
        )
    result.notes.extend(image_notes + policy_notes + sequence_notes)
    return result, current, baseline, serving.statistics


def _table_findings(current, serving, settings, input_dict, serving_source: str) -> list:
    """Date formats changed in this span; ids constant at serving (table_checks.py)."""
    from components.validation import table_checks
    from components.validation.findings import COMPARED_SPLIT

    compared = current.get(COMPARED_SPLIT) or next(iter(current.values()))
    span = _span(input_dict.get(EXAMPLES_KEY))
    where = f"span {span}, {COMPARED_SPLIT} split"
    found = table_checks.date_format_findings(compared, settings.date_formats, where)
    if serving is not None:
        where = f"{COMPARED_SPLIT} split vs {serving_source}"
        found += table_checks.constant_id_findings(compared, serving, where)
    return found


def _image_findings(current, baseline, settings, input_dict) -> tuple[list, list[str]]:
    """Image datasets: size, colour, format and byte-length drift (image_checks.py)."""
    from components.validation import image_checks

    return image_checks.gate_findings(
        current,
        baseline,
        current_span=_span(input_dict.get(EXAMPLES_KEY)),
        baseline_span=_span(input_dict.get(BASELINE_EXAMPLES_KEY)),
        limits=settings.images,
    )


def _sequence_findings(current, baseline, serving, input_dict, serving_source: str):
    """Sequence datasets: sequences shortened since the previous span or at serving
    (sequence_checks.py); nothing for data without feature lists."""
    from components.validation import sequence_checks

    return sequence_checks.gate_findings(
        current,
        baseline,
        serving,
        current_span=_span(input_dict.get(EXAMPLES_KEY)),
        baseline_span=_span(input_dict.get(BASELINE_EXAMPLES_KEY)),
        serving_source=serving_source,
    )


def _publish(
    out: types.Artifact, result: GateResult, findings: str, html: str, report_path: str
) -> None:
    """Writes the findings and report into the output artifact and records the decision on it."""
    _write_atomic(os.path.join(out.uri, FINDINGS_FILE), findings)
    _write_atomic(os.path.join(out.uri, REPORT_FILE), html)
    out.set_string_custom_property("decision", result.decision)
    out.set_int_custom_property("blocking", len(result.blocking))
    out.set_int_custom_property("warnings", len(result.warnings))
    out.set_string_custom_property("report", report_path)
    out.set_string_custom_property(
        "findings", "\n".join(f.line() for f in result.findings) or "none"
    )
    out.set_string_custom_property("notes", "\n".join(result.notes))


class ValidationGateExecutor(component.Executor):
    def run(self, execution: component.Execution) -> None:
        from components.validation.html_report import render_report

        exec_properties = execution.properties
        settings = ValidationSettings.from_json(exec_properties["settings"])
        result, current, baseline, serving = _check(execution.inputs, exec_properties, settings)
        out = execution.output(RESULT_KEY)
        run_id, pipeline = self._run_names(out)
        html = render_report(
            result,
            current=current,
            baseline=baseline,
            serving=serving,
            settings=settings,
            title=f"{pipeline or 'pipeline'} run {run_id}",
        )
        findings = json.dumps(result.to_dict(), indent=2, sort_keys=True)
        report_dir = exec_properties.get("report_dir") or ""
        report_path = ""
        if report_dir:
            report_path = os.path.join(report_dir, f"{run_id}.html")
            _write_atomic(os.path.join(report_dir, f"{run_id}.json"), findings)
            _write_atomic(report_path, html)
        if result.decision == BLOCK:
            # Raising (not returning an error code) fails the step on every
            # orchestrator, so Transform and the Trainer never start.
            raise GateBlockedError(
                result.message() + (f"\n  report: {report_path}" if report_path else "")
            )
        _publish(out, result, findings, html, report_path)

    def _run_names(self, out: types.Artifact) -> tuple[str, str]:
        """(run id, pipeline name) that name the report."""
        # Reports are named by the pipeline run; orchestrators that give the
        # executor no run id (TFX's legacy Airflow launcher) get the output's folder name.
        run_id = (self._context.pipeline_run_id if self._context else None) or (
            "execution-" + os.path.basename(os.path.normpath(out.uri))
        )
        pipeline = ""
        if self._context and self._context.pipeline_info is not None:
            pipeline = self._context.pipeline_info.id
        return run_id, pipeline


class ValidationGate(component.Component):
    """Blocks the run (raises) when this span's data fails the schema, drift or skew checks."""

    SPEC_CLASS = ValidationGateSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(ValidationGateExecutor)
    DEFAULTS = {
        "serving_data": "",
        "serving_sha256": "",
        "serving_log": "",
        "serving_log_window": None,
        "log_policy": "",
        "report_dir": "",
    }
    ENCODE = {
        "settings": ValidationSettings.to_json,
        "serving_log_window": lambda window: (window or WindowOptions()).to_json(),
    }


def load_result(artifact_uri: str) -> GateResult:
    with fileio.open(os.path.join(artifact_uri, FINDINGS_FILE)) as f:
        return GateResult.from_dict(json.load(f))
