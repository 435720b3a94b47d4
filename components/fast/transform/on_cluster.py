"""Transform's write of the transformed examples as a Beam pipeline, for runners that hand
work to a cluster.

The in-process write (materialize.py) is a per-batch function: parse a batch of raw
examples, run the transform graph over it, encode and frame the outputs. Here it runs
as Beam steps over pieces of each split's files (components/io/pieces.py: a file per
piece, or a large file's batches interleaved over up to 8 pieces), spread over the
cluster's cores by Create's reshuffle (a Spark task per core's partition, each writing
the pieces it was given). For each piece the transform graph (loaded once per Python
worker from the graph the analysis wrote to the pipeline root) runs over the piece's
batches into its own GZIP TFRecord shard in a staging folder, under a name no other
attempt of the same task uses. The tasks' records (which file each piece wrote, how many examples) meet in one
task through a GroupByKey, which writes them down; Spark passes on the output of one
attempt per task, so that list names exactly one whole file per piece, whatever Spark
retried or ran twice. Only after the pipeline has finished does the driver rename
those files into the split folders (`transformed_examples-<piece>-of-<pieces>.gz`),
then removes the staging folder with whatever other attempts left there: nothing is
in the artifact before that commit.

What the in-process write does not cover (`Uncovered`, found while transforming) is
recorded by the task, not raised: a failing task would be retried by Spark and end the
run with a Java trace. The executor then gives the component to TFX's executor.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import apache_beam as beam
import tensorflow as tf
from absl import logging
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx_bsl.tfxio import tfxio as tfxio_module

from components.fast.transform.materialize import (
    BATCH_SIZE,
    STAGING_DIR,
    SplitJob,
    Transformer,
    Uncovered,
    parsed_batches,
    write_batches,
)
from components.io.pieces import Piece, compression_of, pieces, write_whole

WRITTEN_FILE = "written.json"
# TFX's file names (WriteToTFRecord(<split>/transformed_examples, file_name_suffix=".gz")),
# a shard per piece.
SHARD_NAME = "transformed_examples-{:05d}-of-{:05d}.gz"

# The transform graph, loaded once per Python worker and transform graph (a worker runs
# many tasks, and the graph's load is most of a small piece's cost).
_TRANSFORMERS: dict[str, Transformer] = {}


@dataclass(frozen=True)
class Written:
    """What a piece's task wrote: the file (its attempt's own name) and its examples."""

    path: str
    examples: int
    column_wise: bool


# What a task gives: its file, or why the fast path cannot go on.
Outcome = Written | str


class _WritePiece(beam.DoFn):
    """(split, n, piece) -> (None, (split, n, the piece's file or why it stopped))."""

    def __init__(
        self,
        transform_fn_dir: str,
        transformed_schema: schema_pb2.Schema,
        tfxio: tfxio_module.TFXIO,
        staging: str,
    ) -> None:
        self._transform_fn_dir = transform_fn_dir
        self._transformed_schema = transformed_schema
        self._tfxio = tfxio
        self._staging = staging

    def setup(self) -> None:
        self._setup_error: str | None = None
        transformer = _TRANSFORMERS.get(self._transform_fn_dir)
        if transformer is None:
            try:
                transformer = Transformer(
                    self._transform_fn_dir, self._transformed_schema, self._tfxio
                )
            except Uncovered as uncovered:
                self._setup_error = str(uncovered)
                return
            _TRANSFORMERS[self._transform_fn_dir] = transformer
        self._transformer = transformer

    def process(
        self, numbered: tuple[str, int, Piece]
    ) -> Iterator[tuple[None, tuple[str, int, Outcome]]]:
        split, number, piece = numbered
        if self._setup_error is not None:
            yield None, (split, number, self._setup_error)
            return
        folder = os.path.join(self._staging, split)
        tf.io.gfile.makedirs(folder)
        # This attempt's own name: a retried or speculative attempt writes beside it.
        path = os.path.join(folder, f"piece-{number:05d}-{uuid.uuid4().hex}.gz")
        transformer = self._transformer
        shard = (piece.index, piece.count)
        batches = parsed_batches(list(piece.files), transformer.parser, shard, piece.batch_size)
        try:
            examples = write_batches(batches, transformer, path)
        except Uncovered as uncovered:
            yield None, (split, number, str(uncovered))
            return
        yield None, (split, number, Written(path, examples, transformer.column_wise))


class _Record(beam.DoFn):
    """Every piece's outcome -> one JSON file at `path` (written whole, then renamed into
    place: a retried task rewrites it from the same outcomes)."""

    def __init__(self, path: str) -> None:
        self._path = path

    def process(self, keyed: tuple[None, Iterable[tuple[str, int, Outcome]]]) -> None:
        outcomes = sorted(keyed[1], key=lambda o: (o[0], o[1]))
        stopped = [outcome for _, _, outcome in outcomes if isinstance(outcome, str)]
        record = {
            "stopped": stopped[0] if stopped else None,
            "written": [
                [split, number, o.path, o.examples, o.column_wise]
                for split, number, o in outcomes
                if isinstance(o, Written)
            ],
        }
        write_whole(self._path, json.dumps(record).encode())


def _units(jobs: list[SplitJob], batch_size: int) -> list[tuple[str, int, Piece]]:
    """(split, n, piece) for every piece of every split, n counting each split's pieces."""
    units = []
    for job in jobs:
        cut = pieces(job.files, compression_of(job.files, Uncovered), batch_size)
        units += [(job.name, number, piece) for number, piece in enumerate(cut)]
    return units


def _commit(jobs: list[SplitJob], units: list, record: dict) -> dict[str, int]:
    """Each piece's file renamed into its split folder; the examples per split."""
    if record["stopped"]:
        raise Uncovered(record["stopped"])
    written = {(split, number): (path, n) for split, number, path, n, _ in record["written"]}
    expected = {(split, number) for split, number, _ in units}
    if set(written) != expected:  # a task's outcome lost: never commit part of a split
        raise RuntimeError(f"pieces written {sorted(written)}, expected {sorted(expected)}")
    counts: dict[str, int] = {}
    for job in jobs:
        numbers = sorted(number for split, number in written if split == job.name)
        tf.io.gfile.makedirs(job.output_dir)
        for number in numbers:
            path, examples = written[(job.name, number)]
            target = os.path.join(job.output_dir, SHARD_NAME.format(number, len(numbers)))
            tf.io.gfile.rename(path, target, overwrite=True)
            counts[job.name] = counts.get(job.name, 0) + examples
    return counts


def materialize_on_cluster(
    pipeline: beam.Pipeline,
    jobs: list[SplitJob],
    transform_fn_dir: str,
    transformed_schema: schema_pb2.Schema,
    root: str,
    batch_size: int | None = None,
) -> dict[str, int]:
    """Every split transformed by one run of `pipeline` into a staging folder under
    `root`, then committed into its split folder; returns the examples per split."""
    if not jobs:
        return {}
    # One graph for all splits: TFX reads every split with the same schema.
    if any(not job.tfxio.ArrowSchema().equals(jobs[0].tfxio.ArrowSchema()) for job in jobs):
        raise Uncovered("splits read with different schemas")
    staging = os.path.join(root, STAGING_DIR)
    path = os.path.join(staging, WRITTEN_FILE)
    units = _units(jobs, batch_size or BATCH_SIZE)
    write = _WritePiece(transform_fn_dir, transformed_schema, jobs[0].tfxio, staging)
    try:
        _ = (
            pipeline
            # Create's reshuffle spreads the pieces over the workers.
            | "Pieces" >> beam.Create(units)
            | "Transform" >> beam.ParDo(write)
            | "Gather" >> beam.GroupByKey()
            | "Record" >> beam.ParDo(_Record(path))
        )
        pipeline.run().wait_until_finish()
        with tf.io.gfile.GFile(path) as recorded:
            record = json.load(recorded)
        counts = _commit(jobs, units, record)
        logging.info(
            "Transform: transformed examples encoded %s, %d pieces on the cluster",
            "column-wise" if all(w[4] for w in record["written"]) else "by tfx_bsl's encoder",
            len(units),
        )
    finally:
        if tf.io.gfile.exists(staging):
            tf.io.gfile.rmtree(staging)
    return counts
