"""The fast Evaluator as a Beam pipeline, for runners that hand work to a cluster.

Its per-piece work (components/evaluation/fast/pieces.py) runs as Beam steps: each
piece of the eval split is scored by the candidate (and baseline) model and
accumulated per slice in a task of its own; the pieces' accumulators (not examples)
go to one task through a GroupByKey, which merges them in piece order and writes
them, pickled, into a staging folder. The executor reads them back and finishes and
writes the evaluation as the in-process form does, so both give the same bits.

What the fast path does not cover (`Unsupported`, found while scoring) is recorded,
not raised: a failing task would be retried by Spark and end the run with a Java
trace. The executor then gives the component to TFX's executor.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import tensorflow as tf
import tensorflow_model_analysis as tfma

from components.evaluation.fast import metrics
from components.evaluation.fast.columns import Unsupported
from components.evaluation.fast.pieces import Found, merged, piece_found
from components.evaluation.fast.scoring import ModelScorer
from components.evaluation.fast.slices import SliceFeatures
from components.example_gen.layout import Layout
from components.io.pieces import Piece, write_whole

FOUND_FILE = "found.pickle"
# What a task gives: the piece's accumulators, or why the fast path cannot go on.
Outcome = Found | str


class _Accumulate(beam.DoFn):
    """(n, piece) -> (None, (n, the piece's accumulators, or the reason it stopped))."""

    def __init__(
        self,
        eval_config: tfma.EvalConfig,
        model_paths: list[str],
        buckets: dict[str, tuple[float, ...]],
        layout: Layout | None,
    ) -> None:
        self._eval_config = eval_config
        self._model_paths = model_paths
        self._buckets = buckets
        self._layout = layout

    def setup(self) -> None:
        config = self._eval_config
        # Loaded where the task runs: a SavedModel does not travel pickled.
        self._setup_error: str | None = None
        try:
            self._scorers = [
                ModelScorer(spec, path)
                for spec, path in zip(config.model_specs, self._model_paths, strict=True)
            ]
        except Unsupported as unsupported:
            self._setup_error = str(unsupported)
        self._computations = metrics.computations(config)

    def process(self, numbered: tuple[int, Piece]) -> Iterator[tuple[None, tuple[int, Outcome]]]:
        number, piece = numbered
        if self._setup_error is not None:
            yield None, (number, self._setup_error)
            return
        # Slice features keep per-feature state (value tables, types): one per piece.
        features = SliceFeatures(self._eval_config, self._buckets, self._layout)
        try:
            found: Outcome = piece_found(self._scorers, features, self._computations, piece)
        except Unsupported as unsupported:
            found = str(unsupported)
        yield None, (number, found)


class _MergeAndWrite(beam.DoFn):
    """Every piece's accumulators -> merged in piece order, pickled whole to `path` and
    renamed into place (a retried task rewrites the same bytes)."""

    def __init__(self, path: str) -> None:
        self._path = path

    def process(self, keyed: tuple[None, Iterable[tuple[int, Outcome]]]) -> None:
        ordered = [outcome for _, outcome in sorted(keyed[1], key=lambda n: n[0])]
        stopped = [outcome for outcome in ordered if isinstance(outcome, str)]
        result: Outcome = (
            stopped[0] if stopped else merged(o for o in ordered if isinstance(o, Found))
        )
        write_whole(self._path, pickle.dumps(result))


def evaluate_pieces(
    pipeline: beam.Pipeline,
    pieces: list[Piece],
    eval_config: tfma.EvalConfig,
    model_paths: list[str],
    buckets: dict[str, tuple[float, ...]],
    layout: Layout | None,
    staging: str,
) -> Found:
    """Every piece's accumulators merged in piece order, by one run of `pipeline`
    (`model_paths`: each model spec's SavedModel; staged under `staging`)."""
    path = os.path.join(staging, FOUND_FILE)
    _ = (
        pipeline
        # Create's reshuffle spreads the pieces over the workers.
        | "Pieces" >> beam.Create(list(enumerate(pieces)))
        | "Accumulate" >> beam.ParDo(_Accumulate(eval_config, model_paths, buckets, layout))
        | "Gather" >> beam.GroupByKey()
        | "MergeAndWrite" >> beam.ParDo(_MergeAndWrite(path))
    )
    pipeline.run().wait_until_finish()
    if not tf.io.gfile.exists(path):
        raise Unsupported("no examples to evaluate")
    with tf.io.gfile.GFile(path, "rb") as staged:
        result: Any = pickle.loads(staged.read())  # noqa: S301 - written by this run
    if isinstance(result, str):
        raise Unsupported(result)
    return result
