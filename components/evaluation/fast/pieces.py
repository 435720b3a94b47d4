"""The fast Evaluator's per-piece work, shared by its in-process and Beam forms.

The evaluated split's files are cut into pieces as StatisticsGen's fast path cuts them
(components/io/pieces.py `pieces`: a file per piece, or a large file's
interleaved batches). Each piece's batches are scored by every model and added to
its own per-slice accumulators (`piece_found`); the pieces' accumulators are then
merged in piece order (`merged`). The in-process form reads each file once and hands
batch i to piece i mod count (`file_found`); the Beam form
(components/evaluation/fast/on_cluster.py) accumulates each piece in a Spark task. Both
merge the same accumulators in the same order, so they give the same bits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
from tensorflow_model_analysis.evaluators import metrics_plots_and_validations_evaluator as mpv

from components.evaluation.fast.accumulators import SliceAccumulators
from components.evaluation.fast.columns import Columns, subset
from components.evaluation.fast.scoring import ModelScorer
from components.evaluation.fast.slices import SliceFeatures
from components.example_gen.layout import sequential_records
from components.io.pieces import Piece

Batch = tuple[dict[str, Columns], dict[tuple, np.ndarray]]


@dataclass
class Found:
    """Per-slice accumulators over some examples, and the transformed features the
    models' preprocessing functions gave on them (TFMA's slicer would read those)."""

    slices: dict[tuple, SliceAccumulators] = field(default_factory=dict)
    transformed: set[str] = field(default_factory=set)


def add_batch(found: Found, computations: mpv.MetricComputations, batch: Batch) -> None:
    """One batch's columns (per model) into the accumulators of each of its slices."""
    columns, batch_slices = batch
    for key, rows in batch_slices.items():
        if key not in found.slices:
            found.slices[key] = SliceAccumulators(computations)
        found.slices[key].add({name: subset(c, rows) for name, c in columns.items()})


def merged(pieces_found: Iterable[Found]) -> Found:
    """The pieces' accumulators, given in piece order, merged slice by slice."""
    out = Found()
    for each in pieces_found:
        out.transformed |= each.transformed
        for key, accumulators in each.slices.items():
            if key in out.slices:
                out.slices[key].merge(accumulators)
            else:
                out.slices[key] = accumulators
    return out


def _scored(scorers: list[ModelScorer], features: SliceFeatures, piece: Piece) -> Iterator[Batch]:
    """The piece's batches (every batch of its files when it is the whole of them),
    scored by every model, with their slices."""
    records = sequential_records(list(piece.files), piece.compression).batch(piece.batch_size)
    if piece.count > 1:
        records = records.shard(piece.count, piece.index)
    for serialized in records.prefetch(1):
        columns = {scorer.name: scorer.score(serialized) for scorer in scorers}
        yield columns, features.batch_slices(serialized)


def _transformed(scorers: list[ModelScorer]) -> set[str]:
    return {key for scorer in scorers for key in scorer.transformed_keys}


def piece_found(
    scorers: list[ModelScorer],
    features: SliceFeatures,
    computations: mpv.MetricComputations,
    piece: Piece,
) -> Found:
    """One piece's per-slice accumulators (the Beam form's work in one task)."""
    found = Found()
    for batch in _scored(scorers, features, piece):
        add_batch(found, computations, batch)
    found.transformed = _transformed(scorers)
    return found


def file_found(
    scorers: list[ModelScorer],
    features: SliceFeatures,
    computations: mpv.MetricComputations,
    file_pieces: list[Piece],
) -> list[Found]:
    """The accumulators of all pieces of one file from one read of it (the in-process
    form): batch i goes to piece i mod count, as `_scored` shards them."""
    first = file_pieces[0]
    found = [Found() for _ in range(first.count)]
    whole = Piece(first.files, first.compression, 0, 1, first.batch_size)
    for i, batch in enumerate(_scored(scorers, features, whole)):
        add_batch(found[i % first.count], computations, batch)
    for each in found:
        each.transformed = _transformed(scorers)
    return found
