"""Lineage queries about runs: which runs there are, what each ran or re-used."""

from __future__ import annotations

from ml_metadata.proto import metadata_store_pb2 as pb

from metadata.lineage.core import LineageCore
from metadata.lineage.records import (
    ComponentRun,
    RunInfo,
    iso_time,
)
from metadata.properties import prop
from metadata.store import LineageError
from pipeline.node_ids import (
    EXAMPLE_GENS,
    TRAINER,
)


class RunQueries(LineageCore):
    """Lineage queries about runs: which runs there are, what each ran or re-used. (a part of metadata.lineage.Lineage, whose other
    parts' methods it may call)."""

    def run_execution(self, run_id: str, node_id: str) -> pb.Execution | None:
        found = [e for e in self.runs.get(run_id, []) if self.node_of.get(e.id) == node_id]
        return found[-1] if found else None

    def run_example_gen(self, run_id: str) -> pb.Execution | None:
        """The run's ExampleGen execution, whichever kind (CSV or images) ingested its data."""
        found = [e for e in self.runs.get(run_id, []) if self.node_of.get(e.id) in EXAMPLE_GENS]
        return found[-1] if found else None

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
        info = RunInfo(run_id, iso_time(start), round((end - start) / 1000, 1), status, comps)
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

    def runs_touching(self, artifact_id: int) -> list[str]:
        """The runs that wrote, re-used (cached) or read an artifact."""
        events = self.events_of_artifacts([artifact_id])[artifact_id]
        return sorted(
            {self.run_of[e.execution_id] for e in events if e.execution_id in self.run_of}
        )
