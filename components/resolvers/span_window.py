"""Resolves a rolling window of spans: the newest Examples of each of the last K spans.

TFX 1.16's ExampleGen ingests one span per execution (its input processor
rejects ranges wider than one span), so a model trained on several spans needs
their Examples gathered from ML Metadata. This strategy does that for
Transform (and through it the Trainer), which accept several Examples
artifacts. Per span it takes the highest version, then the newest ingestion
(a span whose content changed is re-ingested; the old artifact stays for
lineage but is not trained on).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from tfx import types
from tfx.dsl.components.base import executor_spec
from tfx.dsl.components.common import resolver
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, component_spec, standard_artifacts

from components.base import component
from components.base.custom_properties import custom_int

EXAMPLES_KEY = "examples"


def _ours(examples: list[types.Artifact]) -> list[types.Artifact]:
    # Written by our ExampleGen driver (not a merged window, not another producer's).
    return [
        a
        for a in examples
        if a.mlmd_artifact.custom_properties.get("content_sha256") is not None
        and a.mlmd_artifact.custom_properties.get("window_spans") is None
    ]


def window_of_spans(
    examples: list[types.Artifact], num_spans: int, end_span: int, input_base: str | None = None
) -> list[types.Artifact]:
    """The newest artifact of each of the `num_spans` newest spans <= `end_span`, oldest first."""
    best: dict[int, types.Artifact] = {}
    for a in _ours(examples):
        recorded = a.mlmd_artifact.custom_properties.get("input_base")
        if input_base and recorded is not None and recorded.string_value != input_base:
            continue
        span = custom_int(a, "span")
        if span is None or span > end_span:
            continue
        key = (custom_int(a, "version") or 0, a.id)
        current = best.get(span)
        if current is None or key > (custom_int(current, "version") or 0, current.id):
            best[span] = a
    spans = sorted(best)[-num_spans:]
    return [best[s] for s in spans]


class SpanWindowStrategy(resolver.ResolverStrategy):
    """Input `examples`: every Examples ExampleGen wrote in this pipeline. Output
    `examples`: the newest of each of the `num_spans` spans ending at `end_span`
    (-1: the newest span ingested, which is this run's when ExampleGen takes the
    latest span), oldest first.

    Fails the run when fewer spans were ingested than the window needs.
    """

    def __init__(self, num_spans: int, end_span: int = -1, input_base: str = "") -> None:
        self._num_spans = int(num_spans)
        self._end_span = int(end_span)
        self._input_base = input_base or None

    def resolve_artifacts(
        self, store: Any, input_dict: dict[str, list[types.Artifact]]
    ) -> dict[str, list[types.Artifact]] | None:
        examples = list(input_dict.get(EXAMPLES_KEY, []))
        end = self._end_span
        if end < 0:
            end = max((custom_int(a, "span") or 0 for a in _ours(examples)), default=0)
        window = window_of_spans(examples, self._num_spans, end, self._input_base)
        if len(window) < self._num_spans:
            raise ValueError(
                f"window of {self._num_spans} spans ending at span {end}: only spans "
                f"{[custom_int(a, 'span') for a in window]} were ingested; ingest the older "
                "spans first (`tfxp run --window K` does)"
            )
        return {EXAMPLES_KEY: window}


# ---------------------------------------------------------------------------
# Transform materializes one output per input Examples artifact only if it is
# given as many output artifacts, which a pipeline node cannot declare; the
# window is therefore presented to it as one Examples artifact whose split
# folders hold every span's shards (hard links: no bytes copied); its node id is
# pipeline.node_ids.SPAN_WINDOW_EXAMPLES.


class SpanWindowExamplesSpec(component_spec.ComponentSpec):
    PARAMETERS: dict = {}
    INPUTS = {EXAMPLES_KEY: component_spec.ChannelParameter(type=standard_artifacts.Examples)}
    OUTPUTS = {"window": component_spec.ChannelParameter(type=standard_artifacts.Examples)}


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another filesystem, or a remote URI
        fileio.copy(src, dst)


class SpanWindowExamplesExecutor(component.Executor):
    def run(self, execution: component.Execution) -> None:
        sources = execution.inputs_of(EXAMPLES_KEY)
        out = execution.output("window")
        split_sets = {tuple(artifact_utils.decode_split_names(a.split_names)) for a in sources}
        if len(split_sets) != 1:
            raise ValueError(f"spans of the window have different splits: {sorted(split_sets)}")
        splits = list(next(iter(split_sets)))
        out.split_names = artifact_utils.encode_split_names(splits)
        for split in splits:
            dest = artifact_utils.get_split_uri([out], split)
            fileio.makedirs(dest)
            for a in sources:
                src_dir = artifact_utils.get_split_uri([a], split)
                span = custom_int(a, "span")
                for name in sorted(fileio.listdir(src_dir)):
                    _link_or_copy(
                        os.path.join(src_dir, name), os.path.join(dest, f"span-{span}-{name}")
                    )
        spans = [custom_int(a, "span") for a in sources]
        out.set_string_custom_property("window_spans", ",".join(str(s) for s in spans))
        out.set_int_custom_property("span", max(s or 0 for s in spans))
        rows = [custom_int(a, "row_count") for a in sources]
        if all(r is not None for r in rows):
            out.set_int_custom_property("row_count", sum(r for r in rows if r is not None))
        h = hashlib.sha256()
        for a in sources:
            if a.mlmd_artifact.custom_properties.get("content_sha256") is not None:
                h.update(a.get_string_custom_property("content_sha256").encode())
        out.set_string_custom_property("content_sha256", h.hexdigest())
        for key in ("file_format", "payload_format"):
            if sources[0].mlmd_artifact.custom_properties.get(key) is not None:
                out.set_string_custom_property(key, sources[0].get_string_custom_property(key))


class SpanWindowExamples(component.Component):
    """One Examples artifact holding the shards of every span in the window."""

    SPEC_CLASS = SpanWindowExamplesSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(SpanWindowExamplesExecutor)
