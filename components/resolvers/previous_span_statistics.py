"""The drift baseline: the previous span's statistics (and Examples), resolved from ML Metadata.

The validation gate (components/validation/gate.py) compares this run's
statistics with those of the highest earlier span of the same data folder;
`PreviousSpanStatisticsStrategy` finds them for the pipeline's resolver node
(pipeline/definition.py), `tfxp` reads the same links for its reports.
"""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx.dsl.components.common import resolver
from tfx.types import standard_artifacts

from components.base.custom_properties import custom_int, custom_str

# The resolver's input and output keys, and the span property ExampleGen records.
EXAMPLES_KEY = "examples"
STATISTICS_KEY = "statistics"
SPAN_PROPERTY = "span"


def statistics_sources(store: Any, statistics_ids: list[int]) -> dict[int, int]:
    """Statistics artifact id -> id of the Examples its StatisticsGen execution read."""
    from ml_metadata.proto import metadata_store_pb2

    if not statistics_ids:
        return {}
    producer = {
        e.artifact_id: e.execution_id
        for e in store.get_events_by_artifact_ids(statistics_ids)
        if e.type == metadata_store_pb2.Event.OUTPUT
    }
    read: dict[int, int] = {}
    for e in store.get_events_by_execution_ids(sorted(set(producer.values()))):
        if e.type == metadata_store_pb2.Event.INPUT:
            read.setdefault(e.execution_id, e.artifact_id)
    return {s: read[x] for s, x in producer.items() if x in read}


def previous_span(
    examples: list[types.Artifact],
    statistics: list[types.Artifact],
    sources: dict[int, int],
    current_span: int,
    input_base: str | None = None,
) -> tuple[list[types.Artifact], list[types.Artifact]]:
    """([Examples], [statistics]) of the highest span below `current_span`, or ([], []).

    Among that span's ingestions (versions, re-ingested content) the newest
    that has statistics; its newest statistics.
    """
    stats_of: dict[int, types.Artifact] = {}
    for s in sorted(statistics, key=lambda a: a.id):
        if s.id in sources:
            stats_of[sources[s.id]] = s  # the newest wins
    candidates = []
    for e in examples:
        span = custom_int(e, SPAN_PROPERTY)
        if span is None or span >= current_span or e.id not in stats_of:
            continue
        base = custom_str(e, "input_base")
        if input_base and base is not None and base != input_base:
            continue
        candidates.append(((span, custom_int(e, "version") or 0, e.id), e))
    if not candidates:
        return [], []
    best = max(candidates, key=lambda c: c[0])[1]
    return [best], [stats_of[best.id]]


class PreviousSpanStatisticsStrategy(resolver.ResolverStrategy):
    """The drift baseline. Inputs: `examples` (this run's ExampleGen output) and
    `statistics` (every StatisticsGen output). Outputs, as `examples` and
    `statistics`, the Examples and statistics of the highest span below this
    run's span, from the same data folder; both empty for the first span (the
    gate then records that there is no baseline).

    The earlier spans' Examples are read from the store: a second channel of
    ExampleGen's output beside this run's would be merged with it by the
    compiler.
    """

    def __init__(self, input_base: str = "") -> None:
        self._input_base = input_base or None

    def resolve_artifacts(
        self, store: Any, input_dict: dict[str, list[types.Artifact]]
    ) -> dict[str, list[types.Artifact]] | None:
        current = list(input_dict.get(EXAMPLES_KEY, []))
        spans = [s for s in (custom_int(e, SPAN_PROPERTY) for e in current) if s is not None]
        statistics = list(input_dict.get(STATISTICS_KEY, []))
        if not spans or not statistics:
            return {EXAMPLES_KEY: [], STATISTICS_KEY: []}
        sources = statistics_sources(store, [s.id for s in statistics])
        examples: list[types.Artifact] = []
        for mlmd_artifact in store.get_artifacts_by_id(sorted(set(sources.values()))):
            artifact = standard_artifacts.Examples()
            artifact.set_mlmd_artifact(mlmd_artifact)
            examples.append(artifact)
        found_examples, found_stats = previous_span(
            examples, statistics, sources, max(spans), self._input_base
        )
        return {EXAMPLES_KEY: found_examples, STATISTICS_KEY: found_stats}
