"""Lineage from ML Metadata alone: which data trained which model, what changed between runs.

Everything here reads ML Metadata through its own query API (events, contexts,
`get_lineage_subgraph`, filter queries), never SQL against the file, so the
same code answers on SQLite and on MySQL/MariaDB.

What TFX and this project record, and where this module finds it:

- runs: `pipeline_run` contexts (our run ids); components: `node` contexts
  named `<pipeline>.<node id>`; an execution's state COMPLETE (executed) or
  CACHED (reused the outputs of an earlier COMPLETE execution, with OUTPUT
  events to the same artifacts);
- data: Examples artifacts of ExampleGen, custom properties `span`,
  `version` (TFX), `content_sha256`, `input_base`, `row_count` (our
  ExampleGen; older stores have TFX's `input_fingerprint` only); the file
  pattern is ExampleGen's resolved `input_config` exec property;
- schema: CuratedSchemaImporter's exec property `content_sha256`;
- code and hyperparameters: Transform/Trainer exec property `custom_config`
  (`code_fingerprint`, `hyperparameters`), Trainer `train_args`/`eval_args`;
- verdicts: ModelBlessing (`blessed`, `current_model_id`,
  `baseline_model_id`), ModelEvaluation (TFMA result, read from its uri),
  PushedModel (`pushed`, `pushed_destination`, `pushed_version`).

Model lineage walks *producers*: for each artifact the COMPLETE execution
that wrote it (cached executions point at the same artifacts and are listed
as re-uses, not as a second origin).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import glob
import html
import json
import math
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ml_metadata.proto import metadata_store_pb2 as pb

# Node ids of pipeline/definition.py (tests check they agree; importing the
# definition would import TFX and TFMA, seconds a query should not pay).
EXAMPLE_GEN = "CsvExampleGen"
SCHEMA_IMPORTER = "CuratedSchemaImporter"
TRANSFORM = "Transform"
TRAINER = "Trainer"
EVALUATOR = "Evaluator"
PUSHER = "Pusher"

_STATE = {
    pb.Execution.COMPLETE: "executed",
    pb.Execution.CACHED: "cached",
    pb.Execution.FAILED: "failed",
    pb.Execution.RUNNING: "running",
    pb.Execution.NEW: "new",
    pb.Execution.CANCELED: "canceled",
}
_RESOLVER_TYPE = "tfx.dsl.components.common.resolver.Resolver"
_INPUTS = (pb.Event.INPUT, pb.Event.DECLARED_INPUT)
_OUTPUTS = (pb.Event.OUTPUT, pb.Event.DECLARED_OUTPUT)
# Far enough for ExampleGen -> window -> Transform -> Trainer and the schema.
MAX_HOPS = 24


class LineageError(RuntimeError):
    """A question ML Metadata cannot answer as asked; the message says what to do."""


# ---------------------------------------------------------------------------
# Values of MLMD properties.


def prop(node: Any, key: str) -> Any:
    """A property or custom property of an artifact/execution, as a Python value."""
    for props in (node.properties, node.custom_properties):
        if key in props:
            value = props[key]
            kind = value.WhichOneof("value")
            if kind is None:
                return None
            if kind == "struct_value":
                from google.protobuf import json_format

                return json_format.MessageToDict(value.struct_value)
            if kind == "proto_value":
                return None
            return getattr(value, kind)
    return None


def _json(text: Any) -> Any:
    if not isinstance(text, str) or not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).isoformat(timespec="seconds")


def _event_key(event: pb.Event) -> str:
    for step in event.path.steps:
        if step.HasField("key"):
            return step.key
    return ""


# ---------------------------------------------------------------------------
# Answers (plain data: JSON via dataclasses.asdict with sorted keys).


@dataclass
class ComponentRun:
    node_id: str
    state: str  # executed, cached, resolved, failed, running, ...
    seconds: float
    execution_id: int


@dataclass
class RunInfo:
    run_id: str
    started: str
    seconds: float
    status: str  # complete, failed, running
    components: list[ComponentRun] = field(default_factory=list)
    model_id: int | None = None
    spans: list[int] = field(default_factory=list)

    @property
    def executed(self) -> list[str]:
        return [c.node_id for c in self.components if c.state == "executed"]

    @property
    def cached(self) -> list[str]:
        return [c.node_id for c in self.components if c.state == "cached"]


@dataclass
class DataVersion:
    """One ingested data drop: an ExampleGen Examples artifact."""

    examples_id: int
    span: int | None
    version: int | None
    fingerprint: str | None
    rows: int | None
    input_base: str | None
    pattern: str | None
    files: list[str]
    ingested_in_run: str | None


@dataclass
class Blessing:
    blessed: bool
    blessing_id: int
    baseline_model_id: int | None
    run_id: str | None


@dataclass
class Push:
    pushed: bool
    pushed_model_id: int
    destination: str | None
    version: str | None
    run_id: str | None


@dataclass
class ModelLineage:
    pipeline: str
    model_id: int
    model_uri: str
    created: str
    trained_in_run: str | None
    reused_by_runs: list[str]
    data: list[DataVersion]
    schema: dict[str, Any]
    transform: dict[str, Any]
    trainer: dict[str, Any]
    blessing: Blessing | None
    metrics: dict[str, float]
    pushes: list[Push]
    graph: Graph | None = None

    @property
    def spans(self) -> list[int]:
        return sorted({d.span for d in self.data if d.span is not None})

    @property
    def pushed(self) -> bool:
        return any(p.pushed for p in self.pushes)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("graph")
        out["spans"] = self.spans
        out["pushed"] = self.pushed
        out["blessed"] = bool(self.blessing and self.blessing.blessed)
        return out


@dataclass
class ModelUse:
    model_id: int
    trained_in_run: str | None
    spans: list[int]
    blessed: bool
    baseline_model_id: int | None
    pushed: bool
    pushed_versions: list[str]


@dataclass
class SpanLineage:
    pipeline: str
    span: int
    data: list[DataVersion]
    models: list[ModelUse]
    graph: Graph | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("graph")
        return out


# ---------------------------------------------------------------------------
# Reading the store.


class Lineage:
    """One pipeline's runs, models and data in an ML Metadata store."""

    def __init__(self, store: Any, pipeline: str, where: str = "the ML Metadata store") -> None:
        self.store = store
        self.pipeline = pipeline
        self.where = where
        self._check_pipeline()
        self._atype = {t.id: t.name for t in store.get_artifact_types()}
        self._etype = {t.id: t.name for t in store.get_execution_types()}
        prefix = pipeline + "."
        self.executions: dict[int, pb.Execution] = {}
        self.node_of: dict[int, str] = {}
        for ctx in store.get_contexts_by_type("node"):
            if ctx.name.startswith(prefix):
                for ex in store.get_executions_by_context(ctx.id):
                    self.node_of[ex.id] = ctx.name[len(prefix) :]
                    self.executions[ex.id] = ex
        self.run_of: dict[int, str] = {}
        self.runs: dict[str, list[pb.Execution]] = {}
        for ctx in store.get_contexts_by_type("pipeline_run"):
            mine = [e for e in store.get_executions_by_context(ctx.id) if e.id in self.node_of]
            if mine:
                self.runs[ctx.name] = sorted(mine, key=lambda e: e.id)
                for e in mine:
                    self.run_of[e.id] = ctx.name
        # Chronological: by the first execution of each run.
        self.runs = dict(sorted(self.runs.items(), key=lambda kv: kv[1][0].id))
        self._artifacts: dict[int, pb.Artifact] = {}
        self._events_by_exec: dict[int, list[pb.Event]] = {}
        self._events_by_art: dict[int, list[pb.Event]] = {}

    # -- store sanity -------------------------------------------------------

    def _check_pipeline(self) -> None:
        pipelines = sorted(c.name for c in self.store.get_contexts_by_type("pipeline"))
        if self.pipeline in pipelines:
            return
        if not pipelines:
            raise LineageError(
                f"{self.where} holds no pipeline runs yet; run the pipeline first (tfxp run)"
            )
        raise LineageError(
            f"{self.where} records pipeline(s) {', '.join(repr(p) for p in pipelines)}, not "
            f"'{self.pipeline}'; point --run-dir/--mysql-database at the '{self.pipeline}' store, "
            "or pass --dataset for that pipeline"
        )

    # -- cached look-ups ----------------------------------------------------

    def artifacts(self, ids: Iterable[int]) -> list[pb.Artifact]:
        ids = list(dict.fromkeys(ids))
        missing = [i for i in ids if i not in self._artifacts]
        if missing:
            for a in self.store.get_artifacts_by_id(missing):
                self._artifacts[a.id] = a
        return [self._artifacts[i] for i in ids if i in self._artifacts]

    def artifact(self, artifact_id: int) -> pb.Artifact | None:
        found = self.artifacts([artifact_id])
        return found[0] if found else None

    def type_of(self, artifact: pb.Artifact) -> str:
        return self._atype.get(artifact.type_id, "?")

    def exec_type(self, execution: pb.Execution) -> str:
        return self._etype.get(execution.type_id, "?")

    def events_of_executions(self, ids: Iterable[int]) -> dict[int, list[pb.Event]]:
        ids = list(dict.fromkeys(ids))
        missing = [i for i in ids if i not in self._events_by_exec]
        if missing:
            for i in missing:
                self._events_by_exec[i] = []
            for ev in self.store.get_events_by_execution_ids(missing):
                self._events_by_exec[ev.execution_id].append(ev)
        return {i: self._events_by_exec[i] for i in ids}

    def events_of_artifacts(self, ids: Iterable[int]) -> dict[int, list[pb.Event]]:
        ids = list(dict.fromkeys(ids))
        missing = [i for i in ids if i not in self._events_by_art]
        if missing:
            for i in missing:
                self._events_by_art[i] = []
            for ev in self.store.get_events_by_artifact_ids(missing):
                self._events_by_art[ev.artifact_id].append(ev)
        return {i: self._events_by_art[i] for i in ids}

    def outputs(self, execution_id: int, type_name: str | None = None) -> list[pb.Artifact]:
        events = self.events_of_executions([execution_id])[execution_id]
        arts = self.artifacts(sorted({e.artifact_id for e in events if e.type in _OUTPUTS}))
        return [a for a in arts if type_name is None or self.type_of(a) == type_name]

    def state(self, execution: pb.Execution) -> str:
        if self.exec_type(execution) == _RESOLVER_TYPE:
            return "resolved"
        return _STATE.get(execution.last_known_state, "unknown")

    def producer(self, artifact_id: int) -> pb.Execution | None:
        """The execution that wrote an artifact (not the cached re-uses of it)."""
        events = self.events_of_artifacts([artifact_id])[artifact_id]
        writers = [
            self.executions[e.execution_id]
            for e in events
            if e.type in _OUTPUTS and e.execution_id in self.executions
        ]
        complete = [w for w in writers if w.last_known_state == pb.Execution.COMPLETE]
        chosen = sorted(complete or writers, key=lambda w: w.id)
        return chosen[0] if chosen else None

    def run_execution(self, run_id: str, node_id: str) -> pb.Execution | None:
        found = [e for e in self.runs.get(run_id, []) if self.node_of.get(e.id) == node_id]
        return found[-1] if found else None

    # -- runs ---------------------------------------------------------------

    def resolve_run(self, ref: str) -> str:
        if ref in self.runs:
            return ref
        if ref == "latest" and self.runs:
            return list(self.runs)[-1]
        matches = [r for r in self.runs if r.startswith(ref)] if len(ref) >= 4 else []
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise LineageError(f"run id '{ref}' is ambiguous ({', '.join(matches[:4])}); give more")
        raise LineageError(
            f"no run '{ref}' of pipeline '{self.pipeline}' in {self.where}; "
            "`tfxp runs list` shows the run ids"
        )

    def run_info(self, run_id: str) -> RunInfo:
        execs = self.runs[run_id]
        start = min(e.create_time_since_epoch for e in execs)
        end = max(e.last_update_time_since_epoch for e in execs)
        comps = [
            ComponentRun(
                self.node_of[e.id],
                self.state(e),
                round(max(0, e.last_update_time_since_epoch - e.create_time_since_epoch) / 1000, 1),
                e.id,
            )
            for e in execs
        ]
        states = {c.state for c in comps}
        if "failed" in states or "canceled" in states:
            status = "failed"
        elif states & {"running", "new", "unknown"}:
            status = "incomplete"
        else:
            status = "complete"
        info = RunInfo(run_id, _iso(start), round((end - start) / 1000, 1), status, comps)
        trainer = self.run_execution(run_id, TRAINER)
        if trainer is not None:
            models = self.outputs(trainer.id, "Model")
            info.model_id = models[0].id if models else None
        gen = self.run_execution(run_id, EXAMPLE_GEN)
        if gen is not None:
            info.spans = sorted(
                {prop(a, "span") for a in self.outputs(gen.id, "Examples")} - {None}
            )
        return info

    def list_runs(self) -> list[RunInfo]:
        return [self.run_info(r) for r in self.runs]

    # -- data ---------------------------------------------------------------

    def data_version(self, examples: pb.Artifact) -> DataVersion:
        gen = self.producer(examples.id)
        base = prop(examples, "input_base") or (prop(gen, "input_base") if gen else None)
        pattern = None
        if gen is not None:
            config = _json(prop(gen, "input_config")) or {}
            patterns = [s.get("pattern") for s in config.get("splits", []) if s.get("pattern")]
            pattern = ", ".join(patterns) or None
        files: list[str] = []
        if base and pattern and "://" not in base:
            for p in pattern.split(", "):
                files.extend(sorted(glob.glob(os.path.join(base, p))))
        fingerprint = prop(examples, "content_sha256") or prop(examples, "input_fingerprint")
        return DataVersion(
            examples_id=examples.id,
            span=prop(examples, "span"),
            version=prop(examples, "version"),
            fingerprint=fingerprint,
            rows=prop(examples, "row_count"),
            input_base=base,
            pattern=pattern,
            files=files,
            ingested_in_run=self.run_of.get(gen.id) if gen else None,
        )

    def _is_raw_examples(self, artifact: pb.Artifact) -> bool:
        gen = self.producer(artifact.id)
        return (
            self.type_of(artifact) == "Examples"
            and gen is not None
            and (self.node_of.get(gen.id) == EXAMPLE_GEN or "ExampleGen" in self.exec_type(gen))
        )

    # -- models -------------------------------------------------------------

    def models(self) -> list[pb.Artifact]:
        ids = set()
        for ex in self.executions.values():
            if self.node_of[ex.id] == TRAINER:
                ids.add(ex.id)
        out = []
        for eid in sorted(ids):
            out.extend(self.outputs(eid, "Model"))
        return sorted({a.id: a for a in out}.values(), key=lambda a: a.id)

    def resolve_model(self, ref: str) -> pb.Artifact:
        models = self.models()
        if not models:
            raise LineageError(
                f"pipeline '{self.pipeline}' has no trained model in {self.where}; "
                "run the pipeline (tfxp run)"
            )
        if ref == "latest":
            return models[-1]
        if ref == "pushed":
            pushed = [
                (push.pushed_model_id, m)
                for m in models
                for push in self.pushes(m.id)
                if push.pushed
            ]
            if not pushed:
                raise LineageError(
                    f"no model of pipeline '{self.pipeline}' was pushed yet in {self.where}; "
                    "`tfxp lineage model latest` shows the newest one"
                )
            return max(pushed, key=lambda pm: pm[0])[1]
        if ref.isdigit():
            by_id = {m.id: m for m in models}
            if int(ref) in by_id:
                return by_id[int(ref)]
            known = ", ".join(str(m.id) for m in models[-5:])
            raise LineageError(
                f"no Model artifact {ref} of pipeline '{self.pipeline}' in {self.where} "
                f"(newest model ids: {known}); use latest, pushed, a model id or a run id"
            )
        run_id = self.resolve_run(ref)
        info = self.run_info(run_id)
        if info.model_id is None:
            raise LineageError(
                f"run {run_id} trained no model (partial or failed run); pick another run "
                "from `tfxp runs list`"
            )
        return self.artifact(info.model_id)

    def blessing(self, model_id: int) -> Blessing | None:
        found: list[tuple[pb.Artifact, pb.Execution]] = []
        for ex in self._consumers(model_id, "model"):
            if self.node_of.get(ex.id) != EVALUATOR:
                continue
            for b in self.outputs(ex.id, "ModelBlessing"):
                if prop(b, "current_model_id") in (None, model_id):
                    found.append((b, self.producer(b.id) or ex))
        if not found:
            return None
        b, ex = sorted(found, key=lambda be: be[0].id)[-1]
        return Blessing(
            blessed=prop(b, "blessed") == 1,
            blessing_id=b.id,
            baseline_model_id=prop(b, "baseline_model_id"),
            run_id=self.run_of.get(ex.id),
        )

    def evaluation(self, model_id: int) -> pb.Artifact | None:
        for ex in sorted(self._consumers(model_id, "model"), key=lambda e: -e.id):
            if self.node_of.get(ex.id) == EVALUATOR:
                evals = self.outputs(ex.id, "ModelEvaluation")
                if evals:
                    return evals[-1]
        return None

    def pushes(self, model_id: int) -> list[Push]:
        seen: dict[int, Push] = {}
        for ex in self._consumers(model_id, "model"):
            if self.node_of.get(ex.id) != PUSHER:
                continue
            for p in self.outputs(ex.id, "PushedModel"):
                writer = self.producer(p.id) or ex
                version = prop(p, "pushed_version")
                seen[p.id] = Push(
                    pushed=prop(p, "pushed") == 1,
                    pushed_model_id=p.id,
                    destination=prop(p, "pushed_destination") or None,
                    version=str(version) if version not in (None, "") else None,
                    run_id=self.run_of.get(writer.id),
                )
        return [seen[k] for k in sorted(seen)]

    def _consumers(self, artifact_id: int, key: str) -> list[pb.Execution]:
        events = self.events_of_artifacts([artifact_id])[artifact_id]
        ids = {e.execution_id for e in events if e.type in _INPUTS and _event_key(e) == key}
        return [self.executions[i] for i in sorted(ids) if i in self.executions]

    def upstream(self, artifact_id: int) -> pb.LineageGraph:
        """ML Metadata's own lineage query, towards the raw data."""
        query = pb.LineageSubgraphQueryOptions(
            max_num_hops=MAX_HOPS, direction=pb.LineageSubgraphQueryOptions.UPSTREAM
        )
        query.starting_artifacts.filter_query = f"id = {int(artifact_id)}"
        graph = self.store.get_lineage_subgraph(
            query, field_mask_paths=["artifacts", "executions", "events"]
        )
        for a in graph.artifacts:
            self._artifacts.setdefault(a.id, a)
        return graph

    def model_lineage(
        self, model: pb.Artifact, *, with_metrics: bool = True, with_graph: bool = False
    ) -> ModelLineage:
        graph = self.upstream(model.id)
        writers: dict[int, list[int]] = defaultdict(list)
        inputs: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for ev in graph.events:
            if ev.type in _OUTPUTS:
                writers[ev.artifact_id].append(ev.execution_id)
            elif ev.type in _INPUTS:
                inputs[ev.execution_id].append((ev.artifact_id, _event_key(ev)))
        executions = {e.id: e for e in graph.executions if e.id in self.executions}

        def producer_of(aid: int) -> pb.Execution | None:
            cands = [executions[x] for x in writers.get(aid, []) if x in executions]
            complete = [c for c in cands if c.last_known_state == pb.Execution.COMPLETE]
            chosen = sorted(complete or cands, key=lambda c: c.id)
            return chosen[0] if chosen else None

        # Walk producers from the model back to ExampleGen's Examples.
        steps: list[tuple[pb.Execution, list[tuple[int, str]], list[int]]] = []
        seen_art: set[int] = set()
        seen_exec: set[int] = set()
        frontier = [model.id]
        raw: list[pb.Artifact] = []
        schema_exec = transform_exec = trainer_exec = None
        while frontier:
            aid = frontier.pop()
            if aid in seen_art:
                continue
            seen_art.add(aid)
            ex = producer_of(aid)
            if ex is None:
                continue
            node = self.node_of.get(ex.id, "?")
            if ex.id not in seen_exec:
                seen_exec.add(ex.id)
                steps.append((ex, inputs.get(ex.id, []), []))
                frontier.extend(a for a, _ in inputs.get(ex.id, []))
            for s in steps:
                if s[0].id == ex.id:
                    s[2].append(aid)
            if node == EXAMPLE_GEN or "ExampleGen" in self.exec_type(ex):
                raw.extend(self.artifacts([aid]))
            elif node == SCHEMA_IMPORTER:
                schema_exec = ex
            elif node == TRANSFORM:
                transform_exec = ex
            elif node == TRAINER and aid == model.id:
                trainer_exec = ex
        reused = sorted(
            {self.run_of[x] for x in writers.get(model.id, []) if x in self.run_of}
            - {self.run_of.get(trainer_exec.id) if trainer_exec else None}
        )
        data = [self.data_version(a) for a in sorted(raw, key=lambda a: a.id)]
        schema: dict[str, Any] = {}
        if schema_exec is not None:
            schema_art = [a for a in self.outputs(schema_exec.id, "Schema")]
            schema = {
                "content_sha256": prop(schema_exec, "content_sha256"),
                "file": prop(schema_exec, "schema_file"),
                "schema_id": schema_art[0].id if schema_art else None,
            }
        transform = self._component_facts(transform_exec)
        trainer = self._component_facts(trainer_exec)
        metrics: dict[str, float] = {}
        if with_metrics:
            metrics = self.metrics(model.id)
        lineage = ModelLineage(
            pipeline=self.pipeline,
            model_id=model.id,
            model_uri=model.uri,
            created=_iso(model.create_time_since_epoch),
            trained_in_run=self.run_of.get(trainer_exec.id) if trainer_exec else None,
            reused_by_runs=reused,
            data=data,
            schema=schema,
            transform=transform,
            trainer=trainer,
            blessing=self.blessing(model.id),
            metrics=metrics,
            pushes=self.pushes(model.id),
        )
        if with_graph:
            lineage.graph = self._model_graph(lineage, model, steps)
        return lineage

    def metrics(self, model_id: int) -> dict[str, float]:
        evaluation = self.evaluation(model_id)
        if evaluation is None:
            return {}
        from pipeline.summary import read_eval_metrics

        _quiet_tensorflow()
        try:
            found = read_eval_metrics(evaluation.uri)
        except Exception as e:  # a moved or deleted pipeline root
            raise LineageError(
                f"cannot read the evaluation of model {model_id} at {evaluation.uri} "
                f"({str(e).splitlines()[0][:120]}); was the pipeline root moved or deleted?"
            ) from None
        return {k: round(v, 6) for k, v in sorted(found.items())}

    def _component_facts(self, ex: pb.Execution | None) -> dict[str, Any]:
        if ex is None:
            return {}
        config = _json(prop(ex, "custom_config")) or {}
        facts: dict[str, Any] = {
            "execution_id": ex.id,
            "run_id": self.run_of.get(ex.id),
            "code_fingerprint": config.get("code_fingerprint"),
        }
        for key in ("preprocessing_fn", "run_fn", "module_file"):
            if prop(ex, key):
                facts["code"] = prop(ex, key)
        if self.node_of.get(ex.id) == TRAINER:
            hyper = dict(config.get("hyperparameters") or {})
            for key, name in (("train_args", "train_steps"), ("eval_args", "eval_steps")):
                steps = (_json(prop(ex, key)) or {}).get("num_steps")
                if steps is not None:
                    hyper[name] = steps
            facts["hyperparameters"] = dict(sorted(hyper.items()))
        return facts

    # -- data -> models ----------------------------------------------------

    def span_examples(self, span: int, version: int | None = None) -> list[pb.Artifact]:
        query = (
            f"type = 'Examples' AND custom_properties.span.int_value = {int(span)}"
            f" AND contexts_a.type = 'node' AND contexts_a.name = '{self.pipeline}.{EXAMPLE_GEN}'"
        )
        from ml_metadata.metadata_store import metadata_store

        found = self.store.get_artifacts(
            list_options=metadata_store.ListOptions(filter_query=query)
        )
        found = [a for a in found if version is None or prop(a, "version") == version]
        for a in found:
            self._artifacts.setdefault(a.id, a)
        return sorted(found, key=lambda a: a.id)

    def ingested_spans(self) -> list[int]:
        spans = set()
        for ex in self.executions.values():
            if self.node_of[ex.id] == EXAMPLE_GEN:
                spans.update(prop(a, "span") for a in self.outputs(ex.id, "Examples"))
        return sorted(spans - {None})

    def span_lineage(
        self, span: int, version: int | None = None, *, with_graph: bool = False
    ) -> SpanLineage:
        examples = self.span_examples(span, version)
        if not examples:
            spans = ", ".join(str(s) for s in self.ingested_spans()) or "none"
            raise LineageError(
                f"span {span}{'' if version is None else f' version {version}'} was never "
                f"ingested by pipeline '{self.pipeline}' in {self.where} (ingested spans: "
                f"{spans}); `tfxp run --span {span}` ingests it"
            )
        query = pb.LineageSubgraphQueryOptions(
            max_num_hops=8, direction=pb.LineageSubgraphQueryOptions.DOWNSTREAM
        )
        query.starting_artifacts.filter_query = (
            "id IN (" + ", ".join(str(a.id) for a in examples) + ")"
        )
        graph = self.store.get_lineage_subgraph(query, field_mask_paths=["artifacts"])
        candidates = sorted(
            (a for a in graph.artifacts if self._atype.get(a.type_id) == "Model"),
            key=lambda a: a.id,
        )
        wanted = {a.id for a in examples}
        uses = []
        for model in candidates:
            lineage = self.model_lineage(model, with_metrics=False)
            if not wanted & {d.examples_id for d in lineage.data}:
                continue  # downstream only as some other model's baseline
            b = lineage.blessing
            uses.append(
                ModelUse(
                    model_id=model.id,
                    trained_in_run=lineage.trained_in_run,
                    spans=lineage.spans,
                    blessed=bool(b and b.blessed),
                    baseline_model_id=b.baseline_model_id if b else None,
                    pushed=lineage.pushed,
                    pushed_versions=[p.version or "" for p in lineage.pushes if p.pushed],
                )
            )
        result = SpanLineage(
            pipeline=self.pipeline,
            span=span,
            data=[self.data_version(a) for a in examples],
            models=uses,
        )
        if with_graph:
            result.graph = span_graph(result)
        return result

    # -- diffs --------------------------------------------------------------

    def run_facts(self, run_id: str, *, with_metrics: bool = True) -> dict[str, dict[str, Any]]:
        """What a run trained on and produced, by section, for `diff_facts`."""
        facts: dict[str, dict[str, Any]] = {
            "data": {},
            "schema": {},
            "code": {},
            "hyperparameters": {},
            "metrics": {},
            "model": {},
        }
        info = self.run_info(run_id)
        lineage = None
        if info.model_id is not None:
            lineage = self.model_lineage(self.artifact(info.model_id), with_metrics=with_metrics)
            data = lineage.data
        else:
            gen = self.run_execution(run_id, EXAMPLE_GEN)
            data = [self.data_version(a) for a in self.outputs(gen.id, "Examples")] if gen else []
        facts["data"] = data_facts(data)
        schema_exec = self.run_execution(run_id, SCHEMA_IMPORTER)
        if schema_exec is not None:
            facts["schema"] = {
                "content_sha256": prop(schema_exec, "content_sha256"),
                "file": prop(schema_exec, "schema_file"),
            }
        for node, key in ((TRANSFORM, "transform"), (TRAINER, "trainer")):
            ex = self.run_execution(run_id, node)
            if ex is not None:
                c = self._component_facts(ex)
                facts["code"][key] = c.get("code_fingerprint")
                if node == TRAINER:
                    facts["hyperparameters"] = dict(c.get("hyperparameters") or {})
        if lineage is not None:
            facts["metrics"] = {k: v for k, v in lineage.metrics.items() if not k.endswith("_diff")}
            b = lineage.blessing
            facts["model"] = {
                "id": lineage.model_id,
                "trained_in_run": lineage.trained_in_run,
                "blessed": bool(b and b.blessed),
                "baseline_model_id": b.baseline_model_id if b else None,
                "pushed": lineage.pushed,
                "pushed_version": next((p.version for p in lineage.pushes if p.pushed), None),
            }
        return facts

    # -- graphs -------------------------------------------------------------

    def _model_graph(
        self,
        lineage: ModelLineage,
        model: pb.Artifact,
        steps: list[tuple[pb.Execution, list[tuple[int, str]], list[int]]],
    ) -> Graph:
        g = Graph(title=model_title(lineage))
        by_id = {d.examples_id: d for d in lineage.data}
        for ex, ins, outs in steps:
            node = self.node_of.get(ex.id, self.exec_type(ex))
            lines = [f"execution #{ex.id}", f"run {self.run_of.get(ex.id, '?')}"]
            if node == TRAINER:
                hp = lineage.trainer.get("hyperparameters", {})
                lines.append(", ".join(f"{k}={v}" for k, v in hp.items()))
                lines.append(f"code {str(lineage.trainer.get('code_fingerprint'))[:12]}")
            elif node == TRANSFORM:
                lines.append(f"code {str(lineage.transform.get('code_fingerprint'))[:12]}")
            elif node == SCHEMA_IMPORTER:
                lines.append(f"sha256 {str(lineage.schema.get('content_sha256'))[:12]}")
                g.add(f"f{ex.id}", "file", "schema file", [str(lineage.schema.get("file"))])
                g.edge(f"f{ex.id}", f"e{ex.id}")
            g.add(f"e{ex.id}", "execution", node, lines)
            for aid, _key in ins:
                g.edge(f"a{aid}", f"e{ex.id}")
            for aid in outs:
                art = self.artifact(aid)
                g.edge(f"e{ex.id}", f"a{aid}")
                type_name = self.type_of(art) if art else "?"
                lines = [f"#{aid}"]
                if aid in by_id:
                    d = by_id[aid]
                    lines = [
                        f"#{aid} span {d.span}" + ("" if d.version is None else f" v{d.version}"),
                        f"sha256 {(d.fingerprint or '?')[:12]}",
                        f"{d.rows if d.rows is not None else '?'} rows",
                    ]
                    raw_key = f"raw{aid}"
                    g.add(
                        raw_key,
                        "file",
                        f"raw data span {d.span}",
                        [os.path.join(d.input_base or "?", d.pattern or "?")]
                        + [f"{len(d.files)} file(s) on disk now"],
                    )
                    g.edge(raw_key, f"e{ex.id}")
                g.add(f"a{aid}", "artifact", type_name, lines, highlight=aid == model.id)
        b = lineage.blessing
        if b is not None:
            verdict = "blessed" if b.blessed else "NOT blessed"
            base = (
                f"baseline model #{b.baseline_model_id}" if b.baseline_model_id else "no baseline"
            )
            metric_lines = [f"{k} {v:.4f}" for k, v in list(lineage.metrics.items())[:3]]
            g.add("eval", "execution", EVALUATOR, [f"run {b.run_id}"])
            g.add(
                f"a{b.blessing_id}",
                "artifact",
                "ModelBlessing",
                [f"#{b.blessing_id} {verdict}", base, *metric_lines],
            )
            g.edge(f"a{model.id}", "eval")
            g.edge("eval", f"a{b.blessing_id}")
            for p in lineage.pushes:
                g.add(f"push{p.pushed_model_id}", "execution", PUSHER, [f"run {p.run_id}"])
                g.add(
                    f"a{p.pushed_model_id}",
                    "artifact",
                    "PushedModel",
                    [
                        f"#{p.pushed_model_id} {'pushed' if p.pushed else 'not pushed'}",
                        f"version {p.version}" if p.pushed else "",
                    ],
                )
                g.edge(f"a{b.blessing_id}", f"push{p.pushed_model_id}")
                g.edge(f"push{p.pushed_model_id}", f"a{p.pushed_model_id}")
        return g


def _quiet_tensorflow() -> None:
    """TFMA's import prints deprecation chatter that would bury a query's answer."""
    import logging
    import warnings

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # Beam warns about crcmod at import although it uses google-crc32c instead.
    logging.getLogger().addFilter(lambda r: not str(r.msg).startswith("crcmod package"))
    for category in (FutureWarning, DeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category)
    import tensorflow as tf

    tf.get_logger().setLevel(logging.ERROR)


def model_title(lineage: ModelLineage) -> str:
    spans = ", ".join(str(s) for s in lineage.spans) or "?"
    word = "span" if len(lineage.spans) <= 1 else "spans"
    return (
        f"Model #{lineage.model_id} of pipeline '{lineage.pipeline}', trained on {word} {spans}"
        f" (run {lineage.trained_in_run})"
    )


def data_facts(data: Sequence[DataVersion]) -> dict[str, Any]:
    """Training data as flat, diffable facts (one span: plain keys; several: per span)."""
    if len(data) == 1:
        d = data[0]
        return {
            "span": d.span,
            "version": d.version,
            "fingerprint": d.fingerprint,
            "rows": d.rows,
            # No Examples artifact id: a `--no-cache` re-ingestion of the same
            # bytes is a new artifact but the same data (the fingerprint says so).
        }
    out: dict[str, Any] = {"spans": ",".join(str(d.span) for d in data)}
    for d in data:
        tag = f"span {d.span}" + ("" if d.version is None else f" v{d.version}")
        out[f"{tag} fingerprint"] = d.fingerprint
        out[f"{tag} rows"] = d.rows
    return out


# ---------------------------------------------------------------------------
# Diffs (pure).


@dataclass(frozen=True)
class Change:
    section: str
    key: str
    a: Any
    b: Any


SECTIONS = ("data", "schema", "code", "hyperparameters", "metrics", "model")


def diff_facts(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> list[Change]:
    """Every (section, key) whose value differs, in section order then key order."""
    changes = []
    sections = [s for s in SECTIONS if s in a or s in b]
    sections += sorted((set(a) | set(b)) - set(SECTIONS))
    for section in sections:
        sa, sb = a.get(section, {}), b.get(section, {})
        for key in sorted(set(sa) | set(sb)):
            va, vb = sa.get(key), sb.get(key)
            if isinstance(va, float) and isinstance(vb, float) and math.isclose(va, vb):
                continue
            if va != vb:
                changes.append(Change(section, key, va, vb))
    return changes


def diff_report(
    run_a: str, run_b: str, a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    changes = diff_facts(a, b)
    changed = {c.section for c in changes}
    return {
        "a": run_a,
        "b": run_b,
        "changed": {
            s: {c.key: {"a": c.a, "b": c.b} for c in changes if c.section == s}
            for s in SECTIONS
            if s in changed
        },
        "unchanged": [s for s in SECTIONS if s not in changed],
        "facts": {"a": a, "b": b},
    }


def _short(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4f}"
    text = str(value)
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:12]  # a SHA-256
    return text


def render_diff(report: dict[str, Any]) -> str:
    lines = [f"runs diff  A = {report['a']}", f"           B = {report['b']}"]
    rows = [("section", "what", "A", "B")]
    for section, keys in report["changed"].items():
        for key, ab in keys.items():
            extra = ""
            if isinstance(ab["a"], float) and isinstance(ab["b"], float):
                extra = f"  ({ab['b'] - ab['a']:+.4f})"
            rows.append((section, key, _short(ab["a"]), _short(ab["b"]) + extra))
    if len(rows) > 1:
        lines.append(_table(rows))
    else:
        lines.append("no differences")
    if report["unchanged"]:
        lines.append("unchanged: " + ", ".join(report["unchanged"]))
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Text output (pure).


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r, widths, strict=True)]
        out.append((indent + "  ".join(cells)).rstrip())
    return "\n".join(out)


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def render_runs(runs: Sequence[RunInfo], verdicts: dict[int, tuple[bool, bool]]) -> str:
    """`runs list` table; `verdicts` maps model id -> (blessed, pushed)."""
    if not runs:
        return "no runs"
    rows = [("run", "started", "took", "status", "span", "model", "blessed", "pushed", "ran")]
    details = []
    for r in runs:
        blessed, pushed = verdicts.get(r.model_id, (None, None)) if r.model_id else (None, None)
        n_exec, n_cache = len(r.executed), len(r.cached)
        rows.append(
            (
                r.run_id,
                r.started.replace("T", " "),
                f"{r.seconds:.1f}s",
                r.status,
                ",".join(str(s) for s in r.spans) or "-",
                f"#{r.model_id}" if r.model_id else "-",
                _yes(blessed),
                _yes(pushed),
                f"{n_exec} executed, {n_cache} cached",
            )
        )
        details.append(r)
    lines = [_table(rows)]
    for r in details:
        parts = [f"{state}: {', '.join(nodes)}" for state, nodes in _by_state(r.components)]
        lines.append(f"  {r.run_id}  " + "; ".join(parts))
    return "\n".join(lines)


def _by_state(components: Sequence[ComponentRun]) -> list[tuple[str, list[str]]]:
    grouped: dict[str, list[str]] = {}
    for c in components:
        grouped.setdefault(c.state, []).append(c.node_id)
    return list(grouped.items())


def render_run(info: RunInfo, facts: dict[str, dict[str, Any]]) -> str:
    lines = [
        f"run {info.run_id}: {info.status}, started {info.started.replace('T', ' ')}, "
        f"took {info.seconds:.1f}s"
    ]
    rows = [("component", "state", "seconds", "execution")]
    for c in info.components:
        secs = f"{c.seconds:.1f}" if c.state == "executed" else ""
        rows.append((c.node_id, c.state, secs, f"#{c.execution_id}"))
    lines.append(_table(rows))
    for section in SECTIONS:
        values = facts.get(section) or {}
        shown = ", ".join(f"{k} {_short(v)}" for k, v in values.items()) or "-"
        lines.append(f"{section:<16} {shown}")
    return "\n".join(lines)


def render_model(m: ModelLineage) -> str:
    lines = [model_title(m), f"  model      #{m.model_id} {m.model_uri} (created {m.created})"]
    if m.reused_by_runs:
        lines.append(f"  reused by  {', '.join(m.reused_by_runs)} (cached)")
    for d in m.data:
        version = "" if d.version is None else f" version {d.version}"
        lines.append(
            f"  data       span {d.span}{version}: Examples #{d.examples_id}, "
            f"{d.rows if d.rows is not None else '?'} rows, sha256 {d.fingerprint or '?'}"
        )
        lines.append(
            f"             from {os.path.join(d.input_base or '?', d.pattern or '?')}"
            f" (ingested in run {d.ingested_in_run})"
        )
        for f in d.files:
            lines.append(f"               {f}")
    s = m.schema
    lines.append(
        f"  schema     Schema #{s.get('schema_id')} sha256 {s.get('content_sha256')} "
        f"({s.get('file')})"
    )
    t = m.transform
    lines.append(
        f"  transform  execution #{t.get('execution_id')} ({t.get('code')}) code "
        f"{t.get('code_fingerprint')}"
    )
    tr = m.trainer
    lines.append(
        f"  trainer    execution #{tr.get('execution_id')} ({tr.get('code')}) code "
        f"{tr.get('code_fingerprint')}"
    )
    hp = tr.get("hyperparameters") or {}
    lines.append("  hyperparameters " + (", ".join(f"{k}={v}" for k, v in hp.items()) or "-"))
    b = m.blessing
    if b is None:
        lines.append("  blessed    not evaluated")
    else:
        base = (
            f"against baseline model #{b.baseline_model_id}"
            if b.baseline_model_id
            else "no baseline (no earlier blessed model): absolute thresholds only"
        )
        verdict = "yes" if b.blessed else "no"
        lines.append(f"  blessed    {verdict} (evaluated in run {b.run_id}), {base}")
    if m.metrics:
        lines.append("  metrics    " + ", ".join(f"{k} {_short(v)}" for k, v in m.metrics.items()))
    pushed = [p for p in m.pushes if p.pushed]
    if pushed:
        for p in pushed:
            lines.append(f"  pushed     version {p.version} -> {p.destination} (run {p.run_id})")
    else:
        lines.append("  pushed     no")
    return "\n".join(lines)


def render_span(s: SpanLineage) -> str:
    lines = [f"span {s.span} of pipeline '{s.pipeline}'"]
    for d in s.data:
        version = "" if d.version is None else f" version {d.version}"
        lines.append(
            f"  ingested{version}: Examples #{d.examples_id}, {d.rows} rows, sha256 "
            f"{(d.fingerprint or '?')[:12]}, from {os.path.join(d.input_base or '?', d.pattern or '?')}"
            f" (run {d.ingested_in_run})"
        )
    if not s.models:
        lines.append("  no model was trained on this span")
        return "\n".join(lines)
    rows = [("model", "trained in run", "spans", "blessed", "baseline", "pushed")]
    for u in s.models:
        rows.append(
            (
                f"#{u.model_id}",
                u.trained_in_run or "-",
                ",".join(str(x) for x in u.spans),
                _yes(u.blessed),
                f"#{u.baseline_model_id}" if u.baseline_model_id else "-",
                ("yes " + ",".join(u.pushed_versions)) if u.pushed else "no",
            )
        )
    lines.append(_table(rows))
    return "\n".join(lines)


def dumps(value: Any) -> str:
    """Stable JSON: sorted keys, fixed indentation."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)


# ---------------------------------------------------------------------------
# Graphs: a small layered layout drawn as SVG, HTML (the SVG inline), DOT or
# PNG (Pillow). No Graphviz needed.


@dataclass
class GraphNode:
    key: str
    kind: str  # artifact, execution, file
    title: str
    lines: list[str]
    highlight: bool = False


@dataclass
class Graph:
    title: str
    nodes: dict[str, GraphNode] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)

    def add(self, key: str, kind: str, title: str, lines: Sequence[str], highlight=False) -> None:
        if key not in self.nodes:
            self.nodes[key] = GraphNode(key, kind, title, [x for x in lines if x], highlight)
        elif highlight:
            self.nodes[key].highlight = True

    def edge(self, a: str, b: str) -> None:
        if (a, b) not in self.edges:
            self.edges.append((a, b))


def span_graph(s: SpanLineage) -> Graph:
    g = Graph(title=f"span {s.span} of pipeline '{s.pipeline}': {len(s.models)} model(s)")
    for d in s.data:
        g.add(
            f"raw{d.examples_id}",
            "file",
            f"raw data span {d.span}",
            [os.path.join(d.input_base or "?", d.pattern or "?")],
        )
        g.add(
            f"a{d.examples_id}",
            "artifact",
            "Examples",
            [f"#{d.examples_id} span {d.span}", f"sha256 {(d.fingerprint or '?')[:12]}"],
            highlight=True,
        )
        g.edge(f"raw{d.examples_id}", f"a{d.examples_id}")
    for u in s.models:
        g.add(
            f"m{u.model_id}",
            "artifact",
            "Model",
            [
                f"#{u.model_id} run {u.trained_in_run}",
                f"spans {','.join(str(x) for x in u.spans)}",
                f"blessed {_yes(u.blessed)}",
                "pushed " + (",".join(u.pushed_versions) if u.pushed else "no"),
            ],
        )
        for d in s.data:
            g.edge(f"a{d.examples_id}", f"m{u.model_id}")
    return g


CHAR_W = 7.0  # px per character of the 12 px monospace font
LINE_H = 15
PAD = 8
COL_GAP = 60
ROW_GAP = 18
_FILL = {"artifact": "#e8f1fb", "execution": "#fff4dd", "file": "#eeeeee"}
_STROKE = {"artifact": "#3b73b9", "execution": "#c98a00", "file": "#777777"}


@dataclass
class Box:
    node: GraphNode
    x: float
    y: float
    w: float
    h: float


def layout(
    g: Graph, measure: Callable[[str], float] | None = None
) -> tuple[list[Box], float, float]:
    """Left-to-right layers: a node's column is the longest path to it from a source."""
    measure = measure or (lambda text: len(text) * CHAR_W)
    preds: dict[str, list[str]] = defaultdict(list)
    for a, b in g.edges:
        if a in g.nodes and b in g.nodes:
            preds[b].append(a)
    rank: dict[str, int] = {}

    def rank_of(key: str, stack: frozenset = frozenset()) -> int:
        if key not in rank:
            ps = [p for p in preds.get(key, []) if p not in stack]
            rank[key] = 1 + max((rank_of(p, stack | {key}) for p in ps), default=-1)
        return rank[key]

    for key in g.nodes:
        rank_of(key)
    columns: dict[int, list[GraphNode]] = defaultdict(list)
    for key, node in g.nodes.items():
        columns[rank[key]].append(node)
    boxes: list[Box] = []
    x = PAD * 2
    height = 0.0
    top = 40.0  # room for the title
    for col in sorted(columns):
        nodes = columns[col]
        width = max(measure(t) for n in nodes for t in [n.title, *n.lines]) + 2 * PAD
        y = top
        for n in nodes:
            h = LINE_H * (1 + len(n.lines)) + PAD
            boxes.append(Box(n, x, y, width, h))
            y += h + ROW_GAP
        height = max(height, y)
        x += width + COL_GAP
    return boxes, max(x - COL_GAP + PAD * 2, measure(g.title) + 4 * PAD), height + PAD


def to_svg(g: Graph) -> str:
    boxes, width, height = layout(g)
    at = {b.node.key: b for b in boxes}
    esc = html.escape
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="DejaVu Sans Mono, Menlo, '
        'Consolas, monospace" font-size="12">',
        f"<title>{esc(g.title)}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
        f'<rect width="100%" height="100%" fill="white"/>'
        f'<text x="{PAD * 2}" y="24" font-size="14" font-weight="bold">{esc(g.title)}</text>',
    ]
    for a, b in g.edges:
        if a not in at or b not in at:
            continue
        s, t = at[a], at[b]
        x1, y1 = s.x + s.w, s.y + s.h / 2
        x2, y2 = t.x, t.y + t.h / 2
        mid = (x1 + x2) / 2
        out.append(
            f'<path d="M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" '
            'fill="none" stroke="#555" stroke-width="1.2" marker-end="url(#arrow)"/>'
        )
    for box in boxes:
        n = box.node
        stroke = "#c0392b" if n.highlight else _STROKE[n.kind]
        rx = 10 if n.kind == "execution" else 2
        out.append(
            f'<g><rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" '
            f'rx="{rx}" fill="{_FILL[n.kind]}" stroke="{stroke}" '
            f'stroke-width="{3 if n.highlight else 1.2}"/>'
        )
        ty = box.y + LINE_H
        out.append(
            f'<text x="{box.x + PAD:.1f}" y="{ty:.1f}" font-weight="bold">{esc(n.title)}</text>'
        )
        for line in n.lines:
            ty += LINE_H
            out.append(f'<text x="{box.x + PAD:.1f}" y="{ty:.1f}">{esc(line)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def to_html(g: Graph, details: str = "") -> str:
    esc = html.escape
    return (
        "<!doctype html>\n<html><head><meta charset='utf-8'>"
        f"<title>{esc(g.title)}</title>"
        "<style>body{font-family:sans-serif;margin:1.5em}pre{background:#f6f6f6;padding:1em;"
        "overflow:auto}.graph{overflow:auto;border:1px solid #ddd}</style></head><body>"
        f"<h1 style='font-size:1.2em'>{esc(g.title)}</h1><div class='graph'>{to_svg(g)}</div>"
        + (f"<h2 style='font-size:1em'>Details</h2><pre>{esc(details)}</pre>" if details else "")
        + "</body></html>\n"
    )


def to_dot(g: Graph) -> str:
    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    out = [
        "digraph lineage {",
        "  rankdir=LR;",
        f"  label={q(g.title)}; labelloc=t;",
        '  node [fontname="monospace", fontsize=10];',
    ]
    for n in g.nodes.values():
        shape = {"artifact": "box", "execution": "box, style=rounded", "file": "note"}[n.kind]
        color = ', color="red", penwidth=3' if n.highlight else ""
        label = "\\n".join([n.title, *n.lines]).replace('"', '\\"')
        out.append(f'  {q(n.key)} [shape={shape}, label="{label}"{color}];')
    for a, b in g.edges:
        if a in g.nodes and b in g.nodes:
            out.append(f"  {q(a)} -> {q(b)};")
    out.append("}")
    return "\n".join(out) + "\n"


def to_png(g: Graph, path: str) -> None:
    from PIL import Image, ImageDraw, ImageFont

    try:
        font = ImageFont.load_default(size=12)
    except TypeError:  # Pillow < 10.1
        font = ImageFont.load_default()
    measure = font.getlength
    boxes, width, height = layout(g, measure)
    at = {b.node.key: b for b in boxes}
    img = Image.new("RGB", (int(width) + 1, int(height) + 1), "white")
    d = ImageDraw.Draw(img)
    d.text((PAD * 2, 12), g.title, fill="black", font=font)
    for a, b in g.edges:
        if a in at and b in at:
            s, t = at[a], at[b]
            x1, y1, x2, y2 = s.x + s.w, s.y + s.h / 2, t.x, t.y + t.h / 2
            d.line([(x1, y1), ((x1 + x2) / 2, y1), ((x1 + x2) / 2, y2), (x2, y2)], fill="#555")
            d.polygon([(x2, y2), (x2 - 7, y2 - 4), (x2 - 7, y2 + 4)], fill="#555")
    for box in boxes:
        n = box.node
        d.rounded_rectangle(
            [box.x, box.y, box.x + box.w, box.y + box.h],
            radius=8 if n.kind == "execution" else 2,
            fill=_FILL[n.kind],
            outline="#c0392b" if n.highlight else _STROKE[n.kind],
            width=3 if n.highlight else 1,
        )
        ty = box.y + 4
        for i, line in enumerate([n.title, *n.lines]):
            d.text((box.x + PAD, ty), line, fill="black" if i else "#000040", font=font)
            ty += LINE_H
    img.save(path, format="PNG")


GRAPH_FORMATS = (".svg", ".html", ".htm", ".dot", ".gv", ".png")


def write_graph(g: Graph, path: str, details: str = "") -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext not in GRAPH_FORMATS:
        raise LineageError(
            f"--graph {path}: unknown format '{ext or '(none)'}'; use .svg, .html, .dot or .png"
        )
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise LineageError(f"--graph {path}: folder {parent} does not exist")
    if ext == ".png":
        to_png(g, path)
        return path
    text = {".svg": to_svg, ".dot": to_dot, ".gv": to_dot}.get(ext)
    content = text(g) if text else to_html(g, details)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)
    return path
