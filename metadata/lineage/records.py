"""What the lineage queries answer with: runs, components, data versions, verdicts, models.

The event and state vocabulary of ML Metadata the queries share is here too.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from ml_metadata.proto import metadata_store_pb2 as pb

STATE_NAMES = {
    pb.Execution.COMPLETE: "executed",
    pb.Execution.CACHED: "cached",
    pb.Execution.FAILED: "failed",
    pb.Execution.RUNNING: "running",
    pb.Execution.NEW: "new",
    pb.Execution.CANCELED: "canceled",
}
RESOLVER_TYPE = "tfx.dsl.components.common.resolver.Resolver"
INPUT_EVENTS = (pb.Event.INPUT, pb.Event.DECLARED_INPUT)
OUTPUT_EVENTS = (pb.Event.OUTPUT, pb.Event.DECLARED_OUTPUT)
# Far enough for ExampleGen -> window -> Transform -> Trainer and the schema.
MAX_HOPS = 24


def iso_time(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).isoformat(timespec="seconds")


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
    # Where these bytes came from and the names they go by (metadata/sources.py).
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
class SpanIngestion:
    """One ingestion of a span: its data version, when, and who used it."""

    data: DataVersion
    uri: str  # the Examples' folder
    ingested_at: str  # ISO time, to the second (local time)
    raw_bytes: int | None
    # The runs that wrote, re-used or read it, and those that trained on it;
    # with `models` only ([] when the models were not looked up).
    runs: list[str] = field(default_factory=list)
    # The models trained on it (None: not looked up, see `SpanQueries.ingested_spans`).
    models: list[ModelUse] | None = None


@dataclass
class IngestedSpan:
    """A span and its ingestions, oldest first (a new version or new content adds one)."""

    span: int
    ingestions: list[SpanIngestion]

    @property
    def models(self) -> list[ModelUse] | None:
        """The models trained on any of its ingestions (None: not looked up)."""
        if any(i.models is None for i in self.ingestions):
            return None
        found = {m.model_id: m for i in self.ingestions for m in i.models or ()}
        return [found[k] for k in sorted(found)]


@dataclass
class Blessing:
    blessed: bool
    blessing_id: int
    baseline_model_id: int | None
    run_id: str | None
    # Why not blessed (components/evaluation/slicing/evaluator.py): failing thresholds and slices.
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
        runs = (lineage.trained_in_run, *lineage.reused_by_runs)
        trained_in = {r for r in runs if r is not None}
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
