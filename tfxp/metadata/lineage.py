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
  `version` (TFX), `content_sha256`, `input_base`, `row_count`,
  `unlabelled_rows_dropped` (our ExampleGen; older stores have TFX's
  `input_fingerprint` only); the file pattern is ExampleGen's resolved
  `input_config` exec property;
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
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ml_metadata.proto import metadata_store_pb2 as pb

from pipeline.node_ids import (
    EVALUATOR,
    EXAMPLE_GENS,
    PUSHER,
    SCHEMA_IMPORTER,
    TRAINER,
    TRANSFORM,
)
from tfxp.metadata import aliases, sources
from tfxp.metadata.properties import json_prop as _json
from tfxp.metadata.properties import prop
from tfxp.metadata.store import LineageError

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
    # Where these bytes came from and the names they go by (tfxp/metadata/sources.py).
    origins: list[dict[str, Any]] = field(default_factory=list)
    # Rows ExampleGen left out for a blank or unparseable label (None: not recorded).
    unlabelled_dropped: int | None = None

    @property
    def rows_text(self) -> str:
        rows = f"{self.rows if self.rows is not None else '?'} rows"
        if self.unlabelled_dropped:
            rows += f" ({self.unlabelled_dropped} without a label dropped)"
        return rows


@dataclass
class Blessing:
    blessed: bool
    blessing_id: int
    baseline_model_id: int | None
    run_id: str | None
    # Why not blessed (components/slicing/evaluator.py): failing thresholds and slices.
    message: str | None = None


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
    # Registry alias changes that gave this model an alias or took one from it.
    aliases: list[dict[str, Any]] = field(default_factory=list)

    @property
    def spans(self) -> list[int]:
        return sorted({d.span for d in self.data if d.span is not None})

    @property
    def pushed(self) -> bool:
        return any(p.pushed for p in self.pushes)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["spans"] = self.spans
        out["pushed"] = self.pushed
        out["blessed"] = bool(self.blessing and self.blessing.blessed)
        return out


@dataclass
class ModelUse:
    """A model trained on some data: what `lineage data` and `data list` show of it."""

    model_id: int
    trained_in_run: str | None
    spans: list[int]
    blessed: bool
    baseline_model_id: int | None
    pushed: bool
    pushed_versions: list[str]
    uri: str = ""
    trained_in: list[str] = field(default_factory=list)  # the run, and runs that re-used it
    pushed_to: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, lineage: ModelLineage) -> ModelUse:
        b = lineage.blessing
        pushes = [p for p in lineage.pushes if p.pushed]
        trained_in = {lineage.trained_in_run, *lineage.reused_by_runs} - {None}
        return cls(
            model_id=lineage.model_id,
            trained_in_run=lineage.trained_in_run,
            spans=lineage.spans,
            blessed=bool(b and b.blessed),
            baseline_model_id=b.baseline_model_id if b else None,
            pushed=lineage.pushed,
            pushed_versions=[p.version or "" for p in pushes],
            uri=lineage.model_uri,
            trained_in=sorted(trained_in),
            pushed_to=list(dict.fromkeys(p.destination for p in pushes if p.destination)),
        )


@dataclass
class SpanLineage:
    pipeline: str
    span: int
    data: list[DataVersion]
    models: list[ModelUse]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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
        self._add_legacy_runs()
        # Chronological: by the first execution of each run.
        self.runs = dict(sorted(self.runs.items(), key=lambda kv: kv[1][0].id))
        self._artifacts: dict[int, pb.Artifact] = {}
        self._events_by_exec: dict[int, list[pb.Event]] = {}
        self._events_by_art: dict[int, list[pb.Event]] = {}
        # Each model's walk to its data (model_lineage), for lineage_report.model_graph.
        self._walks: dict[int, list[tuple[pb.Execution, list[tuple[int, str]], list[int]]]] = {}

    def _add_legacy_runs(self) -> None:
        """Runs of TFX's legacy launcher (the Airflow DAG runner's): it records no `node`
        or `pipeline_run` contexts but `run` contexts named `<pipeline>.<run id>`, and
        names the component in the execution property `component_id`."""
        prefix = self.pipeline + "."
        for ctx in self.store.get_contexts_by_type("run"):
            if not ctx.name.startswith(prefix):
                continue
            run_id = ctx.name[len(prefix) :]
            mine = [
                e
                for e in self.store.get_executions_by_context(ctx.id)
                if e.id not in self.node_of and prop(e, "component_id")
            ]
            for e in mine:
                self.node_of[e.id] = prop(e, "component_id")
                self.executions[e.id] = e
                self.run_of[e.id] = run_id
            if mine:
                self.runs[run_id] = sorted(mine, key=lambda e: e.id)

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

    def run_example_gen(self, run_id: str) -> pb.Execution | None:
        """The run's ExampleGen execution, whichever kind (CSV or images) ingested its data."""
        found = [e for e in self.runs.get(run_id, []) if self.node_of.get(e.id) in EXAMPLE_GENS]
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
        gen = self.run_example_gen(run_id)
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
        span = prop(examples, "span")
        origins = (
            sources.of_content(self.store, base, span, fingerprint)
            if base and span is not None
            else []
        )
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
            origins=[{**o.to_dict(), "describe": o.describe()} for o in origins],
            unlabelled_dropped=prop(examples, "unlabelled_rows_dropped"),
        )

    def _is_raw_examples(self, artifact: pb.Artifact) -> bool:
        gen = self.producer(artifact.id)
        return (
            self.type_of(artifact) == "Examples"
            and gen is not None
            and (self.node_of.get(gen.id) in EXAMPLE_GENS or "ExampleGen" in self.exec_type(gen))
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
        held = aliases.current(self.store, self.pipeline, ref)
        if held is not None:  # a registry alias: champion, challenger, ...
            model = self.artifact(held.model_id)
            if model is not None:
                return model
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
            message=prop(b, "blessing_message") or None,
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

    def model_lineage(self, model: pb.Artifact, *, with_metrics: bool = True) -> ModelLineage:
        steps, by_node, raw, writers = self._producers_upstream(model)
        self._walks[model.id] = steps
        schema_exec, transform_exec = by_node.get(SCHEMA_IMPORTER), by_node.get(TRANSFORM)
        trainer_exec = by_node.get(TRAINER)
        reused = sorted(
            {self.run_of[x] for x in writers if x in self.run_of}
            - {self.run_of.get(trainer_exec.id) if trainer_exec else None}
        )
        schema: dict[str, Any] = {}
        if schema_exec is not None:
            schema_art = [a for a in self.outputs(schema_exec.id, "Schema")]
            schema = {
                "content_sha256": prop(schema_exec, "content_sha256"),
                "file": prop(schema_exec, "schema_file"),
                "schema_id": schema_art[0].id if schema_art else None,
            }
        lineage = ModelLineage(
            pipeline=self.pipeline,
            model_id=model.id,
            model_uri=model.uri,
            created=_iso(model.create_time_since_epoch),
            trained_in_run=self.run_of.get(trainer_exec.id) if trainer_exec else None,
            reused_by_runs=reused,
            data=[self.data_version(a) for a in sorted(raw, key=lambda a: a.id)],
            schema=schema,
            transform=self._component_facts(transform_exec),
            trainer=self._component_facts(trainer_exec),
            blessing=self.blessing(model.id),
            metrics=self.metrics(model.id) if with_metrics else {},
            pushes=self.pushes(model.id),
            aliases=[
                c.to_dict()
                for c in aliases.history(self.store, self.pipeline)
                if model.id in (c.model_id, c.previous_model_id)
            ],
        )
        return lineage

    def _producers_upstream(self, model: pb.Artifact):
        """Walks producers from the model back to ExampleGen's Examples: (steps,
        {node id: execution} for the schema import, Transform and the Trainer,
        the raw Examples, the executions that wrote the model: its run and cached re-uses)."""
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

        steps: list[tuple[pb.Execution, list[tuple[int, str]], list[int]]] = []
        seen_art: set[int] = set()
        seen_exec: set[int] = set()
        frontier = [model.id]
        raw: list[pb.Artifact] = []
        by_node: dict[str, pb.Execution] = {}
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
            if node in EXAMPLE_GENS or "ExampleGen" in self.exec_type(ex):
                raw.extend(self.artifacts([aid]))
            elif node in (SCHEMA_IMPORTER, TRANSFORM) or (node == TRAINER and aid == model.id):
                by_node[node] = ex
        return steps, by_node, raw, writers.get(model.id, [])

    def producer_steps(
        self, model: pb.Artifact
    ) -> list[tuple[pb.Execution, list[tuple[int, str]], list[int]]]:
        """The executions from the model back to its data: (execution, inputs, outputs)."""
        if model.id not in self._walks:
            self._walks[model.id] = self._producers_upstream(model)[0]
        return self._walks[model.id]

    def metrics(self, model_id: int) -> dict[str, float]:
        evaluation = self.evaluation(model_id)
        if evaluation is None:
            return {}
        from tfxp.metadata.summary import read_eval_metrics

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
        from ml_metadata.metadata_store import metadata_store

        found = []
        for node in EXAMPLE_GENS:  # CSV or image datasets: either ExampleGen ingests spans
            query = (
                f"type = 'Examples' AND custom_properties.span.int_value = {int(span)}"
                f" AND contexts_a.type = 'node' AND contexts_a.name = '{self.pipeline}.{node}'"
            )
            found += self.store.get_artifacts(
                list_options=metadata_store.ListOptions(filter_query=query)
            )
        if not found:  # legacy (Airflow) runs have no node contexts to filter by
            found = [
                a
                for ex in self.executions.values()
                if self.node_of[ex.id] in EXAMPLE_GENS
                for a in self.outputs(ex.id, "Examples")
                if prop(a, "span") == span
            ]
            found = list({a.id: a for a in found}.values())
        found = [a for a in found if version is None or prop(a, "version") == version]
        for a in found:
            self._artifacts.setdefault(a.id, a)
        return sorted(found, key=lambda a: a.id)

    def ingested_spans(self) -> list[int]:
        spans = set()
        for ex in self.executions.values():
            if self.node_of[ex.id] in EXAMPLE_GENS:
                spans.update(prop(a, "span") for a in self.outputs(ex.id, "Examples"))
        return sorted(spans - {None})

    def span_lineage(self, span: int, version: int | None = None) -> SpanLineage:
        examples = self.span_examples(span, version)
        if not examples:
            spans = ", ".join(str(s) for s in self.ingested_spans()) or "none"
            raise LineageError(
                f"span {span}{'' if version is None else f' version {version}'} was never "
                f"ingested by pipeline '{self.pipeline}' in {self.where} (ingested spans: "
                f"{spans}); `tfxp run --span {span}` ingests it"
            )
        uses = self.models_trained_on(examples)
        return SpanLineage(
            pipeline=self.pipeline,
            span=span,
            data=[self.data_version(a) for a in examples],
            models=uses,
        )

    def models_trained_on(self, examples: Sequence[pb.Artifact]) -> list[ModelUse]:
        """The models whose training data includes any of `examples` (ingested Examples)."""
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
            uses.append(ModelUse.of(lineage))
        return uses

    def runs_touching(self, artifact_id: int) -> list[str]:
        """The runs that wrote, re-used (cached) or read an artifact."""
        events = self.events_of_artifacts([artifact_id])[artifact_id]
        return sorted(
            {self.run_of[e.execution_id] for e in events if e.execution_id in self.run_of}
        )


def _quiet_tensorflow() -> None:
    """TFMA's import prints deprecation chatter that would bury a query's answer."""
    import logging
    import warnings

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for category in (FutureWarning, DeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category)
    import tensorflow as tf

    tf.get_logger().setLevel(logging.ERROR)
