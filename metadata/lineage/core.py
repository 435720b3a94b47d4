"""The store's view every lineage query starts from: executions by node and run, cached
artifacts and events, producers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ml_metadata.proto import metadata_store_pb2 as pb

from metadata.lineage.records import (
    INPUT_EVENTS,
    MAX_HOPS,
    OUTPUT_EVENTS,
    RESOLVER_TYPE,
    STATE_NAMES,
)
from metadata.properties import event_key, prop
from metadata.store import LineageError

BATCH = 500  # ids per ML Metadata call when reading many at once


class LineageCore:
    """One pipeline's executions, runs and artifacts in an ML Metadata store, with the cached
    look-ups every query shares (metadata.lineage.Lineage adds the queries by subject)."""

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
        arts = self.artifacts(sorted({e.artifact_id for e in events if e.type in OUTPUT_EVENTS}))
        return [a for a in arts if type_name is None or self.type_of(a) == type_name]

    def state(self, execution: pb.Execution) -> str:
        if self.exec_type(execution) == RESOLVER_TYPE:
            return "resolved"
        return STATE_NAMES.get(execution.last_known_state, "unknown")

    def producer(self, artifact_id: int) -> pb.Execution | None:
        """The execution that wrote an artifact (not the cached re-uses of it)."""
        events = self.events_of_artifacts([artifact_id])[artifact_id]
        writers = [
            self.executions[e.execution_id]
            for e in events
            if e.type in OUTPUT_EVENTS and e.execution_id in self.executions
        ]
        complete = [w for w in writers if w.last_known_state == pb.Execution.COMPLETE]
        chosen = sorted(complete or writers, key=lambda w: w.id)
        return chosen[0] if chosen else None

    def _consumers(self, artifact_id: int, key: str) -> list[pb.Execution]:
        events = self.events_of_artifacts([artifact_id])[artifact_id]
        ids = {e.execution_id for e in events if e.type in INPUT_EVENTS and event_key(e) == key}
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

    # -- a long-lived reader (the console) ------------------------------------

    def prefetch(self, run_ids: list[str]) -> None:
        """Reads the events and output artifacts of these runs' executions, and the events
        of the models among them, in a few batched calls: what `run_info`, `blessing` and
        `pushes` then ask one run at a time is already in the caches."""
        execs = [e.id for r in run_ids for e in self.runs.get(r, [])]
        for i in range(0, len(execs), BATCH):
            self.events_of_executions(execs[i : i + BATCH])
        events = self.events_of_executions(execs)
        outputs = sorted(
            {ev.artifact_id for evs in events.values() for ev in evs if ev.type == pb.Event.OUTPUT}
        )
        for i in range(0, len(outputs), BATCH):
            self.artifacts(outputs[i : i + BATCH])
        models = [a.id for a in self.artifacts(outputs) if self.type_of(a) == "Model"]
        for i in range(0, len(models), BATCH):
            self.events_of_artifacts(models[i : i + BATCH])

    def absorb(self, changed: list[tuple[pb.Execution, str | None, str | None]]) -> None:
        """Adds new and updated executions to the runs, in place: (execution, its node
        context's name, its pipeline_run context's name), as
        metadata.store_changes.executions_since lists them.

        Keeps what `__init__` builds (executions, node_of, run_of, runs in id order,
        runs ordered by their first execution) as if it were built now, without
        reading every run's executions again; drops the cached events, which new
        executions add to (a new run reads old artifacts too).
        """
        prefix = self.pipeline + "."
        for ex, node, run_id in changed:
            if not node or not node.startswith(prefix) or not run_id:
                continue
            self.executions[ex.id] = ex
            self.node_of[ex.id] = node[len(prefix) :]
            self.run_of[ex.id] = run_id
            execs = [e for e in self.runs.get(run_id, []) if e.id != ex.id] + [ex]
            self.runs[run_id] = sorted(execs, key=lambda e: e.id)
        self.runs = dict(sorted(self.runs.items(), key=lambda kv: kv[1][0].id))
        self._events_by_exec.clear()
        self._events_by_art.clear()
