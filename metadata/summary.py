"""What a run did, read back from ML Metadata: the end-of-run summary."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from metadata.properties import output_artifacts, prop
from pipeline.config import PipelineConfig

_STATE_NAMES = {v: k for k, v in metadata_store_pb2.Execution.State.items()}
# Resolver nodes only query ML Metadata; they run on every run and do no work.
_RESOLVER_TYPE = "tfx.dsl.components.common.resolver.Resolver"
RESOLVED = "RESOLVED"


@dataclass
class ComponentResult:
    node_id: str
    state: str  # COMPLETE, CACHED, FAILED, RUNNING, ...
    seconds: float


@dataclass
class RunSummary:
    run_id: str
    pipeline_name: str
    wall_seconds: float
    components: list[ComponentResult] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    blessed: bool | None = None
    # Why the model was not blessed: each failing threshold or slice with its numbers.
    blessing_message: str | None = None
    # The serving check's verdict and message (components/release/serving_check).
    serving_check: str | None = None
    pushed: bool | None = None
    pushed_model: str | None = None
    model_uri: str | None = None
    log_path: str | None = None
    # The validation gate's decision (PASS/WARN) and this run's HTML report.
    validation: str | None = None
    report_path: str | None = None
    # Image datasets: what ingestion read, and each file it left out with the reason.
    ingest: list[str] = field(default_factory=list)

    @property
    def executed(self) -> list[str]:
        return [c.node_id for c in self.components if c.state == "COMPLETE"]

    @property
    def cached(self) -> list[str]:
        return [c.node_id for c in self.components if c.state == "CACHED"]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    def render(self) -> str:
        lines = [
            f"run {self.run_id} of pipeline '{self.pipeline_name}' in {self.wall_seconds:.1f}s"
        ]
        width = max((len(c.node_id) for c in self.components), default=10)
        for c in self.components:
            detail = "" if c.state in ("CACHED", RESOLVED) else f"{c.seconds:6.1f}s"
            lines.append(f"  {c.node_id:<{width}}  {c.state.lower():<9} {detail}")
        lines.extend(self.ingest)
        if self.metrics:
            shown = ", ".join(
                f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in sorted(self.metrics.items())
            )
            lines.append(f"eval metrics: {shown}")
        if self.blessed is not None:
            lines.append(f"blessed: {'yes' if self.blessed else 'no'}")
            if not self.blessed and self.blessing_message:
                lines.extend(f"  {reason}" for reason in self.blessing_message.split("; "))
        if self.serving_check:
            lines.append(f"serving check: {self.serving_check}")
        if self.pushed:
            lines.append(f"pushed model: {self.pushed_model}")
        elif self.blessed is not None:
            why = "the model was not blessed" if not self.blessed else "the serving check failed"
            lines.append(f"pushed model: none ({why})")
        if self.validation:
            lines.append(f"validation: {self.validation.lower()}")
        if self.report_path:
            lines.append(f"validation report: {self.report_path}")
        if self.log_path:
            lines.append(f"log: {self.log_path}")
        return "\n".join(lines)


def _node_id(store: metadata_store.MetadataStore, execution_id: int, pipeline_name: str) -> str:
    for ctx in store.get_contexts_by_execution(execution_id):
        if store.get_context_types_by_id([ctx.type_id])[0].name == "node":
            return ctx.name.removeprefix(pipeline_name + ".")
    return "?"


def _plain_name(name: str) -> str:
    """TFMA's view names an aggregated metric by its AggregationType's text, e.g.
    "macro_average: true\n_balanced_accuracy" (a multiclass label's balanced
    accuracy, pipeline/eval_config.py): the metric's own name after it."""
    return name.rsplit("\n_", 1)[-1]


def read_eval_metrics(evaluation_uri: str) -> dict[str, float]:
    """Overall-slice metrics of a ModelEvaluation artifact."""
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.view import util as view_util

    # The metrics file alone, converted as tfma.load_eval_result converts it: that
    # also reads the plots (ROC, calibration ...), ten times the time.
    converted = (
        view_util.convert_metrics_proto_to_dict(record, model_name=None)
        for record in tfma.load_metrics(evaluation_uri)
    )
    for slice_key, metrics in (c for c in converted if c is not None):
        if slice_key == ():
            flat: dict[str, float] = {}
            for per_output in metrics.values():
                for per_class in per_output.values():
                    for name, value in per_class.items():
                        if "doubleValue" in value:
                            flat[_plain_name(name)] = float(value["doubleValue"])
            return flat
    return {}


def summarize_run(
    store: metadata_store.MetadataStore,
    config: PipelineConfig,
    run_id: str,
    *,
    wall_seconds: float = 0.0,
    log_path: str | None = None,
) -> RunSummary:
    summary = RunSummary(run_id, config.pipeline_name, wall_seconds, log_path=log_path)
    ctx = store.get_context_by_type_and_name("pipeline_run", run_id)
    if ctx is None:
        return summary
    executions = sorted(store.get_executions_by_context(ctx.id), key=lambda e: e.id)
    for ex in executions:
        node = _node_id(store, ex.id, config.pipeline_name)
        state = _STATE_NAMES.get(ex.last_known_state, "UNKNOWN")
        if (
            state == "COMPLETE"
            and store.get_execution_types_by_id([ex.type_id])[0].name == _RESOLVER_TYPE
        ):
            state = RESOLVED
        seconds = max(0.0, (ex.last_update_time_since_epoch - ex.create_time_since_epoch) / 1000)
        summary.components.append(ComponentResult(node, state, seconds))
        for art in output_artifacts(store, ex.id):
            type_name = store.get_artifact_types_by_id([art.type_id])[0].name
            if type_name == "ModelEvaluation":
                try:
                    summary.metrics = read_eval_metrics(art.uri)
                except Exception as e:  # noqa: BLE001 - a summary must not hide the run's result
                    summary.metrics = {"unreadable": str(e)}  # type: ignore[dict-item]
            elif type_name == "ModelBlessing":
                summary.blessed = bool(prop(art, "blessed"))
                summary.blessing_message = prop(art, "blessing_message") or None
            elif type_name == "InfraBlessing":
                summary.serving_check = prop(art, "message") or None
            elif type_name == "PushedModel":
                summary.pushed = bool(prop(art, "pushed"))
                summary.pushed_model = prop(art, "pushed_destination") if summary.pushed else None
            elif type_name == "Model":
                summary.model_uri = art.uri
            elif type_name == "Examples" and prop(art, "image_count") is not None:
                summary.ingest = image_ingest_lines(art)
    return summary


def image_ingest_lines(examples: metadata_store_pb2.Artifact) -> list[str]:
    """The image ExampleGen's result in a few lines: counts, speed, every bad file named."""
    formats = json.loads(prop(examples, "image_formats") or "{}")
    shown = ", ".join(f"{k} {v:,}" for k, v in sorted(formats.items()))
    speed = prop(examples, "images_per_second")
    lines = [
        f"ingest: {prop(examples, 'image_count'):,} images"
        + (f" ({shown})" if shown else "")
        + (f", {speed:,.0f} images/s, {prop(examples, 'mb_per_second'):,.1f} MB/s" if speed else "")
    ]
    bad = json.loads(prop(examples, "bad_images") or "[]")
    skipped = prop(examples, "skipped_images") or 0
    if skipped:
        lines.append(f"  {skipped} bad file(s) left out (image.on_bad_image: skip):")
        lines.extend(f"    {b}" for b in bad)
        if skipped > len(bad):
            lines.append(f"    ... {skipped - len(bad)} more in {examples.uri}/.image_ingest.json")
    ignored = prop(examples, "ignored_files") or 0
    if ignored:
        lines.append(f"  {ignored} non-image file(s) ignored (.DS_Store, Thumbs.db, dot-files)")
    return lines
