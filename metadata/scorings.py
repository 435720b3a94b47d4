"""Batch inference in ML Metadata: which model scored which data.

A scoring is an execution of the BatchInference component (in the pipeline)
or of `tfxp infer` (recorded here, in the same shape) in the node context
`<pipeline>.BatchInference`, with
  INPUT  `model`        the Model artifact whose pushed copy scored the rows,
  INPUT  `examples`     the span's Examples, when the pipeline ingested the same files,
  OUTPUT `predictions`  an InferenceResult artifact: the predictions folder, with
                        custom properties span, version, data_root, content_sha256,
                        rows_scored, rows_skipped, model_version.
So `tfxp lineage scored` answers from ML Metadata alone, on SQLite or MySQL.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ml_metadata.proto import metadata_store_pb2 as pb

from metadata.properties import prop
from metadata.store import LineageError
from pipeline.node_ids import BATCH_INFERENCE

# The TFX component's execution type: the pipeline's step and `tfxp infer` look alike.
EXECUTION_TYPE = "components.batch_inference.component.BatchInference"
PREDICTIONS_TYPE = "InferenceResult"  # TFX's standard artifact type for inference output
MODEL_KEY, EXAMPLES_KEY, PREDICTIONS_KEY = "model", "examples", "predictions"
# The properties a scoring's InferenceResult carries (and the scoring table shows).
PROPERTIES = (
    "span",
    "version",
    "data_root",
    "content_sha256",
    "rows_scored",
    "rows_skipped",
    "model_version",
)


@dataclass
class Scoring:
    predictions_id: int
    uri: str
    span: int | None
    version: int | None
    data_root: str | None
    content_sha256: str | None
    rows_scored: int | None
    rows_skipped: int | None
    model_id: int | None
    model_version: str | None
    run_id: str | None
    scored_at: str
    examples_ids: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _type_id(store, kind: str, name: str) -> int:
    get, put, proto = {
        "artifact": (store.get_artifact_type, store.put_artifact_type, pb.ArtifactType),
        "execution": (store.get_execution_type, store.put_execution_type, pb.ExecutionType),
        "context": (store.get_context_type, store.put_context_type, pb.ContextType),
    }[kind]
    from ml_metadata import errors

    try:
        return get(name).id
    except errors.NotFoundError:  # not registered yet
        return put(proto(name=name))


def _context(store, type_name: str, name: str) -> pb.Context:
    found = store.get_context_by_type_and_name(type_name, name)
    if found is not None:
        return found
    return pb.Context(type_id=_type_id(store, "context", type_name), name=name)


def _value(v: Any) -> pb.Value:
    if isinstance(v, bool):
        return pb.Value(int_value=int(v))
    if isinstance(v, int):
        return pb.Value(int_value=v)
    if isinstance(v, float):
        return pb.Value(double_value=v)
    return pb.Value(string_value=str(v))


def _event(kind: int, key: str, index: int = 0) -> pb.Event:
    event = pb.Event(type=kind)
    event.path.steps.add().key = key
    event.path.steps.add().index = index
    return event


class ScoringRecord:
    """One `tfxp infer` scoring in ML Metadata: RUNNING from `start`, then `complete` or `fail`.

    Recorded while it runs, so `tfxp runs list` shows how long it took, and a
    scoring that failed is there as FAILED with its model and data inputs.
    """

    def __init__(
        self, store, *, pipeline: str, run_id: str, model: pb.Artifact, examples: list[pb.Artifact]
    ) -> None:
        self.store = store
        self.execution = pb.Execution(
            type_id=_type_id(store, "execution", EXECUTION_TYPE),
            last_known_state=pb.Execution.RUNNING,
            name=f"{pipeline}.{BATCH_INFERENCE}.{run_id}",
        )
        inputs = [(model, _event(pb.Event.INPUT, MODEL_KEY))]
        inputs += [(a, _event(pb.Event.INPUT, EXAMPLES_KEY, i)) for i, a in enumerate(examples)]
        contexts = [
            _context(store, "pipeline", pipeline),
            _context(store, "pipeline_run", run_id),
            _context(store, "node", f"{pipeline}.{BATCH_INFERENCE}"),
        ]
        self.execution.id, _, context_ids = store.put_execution(
            self.execution, inputs, contexts, reuse_context_if_already_exist=True
        )
        self.contexts = store.get_contexts_by_id(context_ids)

    def _finish(self, state: int, outputs: list) -> list[int]:
        [self.execution] = self.store.get_executions_by_id([self.execution.id])
        self.execution.last_known_state = state
        _, artifact_ids, _ = self.store.put_execution(self.execution, outputs, self.contexts)
        return artifact_ids

    def complete(self, uri: str, properties: dict[str, Any]) -> int:
        """Marks the scoring COMPLETE with its InferenceResult; returns the artifact id."""
        result = pb.Artifact(
            type_id=_type_id(self.store, "artifact", PREDICTIONS_TYPE),
            uri=uri,
            state=pb.Artifact.LIVE,
        )
        for key, value in properties.items():
            if value is not None:
                result.custom_properties[key].CopyFrom(_value(value))
        [artifact_id] = self._finish(
            pb.Execution.COMPLETE, [(result, _event(pb.Event.OUTPUT, PREDICTIONS_KEY))]
        )
        return artifact_id

    def fail(self, reason: str) -> None:
        [self.execution] = self.store.get_executions_by_id([self.execution.id])
        self.execution.custom_properties["error"].string_value = reason[:1000]
        self.execution.last_known_state = pb.Execution.FAILED
        self.store.put_execution(self.execution, [], self.contexts)


def _key(event: pb.Event) -> str | None:
    return event.path.steps[0].key if event.path.steps else None


def scorings(lineage, span: int | None = None) -> list[Scoring]:
    """Every scoring of `lineage`'s pipeline (a metadata.lineage.Lineage), oldest first."""
    import datetime as dt

    found = []
    ids = [e for e, node in lineage.node_of.items() if node == BATCH_INFERENCE]
    events = lineage.events_of_executions(ids)
    for eid in sorted(ids):
        execution = lineage.executions[eid]
        if execution.last_known_state not in (pb.Execution.COMPLETE, pb.Execution.CACHED):
            continue
        by_key: dict[str, list[int]] = {}
        for ev in events[eid]:
            if ev.type in (pb.Event.INPUT, pb.Event.OUTPUT):
                by_key.setdefault(_key(ev) or "", []).append(ev.artifact_id)
        for art in lineage.artifacts(by_key.get(PREDICTIONS_KEY, [])):
            if prop(art, "rows_scored") is None:
                continue  # the pipeline's step with a model that was not blessed: nothing scored
            if span is not None and prop(art, "span") != span:
                continue
            models = by_key.get(MODEL_KEY, [])
            when = dt.datetime.fromtimestamp(execution.create_time_since_epoch / 1000)
            found.append(
                Scoring(
                    predictions_id=art.id,
                    uri=art.uri,
                    **{k: prop(art, k) for k in PROPERTIES},
                    model_id=models[0] if models else None,
                    run_id=lineage.run_of.get(eid),
                    scored_at=when.strftime("%Y-%m-%d %H:%M:%S"),
                    examples_ids=sorted(by_key.get(EXAMPLES_KEY, [])),
                )
            )
    unique = {s.predictions_id: s for s in found}  # a cached step re-uses its artifact
    return [unique[k] for k in sorted(unique)]


def scorings_or_error(lineage, span: int | None = None) -> list[Scoring]:
    found = scorings(lineage, span)
    if not found:
        which = "" if span is None else f" of span {span}"
        raise LineageError(
            f"no batch inference{which} of pipeline '{lineage.pipeline}' in {lineage.where}; "
            "`tfxp infer --dataset NAME --span N` scores a span"
        )
    return found


def render_scorings(found: list[Scoring]) -> str:
    head = ("predictions", "scored at", "span", "rows", "skipped", "model", "version", "run")
    rows = [
        (
            f"#{s.predictions_id}",
            s.scored_at,
            "-"
            if s.span is None
            else str(s.span) + ("" if s.version is None else f".v{s.version}"),
            str(s.rows_scored),
            str(s.rows_skipped),
            f"#{s.model_id}" if s.model_id else "-",
            s.model_version or "-",
            s.run_id or "-",
        )
        for s in found
    ]
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in (head, *rows)
    ]
    lines += [f"  #{s.predictions_id}: {s.uri} (data {s.data_root})" for s in found]
    return "\n".join(lines)
