"""Lineage queries about data: spans, their versions and what was ingested."""

from __future__ import annotations

import datetime as dt
import glob
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ml_metadata.proto import metadata_store_pb2 as pb

from metadata import sources
from metadata.lineage.core import LineageCore
from metadata.lineage.records import (
    DataVersion,
    IngestedSpan,
    ModelUse,
    SpanIngestion,
    SpanLineage,
)
from metadata.properties import json_prop as _json
from metadata.properties import prop
from metadata.store import LineageError
from pipeline.node_ids import (
    EXAMPLE_GENS,
)


class SpanQueries(LineageCore):
    """Lineage queries about data: spans, their versions and what was ingested (a part of
    metadata.lineage.Lineage, whose other parts' methods it may call)."""

    if TYPE_CHECKING:  # the other parts' methods it calls (models.py, runs.py)

        def models_trained_on(self, examples: Sequence[pb.Artifact]) -> list[ModelUse]: ...

        def runs_touching(self, artifact_id: int) -> list[str]: ...

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

    def span_listing(
        self, examples: Iterable[pb.Artifact], *, with_models: int | None = None
    ) -> list[IngestedSpan]:
        """The spans, their ingestions and the models trained on them: the one answer
        `tfxp data list` (tfxp/cli/data.py) and the console's datasets page
        (tfxp/ui/browse.py) both show. `examples`: the ExampleGen outputs to list
        (single-span Examples); newest span first, each span's ingestions oldest
        first. `with_models`: look the models (and runs) up for the newest this many
        spans only, each costing a lineage query per ingestion (None: all)."""
        by_span: dict[int, dict[int, pb.Artifact]] = {}
        for a in examples:
            if prop(a, "span") is not None:
                by_span.setdefault(prop(a, "span"), {})[a.id] = a
        out = []
        for i, span in enumerate(sorted(by_span, reverse=True)):
            look_up = with_models is None or i < with_models
            arts = [by_span[span][k] for k in sorted(by_span[span])]
            out.append(IngestedSpan(span, [self._ingestion(a, look_up) for a in arts]))
        return out

    def _ingestion(self, artifact: pb.Artifact, with_models: bool) -> SpanIngestion:
        ingested = dt.datetime.fromtimestamp(artifact.create_time_since_epoch / 1000)
        ingestion = SpanIngestion(
            data=self.data_version(artifact),
            uri=artifact.uri,
            ingested_at=ingested.isoformat(timespec="seconds"),
            raw_bytes=prop(artifact, "raw_bytes"),
        )
        if with_models:
            ingestion.models = self.models_trained_on([artifact])
            runs = set(self.runs_touching(artifact.id))
            for model in ingestion.models:
                runs.update(model.trained_in)
            ingestion.runs = sorted(runs)
        return ingestion

    def ingested_spans(self) -> list[int]:
        spans: set[int] = set()
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
