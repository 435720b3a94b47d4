"""Browsing a store: what the console (`tfxp ui`) shows, answered through `Lineage`.

A `StoreBrowser` keeps one `Lineage` per pipeline and builds it again only when
the store changed (the newest execution or context moved:
metadata/store_changes.py), so a page over a store of a thousand runs reads
only what it shows. Every question goes to metadata/ (the queries) or reads
a file under an artifact's URI; nothing writes. The files an artifact holds, and
which of them a page may serve, are tfxp/ui/files.py's.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from ml_metadata.proto import metadata_store_pb2 as pb

from metadata.lineage import Lineage
from metadata.lineage.records import RunInfo
from metadata.properties import event_key, prop
from metadata.store import LineageError, StoreLocation, open_store
from metadata.store_changes import (
    artifact_and_events,
    executions_since,
    pipeline_names,
    store_version,
)
from pipeline.node_ids import EXAMPLE_GENS, TRAINER, VALIDATION_GATE

_EVENT_KIND = {
    pb.Event.INPUT: "input",
    pb.Event.DECLARED_INPUT: "input",
    pb.Event.OUTPUT: "output",
    pb.Event.DECLARED_OUTPUT: "output",
}
PAGE_SIZE = 50  # runs per page of the runs page
SPANS_WITH_MODELS = 20  # spans on the datasets page whose models are listed


@dataclass
class RunRow:
    """One line of the runs page."""

    pipeline: str
    dataset: str | None
    info: RunInfo
    status: str  # complete, failed, blocked, running
    metrics: dict[str, float] = field(default_factory=dict)
    blessed: bool | None = None
    pushed: bool | None = None


@dataclass
class Page:
    rows: list[RunRow]
    total: int
    page: int
    pages: int


def dataset_of_pipelines() -> dict[str, str]:
    """Pipeline name -> the dataset file that names it (schema/<NAME>/dataset.yaml)."""
    from pipeline.datasets import dataset_config, dataset_names

    out = {}
    for name in dataset_names():
        try:
            out[dataset_config(name).pipeline_name] = name
        except Exception:  # noqa: BLE001, S112 - a broken dataset file must not take the console down
            continue
    return out


def gate_table(path: str | None) -> dict[str, Any] | None:
    """The gate's findings as a table (tfxp/presentation/gate_table.py, the model
    the terminal's summary renders too); None without its JSON or findings."""
    from tfxp.presentation.gate_table import findings_table, read_result

    result = read_result(path)
    return findings_table(result) if result is not None else None


class StoreBrowser:
    """Read-only questions the console asks, one store, every pipeline in it."""

    def __init__(self, location: StoreLocation, run_dir: str | None = None) -> None:
        self.location = location
        self.run_dir = run_dir
        # Held by each caller for a whole question (the console: per page); reentrant.
        self.lock = threading.RLock()
        self._store = None
        self._version: tuple | None = None
        self._lineages: dict[str, Lineage] = {}
        self._metrics: dict[str, dict[str, float]] = {}
        self.datasets = dataset_of_pipelines()

    # -- the store and its changes -------------------------------------------

    @property
    def store(self):
        if self._store is None:
            self._store = open_store(self.location)
        return self._store

    def refresh(self) -> None:
        """Bring the cached runs up to date if a run wrote to the store since the last look.

        Only what changed is read: the executions updated since then (a run's new
        component, a state going from RUNNING to COMPLETE), added to each pipeline's
        Lineage; the cached events are dropped (a new run reads old artifacts too)."""
        with self.lock:
            version = store_version(self.store)
            if version == self._version:
                return
            since = self._version[0][1] if self._version and self._version[0] else None
            self._version = version
            if since is None or not self._lineages:
                self._lineages.clear()
                return
            changed = executions_since(self.store, since)
            for lin in self._lineages.values():
                lin.absorb(changed)

    def pipelines(self) -> list[str]:
        with self.lock:
            return pipeline_names(self.store)

    def lineage(self, pipeline: str) -> Lineage:
        with self.lock:
            if pipeline not in self._lineages:
                if pipeline not in self.pipelines():
                    raise LineageError(f"no pipeline '{pipeline}' in {self.location.describe()}")
                self._lineages[pipeline] = Lineage(self.store, pipeline, self.location.describe())
            return self._lineages[pipeline]

    # -- runs -----------------------------------------------------------------

    def status(self, lin: Lineage, info: RunInfo) -> str:
        """complete, failed, blocked (by the validation gate) or running."""
        if info.status == "incomplete":
            return "running"
        if info.status == "failed":
            gate = lin.run_execution(info.run_id, VALIDATION_GATE)
            if gate is not None and prop(gate, "gate_decision") == "BLOCK":
                return "blocked"
            return "failed"
        return info.status

    def run_rows(
        self, pipeline: str | None = None, dataset: str | None = None, page: int = 1
    ) -> Page:
        """Newest first, one page; every pipeline unless one is asked for."""
        with self.lock:
            names = self.pipelines()
            if dataset:
                names = [p for p in names if self.datasets.get(p) == dataset]
            if pipeline:
                names = [p for p in names if p == pipeline]
            refs: list[tuple[int, str, str]] = []
            for name in names:
                lin = self.lineage(name)
                refs += [(execs[0].id, name, run) for run, execs in lin.runs.items()]
            refs.sort(reverse=True)
            pages = max(1, -(-len(refs) // PAGE_SIZE))
            page = min(max(1, page), pages)
            chosen = refs[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
            for name in {n for _, n, _ in chosen}:
                self.lineage(name).prefetch([r for _, n, r in chosen if n == name])
            rows = [self.run_row(name, run) for _, name, run in chosen]
            return Page(rows, len(refs), page, pages)

    def run_row(self, pipeline: str, run_id: str) -> RunRow:
        lin = self.lineage(pipeline)
        info = lin.run_info(run_id)
        row = RunRow(pipeline, self.datasets.get(pipeline), info, self.status(lin, info))
        if info.model_id is not None:
            b = lin.blessing(info.model_id)
            row.blessed = bool(b and b.blessed) if b else None
            row.pushed = any(p.pushed for p in lin.pushes(info.model_id))
            row.metrics = self.metrics(lin, info.model_id)
        return row

    def metrics(self, lin: Lineage, model_id: int) -> dict[str, float]:
        """The model's evaluation metrics; {} if it has none or they cannot be read.

        Cached by the evaluation's URI: an artifact's files do not change."""
        evaluation = lin.evaluation(model_id)
        if evaluation is None:
            return {}
        if evaluation.uri not in self._metrics:
            if "://" not in evaluation.uri and not os.path.exists(evaluation.uri):
                return {}  # gone (or on another machine): no TensorFlow import to say so
            try:
                self._metrics[evaluation.uri] = lin.metrics(model_id)
            except LineageError:
                self._metrics[evaluation.uri] = {}
        return self._metrics[evaluation.uri]

    # -- one run --------------------------------------------------------------

    def run_edges(self, lin: Lineage, run_id: str) -> list[tuple[int, int]]:
        """(execution, execution) pairs of one run: the second read what the first wrote
        (or re-used, when cached)."""
        execs = lin.runs[run_id]
        events = lin.events_of_executions([e.id for e in execs])
        writer: dict[int, int] = {}
        for e in execs:
            for ev in events[e.id]:
                if _EVENT_KIND.get(ev.type) == "output":
                    writer[ev.artifact_id] = e.id
        edges = []
        for e in execs:
            for ev in events[e.id]:
                src = writer.get(ev.artifact_id)
                is_input = _EVENT_KIND.get(ev.type) == "input"
                if is_input and src not in (None, e.id) and (src, e.id) not in edges:
                    edges.append((src, e.id))
        return edges

    def skipped(self, lin: Lineage, run_id: str) -> tuple[list[str], list[tuple[str, str]]]:
        """The pipeline's components that this run did not run (a partial run, or those
        after a failure), as other runs recorded them, and the (node, node) edges that
        reach them, from the newest run that ran them. ML Metadata keeps no pipeline
        definition per run, so a component no run ever ran is not known."""
        mine = {lin.node_of[e.id] for e in lin.runs[run_id]}
        missing = sorted(set(lin.node_of.values()) - mine)
        if not missing:
            return [], []
        for other in reversed(lin.runs):
            nodes = {lin.node_of[e.id] for e in lin.runs[other]}
            if other != run_id and set(missing) <= nodes:
                pairs = [(lin.node_of[a], lin.node_of[b]) for a, b in self.run_edges(lin, other)]
                return missing, [(a, b) for a, b in pairs if a in missing or b in missing]
        return missing, []

    def gate(self, lin: Lineage, run_id: str) -> dict[str, Any] | None:
        """The validation gate's decision, findings and report of a run (None: never reached)."""
        ex = lin.run_execution(run_id, VALIDATION_GATE)
        if ex is None:
            return None
        out: dict[str, Any] = {"execution_id": ex.id, "state": lin.state(ex)}
        if prop(ex, "gate_decision"):
            report = prop(ex, "gate_report")
            out.update(
                decision=prop(ex, "gate_decision"),
                findings=prop(ex, "gate_findings"),
                report=None,
                report_execution=ex.id if report else None,
                # The gate writes its result as JSON beside the report.
                table=gate_table(report[: -len(".html")] + ".json" if report else None),
            )
            return out
        results = lin.outputs(ex.id)
        if results:
            a = results[0]
            out.update(
                decision=prop(a, "decision"),
                findings=prop(a, "findings"),
                artifact_id=a.id,
                # None when the gate never wrote it (a legacy launcher registers the
                # output before the executor runs, and a blocked gate writes nothing).
                report="report.html"
                if os.path.isfile(os.path.join(a.uri, "report.html"))
                else None,
                table=gate_table(os.path.join(a.uri, "findings.json")),
            )
        return out

    def reports_dir(self) -> str | None:
        """The run directory's reports/ (SQLite stores: next to metadata.sqlite)."""
        if self.location.is_mysql or not self.location.sqlite_path:
            return None
        return os.path.join(os.path.dirname(self.location.sqlite_path), "reports")

    def state_dir(self) -> str | None:
        """The run directory's local state (SQLite stores: the folder of metadata.sqlite)."""
        if self.location.is_mysql or not self.location.sqlite_path:
            return None
        return os.path.dirname(self.location.sqlite_path)

    def data_roots(self, lin: Lineage) -> list[str]:
        """The data folders a pipeline's ExampleGens read (their `input_base`), sorted."""
        roots = set()
        for ex in lin.executions.values():
            if lin.node_of.get(ex.id) in EXAMPLE_GENS and prop(ex, "input_base"):
                roots.add(str(prop(ex, "input_base")))
        return sorted(roots)

    def log_path(self, run_id: str) -> str | None:
        """Where the local runner wrote this run's log (SQLite stores: logs/ next to it)."""
        if self.location.is_mysql or not self.location.sqlite_path:
            return None
        return os.path.join(os.path.dirname(self.location.sqlite_path), "logs", f"{run_id}.log")

    # -- executions and artifacts ----------------------------------------------

    def find_execution(self, execution_id: int) -> tuple[Lineage, pb.Execution]:
        for name in self.pipelines():
            lin = self.lineage(name)
            if execution_id in lin.executions:
                return lin, lin.executions[execution_id]
        raise LineageError(f"no execution {execution_id} in {self.location.describe()}")

    def find_artifact(self, artifact_id: int) -> tuple[Lineage, pb.Artifact]:
        """The artifact and a Lineage of a pipeline that wrote or read it."""
        with self.lock:
            artifact, events = artifact_and_events(self.store, artifact_id)
            if artifact is None:
                raise LineageError(f"no artifact {artifact_id} in {self.location.describe()}")
            names = self.pipelines()
            for name in names:
                lin = self.lineage(name)
                if any(ev.execution_id in lin.executions for ev in events):
                    return lin, lin.artifact(artifact_id)
            if not names:
                raise LineageError(f"{self.location.describe()} holds no pipeline runs yet")
            lin = self.lineage(names[0])
            return lin, lin.artifact(artifact_id)

    def artifact_events(self, lin: Lineage, artifact_id: int) -> list[dict[str, Any]]:
        """Who wrote and read an artifact: execution, node, run, direction, key."""
        out = []
        for ev in lin.events_of_artifacts([artifact_id])[artifact_id]:
            ex = lin.executions.get(ev.execution_id)
            out.append(
                {
                    "execution_id": ev.execution_id,
                    "node": lin.node_of.get(ev.execution_id, "?"),
                    "run": lin.run_of.get(ev.execution_id),
                    "state": lin.state(ex) if ex is not None else "?",
                    "kind": _EVENT_KIND.get(ev.type, "?"),
                    "key": event_key(ev),
                }
            )
        return sorted(out, key=lambda e: (e["kind"] != "output", e["execution_id"]))

    def execution_artifacts(self, lin: Lineage, execution_id: int) -> list[dict[str, Any]]:
        events = lin.events_of_executions([execution_id])[execution_id]
        arts = {a.id: a for a in lin.artifacts(ev.artifact_id for ev in events)}
        out = []
        for ev in events:
            a = arts.get(ev.artifact_id)
            if a is not None:
                out.append(
                    {
                        "artifact_id": a.id,
                        "type": lin.type_of(a),
                        "kind": _EVENT_KIND.get(ev.type, "?"),
                        "key": event_key(ev),
                        "uri": a.uri,
                    }
                )
        return sorted(out, key=lambda x: (x["kind"] != "input", x["key"], x["artifact_id"]))

    def trainer_of(self, lin: Lineage, model_id: int) -> pb.Execution | None:
        ex = lin.producer(model_id)
        return ex if ex is not None and lin.node_of.get(ex.id) == TRAINER else None

    def input_wait(self, lin: Lineage, model_id: int) -> dict[str, Any] | None:
        """The Trainer's input-wait figures (input_wait.json in its ModelRun artifact)."""
        ex = self.trainer_of(lin, model_id)
        if ex is None:
            return None
        for run in lin.outputs(ex.id, "ModelRun"):
            path = os.path.join(run.uri, "input_wait.json")
            try:
                with open(path, encoding="utf-8") as f:
                    return json.load(f)
            except (OSError, ValueError):
                continue
        return None

    def training_curves(self, lin: Lineage, model_id: int) -> dict[str, Any]:
        """The Trainer's TensorBoard scalars (its ModelRun's tensorboard/ folder):
        {run folder: {tag: [(epoch, value)]}}, empty when it wrote none."""
        from runtime.training_curves import read_curves
        from trainer.curves import TENSORBOARD_DIR

        ex = self.trainer_of(lin, model_id)
        if ex is None:
            return {}
        for run in lin.outputs(ex.id, "ModelRun"):
            curves = read_curves(os.path.join(run.uri, TENSORBOARD_DIR))
            if curves:
                return curves
        return {}

    def model_read_by(self, lin: Lineage, artifact_id: int, node: str) -> int | None:
        """The Model that `node` (the Evaluator, the Pusher) read when it wrote this artifact."""
        ex = lin.producer(artifact_id)
        if ex is None or lin.node_of.get(ex.id) != node:
            return None
        for ev in lin.events_of_executions([ex.id])[ex.id]:
            if _EVENT_KIND.get(ev.type) == "input" and event_key(ev) == "model":
                return ev.artifact_id
        return None

    # -- datasets -------------------------------------------------------------

    def dataset_spans(
        self, lin: Lineage, with_models: int = SPANS_WITH_MODELS
    ) -> list[dict[str, Any]]:
        """Every ingested span of a pipeline, newest first: its data versions, and for
        the newest `with_models` spans the models trained on it (each costs a lineage
        query per model; older spans link to their lineage page instead)."""
        lin.prefetch(list(lin.runs))
        # The ExampleGens' outputs already read (what span_examples() asks per span
        # with a filter query); the listing is the CLI's too (`tfxp data list`).
        examples = [
            a
            for ex in lin.executions.values()
            if lin.node_of[ex.id] in EXAMPLE_GENS
            for a in lin.outputs(ex.id, "Examples")
        ]
        return [
            {"span": s.span, "data": [i.data for i in s.ingestions], "models": s.models}
            for s in lin.span_listing(examples, with_models=with_models)
        ]

    # -- the runs' metrics over time --------------------------------------------

    def metric_series(self, lin: Lineage) -> dict[str, list[dict[str, Any]]]:
        """metric -> [{run, span(s), value}] over the pipeline's runs, oldest first."""
        series: dict[str, list[dict[str, Any]]] = {}
        lin.prefetch(list(lin.runs))
        for run in lin.runs:
            info = lin.run_info(run)
            if info.model_id is None:
                continue
            for name, value in self.metrics(lin, info.model_id).items():
                if name.endswith("_diff"):
                    continue
                series.setdefault(name, []).append(
                    {
                        "run": run,
                        "started": info.started,
                        "spans": ",".join(str(s) for s in info.spans),
                        "value": value,
                    }
                )
        return series
