"""`tfxp infer`: score a span with the blessed (or a named) model, recorded in ML Metadata.

    span   <inference data root>/span-<N>/*.csv (the dataset file's
           batch_inference.data_root, else the dataset's data root); the
           label column may be absent
    model  "blessed": the newest pushed model (every pushed model was blessed),
           or a pushed version number; found through ML Metadata, so the
           scoring's lineage names the Model artifact that trained it
    out    <run dir>/predictions/span-<N>-<run id>/ (or --output DIR), published
           whole by a rename (components/batch_inference/output.py)

The rows are scored as `tfxp predict` scores them (the same example building
and signature, components/batch_inference/serving.py), streamed in batches
(components/batch_inference/scoring.py); then one ML Metadata call records
the execution, its model and data inputs and the predictions artifact
(metadata/scorings.py).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from components.batch_inference import serving
from components.batch_inference.output import PredictionsWriter
from components.batch_inference.scoring import RowSpec, ScoringReport, score_files
from components.io.content_fingerprint import files_sha256
from components.io.log_policy import Applier
from components.validation.schema_importer import (
    load_schema,
    schema_column_types,
    schema_nan_free_columns,
)
from metadata.store import LineageError, StoreLocation, open_store
from pipeline.config import PipelineConfig
from pipeline.spans import SpanDir, SpanError, inference_span, list_spans

BLESSED = "blessed"


class InferError(RuntimeError):
    """The scoring cannot run as asked; the message says what to do."""


@dataclass
class InferResult:
    span: SpanDir
    model_id: int
    model_version: str | None
    model_dir: str
    output: str
    report: ScoringReport
    run_id: str
    execution_id: int
    predictions_id: int
    seconds: float
    dataset: str = ""

    def __str__(self) -> str:
        r = self.report
        lines = [
            f"scored {self.span.label} ({len(r.files)} file(s), {r.rows_read} rows) with model "
            f"#{self.model_id}"
            + (f" version {self.model_version}" if self.model_version else "")
            + f" in {self.seconds:.1f}s",
            f"  scoring  {r.rows_read / max(r.seconds, 1e-9):,.0f} rows/s "
            f"({r.seconds:.1f}s after loading the model)",
            f"  scored   {r.rows_scored} rows",
            f"  skipped  {r.rows_skipped} rows"
            + (" (listed in skipped_rows.csv)" if r.rows_skipped else ""),
        ]
        lines += [f"    {s}" for s in r.skipped]
        if r.rows_skipped > len(r.skipped):
            lines.append(f"    ... {r.rows_skipped - len(r.skipped)} more")
        lines += [
            f"predictions: {self.output}/predictions.csv"
            + (
                " and predictions.tfrecord.gz"
                if os.path.exists(os.path.join(self.output, "predictions.tfrecord.gz"))
                else " (one row per sequence)"
            ),
            f"recorded in ML Metadata: run {self.run_id}, predictions #{self.predictions_id} "
            f"(`tfxp lineage scored --dataset {self.dataset} --span {self.span.span}`)",
        ]
        return "\n".join(lines)


def find_span(config: PipelineConfig, span: int | None, version: int | None = None) -> SpanDir:
    """The span folder to score: `span` (its newest version, or `version`), or the newest span."""
    try:
        chosen = inference_span(config, span)
    except SpanError as e:
        raise InferError(str(e)) from e
    if version is None or chosen.version == version:
        return chosen
    versions = [s for s in list_spans(config.inference_data_root) if s.span == chosen.span]
    for s in versions:
        if s.version == version and s.files:
            return s
    known = ", ".join(str(s.version) for s in versions)
    raise InferError(f"span {chosen.span} has no version {version}; versions: {known}")


# Where TFX's Trainer puts the serving SavedModel inside a Model artifact
# (tfx.utils.path_utils.serving_model_dir; importing it would import Beam).
SERVING_MODEL_DIR = "Format-Serving"


def _model_dir(model: Any, destination: str | None) -> str:
    """The pushed copy when it is still there, else the Model artifact's own SavedModel."""
    if destination and os.path.isdir(destination):
        return destination
    return os.path.join(model.uri, SERVING_MODEL_DIR)


def find_model(lineage, ref: str) -> tuple[Any, str | None, str]:
    """(Model artifact, pushed version, SavedModel dir) for "blessed" or a pushed version."""
    if ref == BLESSED:
        model = lineage.resolve_model("pushed")
        pushes = [p for p in lineage.pushes(model.id) if p.pushed]
        push = pushes[-1] if pushes else None
        return model, push.version if push else None, _model_dir(model, push and push.destination)
    if not ref.isdigit():
        raise InferError(f"--model {ref!r}: give 'blessed' or a pushed version number")
    versions = []
    for model in lineage.models():
        for push in lineage.pushes(model.id):
            if push.pushed and push.version:
                versions.append(push.version)
                if push.version == ref:
                    return model, ref, _model_dir(model, push.destination)
    known = ", ".join(versions[-5:]) or "none"
    raise InferError(
        f"no pushed model version {ref} of pipeline '{lineage.pipeline}' (newest versions: "
        f"{known}); use --model blessed or one of those"
    )


def _row_spec(config: PipelineConfig) -> RowSpec:
    from pipeline.headers import feature_header

    schema = load_schema(config.schema_file)
    types = schema_column_types(schema)
    return RowSpec(
        types=types,
        label_key=config.label_key,
        key_columns=config.inference.key_columns,
        encoding=config.csv_encoding,
        finite=frozenset(schema_nan_free_columns(schema)),
        rename=lambda header: feature_header(header, types),
    )


def _printer_progress(printer: Callable[[str], None], every: float = 5.0):
    last = [time.monotonic()]

    def progress(report: ScoringReport) -> None:
        now = time.monotonic()
        if now - last[0] >= every:
            last[0] = now
            printer(f"  ... {report.rows_read:,} rows read, {report.rows_scored:,} scored")

    return progress


def run_infer(
    config: PipelineConfig,
    location: StoreLocation,
    *,
    span: int | None = None,
    version: int | None = None,
    model: str = BLESSED,
    output: str | None = None,
    printer: Callable[[str], None] = print,
) -> InferResult:
    from metadata.scorings import ScoringRecord
    from pipeline.run_id import new_run_id

    if config.example_gen not in ("csv", "sequence"):
        raise InferError(
            f"`tfxp infer` scores CSV rows; {config.pipeline_name!r} is an image dataset"
        )
    started = time.time()
    chosen = find_span(config, span, version)
    store, lineage, (model_artifact, model_version, model_dir) = _open_model(
        config, location, model
    )
    run_id = new_run_id()
    destination = output or os.path.join(config.predictions_dir, f"span-{chosen.span}-{run_id}")
    if os.path.exists(destination):
        raise InferError(f"{destination} exists; give another --output (nothing was written)")
    files = [str(f) for f in chosen.files]
    digest, _ = files_sha256(files, config.inference_data_root)
    record = ScoringRecord(
        store,
        pipeline=config.pipeline_name,
        run_id=run_id,
        model=model_artifact,
        examples=_same_examples(lineage, chosen, digest),
    )
    properties = {
        "span": chosen.span,
        "version": chosen.version,
        "data_root": config.inference_data_root,
        "content_sha256": digest,
        "model_version": model_version,
    }
    summary = dict(
        properties,
        files=[f.name for f in chosen.files],
        model_id=model_artifact.id,
        model_dir=model_dir,
        run_id=run_id,
        execution_id=record.execution.id,
    )
    published = None
    try:
        printer(f"scoring {chosen.label} ({chosen.path}) with {model_dir}")
        score = _score_sequences if config.example_gen == "sequence" else _score_and_publish
        report, published = score(config, chosen, model_dir, destination, summary, printer)
        properties.update(rows_scored=report.rows_scored, rows_skipped=report.rows_skipped)
        predictions_id = record.complete(os.path.abspath(published), properties)
    except BaseException as e:
        record.fail(f"{type(e).__name__}: {e}")
        if published:  # predictions without lineage would be untraceable: take them back
            shutil.rmtree(published, ignore_errors=True)
        raise
    return InferResult(
        chosen,
        model_artifact.id,
        model_version,
        model_dir,
        published,
        report,
        run_id,
        record.execution.id,
        predictions_id,
        time.time() - started,
        config.pipeline_name,
    )


def _open_model(config: PipelineConfig, location: StoreLocation, model: str):
    """(the store, opened for writing; its Lineage; find_model's answer)."""
    from metadata.lineage import Lineage

    store = open_store(location, writable=True)
    lineage = Lineage(store, config.pipeline_name, location.describe())
    try:
        return store, lineage, find_model(lineage, model)
    except LineageError as e:
        raise InferError(str(e)) from e


def _score_and_publish(
    config: PipelineConfig,
    span: SpanDir,
    model_dir: str,
    destination: str,
    summary: dict,
    printer: Callable[[str], None],
) -> tuple[ScoringReport, str]:
    serve = serving.load_serving_signature(model_dir)
    with PredictionsWriter(
        destination,
        config.inference.key_columns,
        serving.prediction_columns(config.tabular),
        config.tabular,
        base=str(span.path),
        policy=Applier(config.request_log),  # key columns echo inputs: the log's policy
    ) as writer:
        started = time.perf_counter()
        report = score_files(
            serve,
            [str(f) for f in span.files],
            _row_spec(config),
            writer,
            tabular=config.tabular,
            batch_size=config.inference.batch_size,
            progress=_printer_progress(printer),
        )
        counts = {
            "rows_read": report.rows_read,
            "rows_scored": report.rows_scored,
            "rows_skipped": report.rows_skipped,
        }
        report.seconds = time.perf_counter() - started
        return report, writer.publish({**summary, **counts})


def _score_sequences(
    config: PipelineConfig,
    span: SpanDir,
    model_dir: str,
    destination: str,
    summary: dict,
    printer: Callable[[str], None],
) -> tuple[ScoringReport, str]:
    """An event table's span: one prediction per key (tfxp/models/predict_sequences.py) in
    predictions.csv, published whole by a rename like the tables' predictions."""
    import json

    from tfxp.models.predict_sequences import SequencePredictError, predict_events

    files = [str(f) for f in span.files]
    tmp = destination + ".incomplete"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    started = time.perf_counter()
    try:
        result = predict_events(
            config, files, output=os.path.join(tmp, "predictions.csv"), model_dir=model_dir
        )
        report = ScoringReport(files=files, rows_read=result.events, rows_scored=result.events)
        report.seconds = time.perf_counter() - started
        printer(f"  {len(result.rows)} sequences of {result.events} events scored")
        with open(os.path.join(tmp, "summary.json"), "w", encoding="utf-8") as f:
            json.dump({**summary, "sequences": len(result.rows), "events": result.events}, f)
        os.rename(tmp, destination)
    except SequencePredictError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InferError(str(e)) from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report, destination


def _same_examples(lineage, span: SpanDir, digest: str) -> list:
    """The pipeline's Examples of exactly these files (same content hash), if it ingested them."""
    from metadata.properties import prop

    return [a for a in lineage.span_examples(span.span) if prop(a, "content_sha256") == digest]
