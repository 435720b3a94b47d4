"""Validation reports, gate outcomes and schema proposals, found through ML Metadata.

The gate (components/validation/gate.py) writes `<run dir>/reports/<run id>.html`
whenever it executes. A run whose gate was cached gets a copy of the report of
the execution it reused, so every run that reached the gate has a report.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

from ml_metadata.proto import metadata_store_pb2
from tfx.dsl.io import fileio

from components.validation.findings import GateResult
from metadata.properties import output_artifacts
from pipeline.config import PipelineConfig
from pipeline.node_ids import STATISTICS_GEN, VALIDATION_GATE


class ReportError(ValueError):
    """No such report/statistics; the message says what to run."""


# Reports live wherever the run dir is: a local folder or a bucket (s3://, gs://),
# so every access goes through TFX's filesystem layer, not pathlib.


def report_path(config: PipelineConfig, run_id: str) -> str:
    return os.path.join(config.report_dir, f"{run_id}.html")


def find_report(config: PipelineConfig, run_id: str | None = None) -> str:
    """The report of `run_id`, or the newest one."""
    folder = config.report_dir
    if run_id:
        path = report_path(config, run_id)
        if not fileio.exists(path):
            raise ReportError(
                f"no validation report for run {run_id} in {folder}; `tfxp runs list` shows "
                "the runs (only runs that reached the ValidationGate have one)"
            )
        return path
    reports = (
        sorted(fileio.glob(os.path.join(folder, "*.html")), key=lambda p: fileio.stat(p).mtime_nsec)
        if fileio.isdir(folder)
        else []
    )
    if not reports:
        raise ReportError(f"no validation report in {folder}; run the pipeline first (`tfxp run`)")
    return reports[-1]


def _node_executions(store, run_id: str, pipeline_name: str, node: str):
    ctx = store.get_context_by_type_and_name("pipeline_run", run_id)
    if ctx is None:
        return []
    found = []
    for ex in store.get_executions_by_context(ctx.id):
        names = {c.name for c in store.get_contexts_by_execution(ex.id)}
        if f"{pipeline_name}.{node}" in names:
            found.append(ex)
    return sorted(found, key=lambda e: e.id)


def gate_artifact(store, config: PipelineConfig, run_id: str):
    """The ValidationResult artifact this run used (its own, or a cached one), or None."""
    for ex in reversed(_node_executions(store, run_id, config.pipeline_name, VALIDATION_GATE)):
        for a in output_artifacts(store, ex.id):
            return a
    return None


@dataclass
class GateOutcome:
    decision: str | None  # PASS, WARN, BLOCK, or None when the run never reached the gate
    report: str | None
    warnings: list[str]
    result: GateResult | None = None  # the whole result, for the terminal's table


def finish_report(store, config: PipelineConfig, run_id: str) -> GateOutcome:
    """After a successful run: the gate's decision, its warnings, and this run's report."""
    from components.validation.gate import FINDINGS_FILE, REPORT_FILE, load_result

    artifact = gate_artifact(store, config, run_id)
    if artifact is None:
        return GateOutcome(None, None, [])
    path = report_path(config, run_id)
    findings = path[: -len(".html")] + ".json"
    for name, target in ((FINDINGS_FILE, findings), (REPORT_FILE, path)):
        source = os.path.join(artifact.uri, name)
        if not fileio.exists(target) and fileio.exists(source):
            # The gate was cached: this run's report is the reused execution's.
            fileio.makedirs(os.path.dirname(target))
            tmp = target + ".tmp"
            fileio.copy(source, tmp, overwrite=True)
            fileio.rename(tmp, target, overwrite=True)
    result = load_result(artifact.uri)
    return GateOutcome(
        result.decision,
        path if fileio.exists(path) else None,
        [f.line() for f in result.warnings],
        result,
    )


def record_block(store, config: PipelineConfig, run_id: str, message: str) -> None:
    """Marks the failed gate execution in ML Metadata with its decision and findings.

    The executor raised, so TFX published no output artifact; the execution
    itself (state FAILED) then carries why, for lineage queries.
    """
    executions = _node_executions(store, run_id, config.pipeline_name, VALIDATION_GATE)
    failed = [e for e in executions if e.last_known_state == metadata_store_pb2.Execution.FAILED]
    if not failed:
        return
    ex = failed[-1]
    ex.custom_properties["gate_decision"].string_value = "BLOCK"
    ex.custom_properties["gate_findings"].string_value = message
    path = report_path(config, run_id)
    if fileio.exists(path):
        ex.custom_properties["gate_report"].string_value = path
    store.put_executions([ex])


# ---------------------------------------------------------------------------
# Schema proposal


@dataclass
class SchemaProposal:
    statistics_uri: str
    span: int | None
    proposal_path: str
    diff: str  # unified diff, curated -> proposed ("" when they agree)


def latest_statistics(store, config: PipelineConfig):
    """The newest StatisticsGen output computed from this config's data folder."""
    from components.resolvers.previous_span_statistics import statistics_sources

    candidates = sorted(store.get_artifacts_by_type("ExampleStatistics"), key=lambda a: a.id)
    live = [a for a in candidates if a.state == metadata_store_pb2.Artifact.LIVE]
    sources = statistics_sources(store, [a.id for a in live])
    examples = {e.id: e for e in store.get_artifacts_by_id(sorted(set(sources.values())))}
    for a in reversed(live):
        source = examples.get(sources.get(a.id, -1))
        base = source.custom_properties.get("input_base") if source is not None else None
        if base is None or base.string_value == config.data_root:
            span = source.custom_properties.get("span") if source is not None else None
            return a, (span.int_value if span is not None else None)
    return None, None


def propose_schema(store, config: PipelineConfig, out_path: str | None = None) -> SchemaProposal:
    """Updates a copy of the curated schema from the latest statistics; never touches the curated file."""
    import tensorflow_data_validation as tfdv
    from google.protobuf import text_format

    from components.validation.schema_importer import load_schema

    artifact, span = latest_statistics(store, config)
    if artifact is None:
        raise ReportError(
            f"no statistics for {config.data_root} in ML Metadata; run the pipeline first "
            f"(`tfxp run --to-node {STATISTICS_GEN}` is enough)"
        )
    stats_path = os.path.join(artifact.uri, "Split-train", "FeatureStats.pb")
    if not os.path.exists(stats_path):
        raise ReportError(f"statistics artifact {artifact.id} has no {stats_path}")
    stats = tfdv.load_stats_binary(stats_path)
    curated = load_schema(config.schema_file)
    proposed = tfdv.update_schema(curated, stats)
    before = text_format.MessageToString(curated).splitlines(keepends=True)
    after = text_format.MessageToString(proposed).splitlines(keepends=True)
    diff = "".join(
        difflib.unified_diff(
            before, after, fromfile=config.schema_file, tofile="proposed (latest statistics)"
        )
    )
    out_path = out_path or os.path.join(config.run_dir, "schema-proposal.pbtxt")
    if os.path.abspath(out_path) == os.path.abspath(config.schema_file):
        raise ReportError("the proposal must not overwrite the curated schema; choose another path")
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    with open(out_path, "w") as f:
        f.write(text_format.MessageToString(proposed))
    return SchemaProposal(artifact.uri, span, out_path, diff)
