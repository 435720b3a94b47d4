"""Transformed examples written in this process: tf.Transform's own code, no Beam.

tf.Transform's `TransformDataset` over Beam reads each split record by record in
Python (Beam's TFRecord source), decodes batches with tfx_bsl, runs the
transform graph (`_RunMetaGraphDoFn`), converts the outputs to Arrow
(`_convert_to_record_batch`), encodes them with tfx_bsl and writes them record
by record through Beam's Python GZIP sink. Here the same steps run on batches of
8,192 examples: TensorFlow's C++ reader, `tf.io.parse_example` with the TFXIO's
own parsing config in place of the Arrow decoder and TensorAdapter (the same
tensors), tf.Transform's own graph state and Arrow converter called directly,
tfx_bsl's encoder, and the CSV ingest's TFRecord framing and GZIP writer (zlib on
its own thread, at the ingest's level). The transform graph is
applied example by example, so the examples are the ones Beam produces, in
input order.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import tensorflow as tf
from absl import logging
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform import impl_helper
from tfx_bsl.coders import example_coder
from tfx_bsl.tfxio import tfxio as tfxio_module

from compat import tft as tft_internals
from compat import tfx_bsl as tfx_bsl_internals
from components.example_gen import tfrecord_shards
from components.example_gen.layout import sequential_records
from components.io.pieces import compression_of

BATCH_SIZE = 8192
# Batches being transformed at once (bounded: a split is never held whole in memory).
IN_FLIGHT = 2
# TFX's file name: WriteToTFRecord(<split>/transformed_examples, file_name_suffix=".gz")
# with the one shard Beam's in-process runner writes.
OUTPUT_FILE = "transformed_examples-00000-of-00001.gz"
STAGING_DIR = ".fast-transform-staging"


class Uncovered(Exception):
    """The in-process transform cannot promise TFX's output: run TFX's executor."""


@dataclass(frozen=True)
class SplitJob:
    """One split to transform: its raw files, TFXIO and the split folder to fill."""

    name: str
    files: list[str]
    tfxio: tfxio_module.TFXIO
    output_dir: str


class Transformer:
    """The transform graph applied as tf.Transform's TransformDataset applies it.

    TFX decodes each batch into Arrow (tfx_bsl) and its TensorAdapter turns the
    columns into tensors. Here `tf.io.parse_example` with the TFXIO's own parsing
    config (the one its `TensorFlowDataset` uses, made for the same tensors) does
    it in TensorFlow's threads, far faster than tfx_bsl's single-threaded decoder. The
    graph, the conversion of its outputs to Arrow and the encoder are tf.Transform's
    and tfx_bsl's own."""

    def __init__(self, transform_fn_dir: str, transformed_schema: schema_pb2.Schema, tfxio):
        self._config = tfxio.TensorAdapterConfig()
        parser, tensor_names = tfx_bsl_internals.tf_example_parser_config(tfxio)
        if any(feature != tensor for feature, tensor in tensor_names.items()):
            raise Uncovered("tensor names that differ from their feature names")
        graph_state = tft_internals.GraphStateCompatV1
        self._graph = graph_state(
            transform_fn_dir,
            set(self._config.tensor_representations),
            [],
            tft_internals.FIXED_PARALLELISM_TF_CONFIG,  # as on Beam's local runners
        )
        # Only the inputs the outputs depend on, as TFT feeds them.
        self.parser = {key: parser[key] for key in self._graph.inputs_tensor_keys}
        self._converter = impl_helper.make_tensor_to_arrow_converter(transformed_schema)
        self._transformed_schema = transformed_schema
        self._encoders = threading.local()  # batches are encoded on two threads
        self._scalars = _scalar_features(transformed_schema, self._graph.outputs_tensor_keys)
        self.column_wise = self._scalars is not None

    def _encoder(self) -> example_coder.RecordBatchToExamplesEncoder:
        if not hasattr(self._encoders, "encoder"):
            self._encoders.encoder = example_coder.RecordBatchToExamplesEncoder(
                self._transformed_schema
            )
        return self._encoders.encoder

    def framed(self, parsed: dict[str, tf.Tensor | tf.SparseTensor]) -> tuple[pa.Buffer, int]:
        """One batch of parsed raw examples -> its transformed examples, TFRecord-framed in
        order, and how many there are."""
        feed = [_feed_value(parsed[key]) for key in self._graph.inputs_tensor_keys]
        fetched = self._graph.callable_get_outputs(*feed)
        outputs = dict(zip(self._graph.outputs_tensor_keys, fetched, strict=True))
        batch = _scalar_batch(outputs, self._scalars) if self._scalars else None
        if batch is not None and self._scalars:
            return tfrecord_shards.framed_buffer(batch, self._scalars), batch.num_rows
        examples = self._encoded(outputs)
        return tfrecord_shards.frame_records(examples), len(examples)

    def _encoded(self, outputs: dict) -> list[bytes]:
        """The graph's outputs for one batch -> serialized examples, by tf.Transform's
        converter and tfx_bsl's encoder."""
        out: list[bytes] = []
        for record_batch, unary in tft_internals.convert_to_record_batch(
            outputs, self._converter, set(), self._config, validate_varlen_sparse_values=False
        ):
            if unary:
                raise Uncovered("pass-through features")
            out.extend(self._encoder().encode(record_batch))
        return out


_SCALAR_KINDS = {schema_pb2.INT: "INT", schema_pb2.FLOAT: "FLOAT"}
# The numpy dtype a scalar output must have to be encoded column-wise (tfx_bsl's
# encoder would convert any other, e.g. float64; those batches take its path).
_SCALAR_DTYPES = {"INT": np.dtype(np.int64), "FLOAT": np.dtype(np.float32)}


def _scalar_features(schema: schema_pb2.Schema, outputs: list[str]) -> dict[str, str] | None:
    """{feature: INT | FLOAT} when every output is one int64 or float32 per example (dense,
    shape [] or [1]): those examples are encoded column-wise by the CSV ingest's encoder."""
    scalars: dict[str, str] = {}
    for feature in schema.feature:
        dims = [d.size for d in feature.shape.dim]
        if feature.type not in _SCALAR_KINDS or not feature.HasField("shape"):
            return None
        if dims not in ([], [1]):
            return None
        scalars[feature.name] = _SCALAR_KINDS[feature.type]
    return scalars if sorted(scalars) == sorted(outputs) else None


def _scalar_batch(outputs: dict, scalars: dict[str, str]) -> pa.RecordBatch | None:
    """The outputs as one flat column each, or None if one is not one value per example."""
    columns, rows = {}, None
    for name, kind in scalars.items():
        value = outputs[name]
        if not isinstance(value, np.ndarray) or value.dtype != _SCALAR_DTYPES[kind]:
            return None
        if value.ndim == 2 and value.shape[1] == 1:
            value = value[:, 0]
        if value.ndim != 1 or (rows is not None and len(value) != rows):
            return None
        rows = len(value)
        columns[name] = pa.array(value)
    return pa.RecordBatch.from_pydict(columns)


def _feed_value(value: tf.Tensor | tf.SparseTensor):
    """An eager tensor as TFT's TensorAdapter feeds a TF1 session: numpy or SparseTensorValue."""
    if isinstance(value, tf.SparseTensor):
        return tf.compat.v1.SparseTensorValue(
            value.indices.numpy(), value.values.numpy(), value.dense_shape.numpy()
        )
    return value.numpy()


def parsed_batches(
    files: list[str], parser: dict, shard: tuple[int, int] = (0, 1), batch_size: int = BATCH_SIZE
) -> Iterator[dict]:
    """The files' examples in order, parsed in batches of `batch_size` by TensorFlow
    (`shard=(i, n)`: only batches i, i + n, ...: a piece, components/io/pieces.py)."""
    dataset = sequential_records(files, compression_of(files, Uncovered)).batch(batch_size)
    index, count = shard
    if count > 1:
        dataset = dataset.shard(count, index)  # the other batches are read, not parsed
    dataset = dataset.map(
        lambda serialized: tf.io.parse_example(serialized, parser),
        num_parallel_calls=2,
        deterministic=True,
    )
    try:
        yield from dataset.prefetch(2)
    except tf.errors.InvalidArgumentError as error:
        # TFX's executor reports the bad example in its own words.
        raise Uncovered(f"an example TFX's decoder must judge ({error.message[:200]})") from error


def write_batches(batches: Iterable[dict], transformer: Transformer, path: str) -> int:
    """Parsed raw batches transformed, in order, into one GZIP TFRecord file at `path`
    (written whole or not at all); returns its example count. The per-batch work of
    both forms: this process's (`write_split`) and the Beam form's tasks (on_cluster.py)."""
    writer = tfrecord_shards.GzipShardWriter(path)
    # One batch is transformed on a worker thread (the session run leaves the GIL)
    # while the previous one is framed here and compressed on the writer's thread.
    try:
        with ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool:
            pending: deque = deque()
            for parsed in batches:
                pending.append(pool.submit(transformer.framed, parsed))
                if len(pending) >= IN_FLIGHT:
                    writer.write(*pending.popleft().result())
            while pending:
                writer.write(*pending.popleft().result())
    except BaseException:
        writer.abort()
        raise
    writer.close()
    return writer.records


def write_split(job: SplitJob, transformer: Transformer, staging: str) -> int:
    """Transforms one split into `staging`/<split>/; returns its example count."""
    folder = os.path.join(staging, job.name)
    tf.io.gfile.makedirs(folder)
    batches = parsed_batches(job.files, transformer.parser)
    return write_batches(batches, transformer, os.path.join(folder, OUTPUT_FILE))


def materialize(
    jobs: list[SplitJob], transform_fn_dir: str, transformed_schema: schema_pb2.Schema, root: str
) -> dict[str, int]:
    """Every split transformed into a staging folder under `root`, then moved into
    its split folder: nothing is published unless all splits were written."""
    if not jobs:
        return {}
    staging = os.path.join(root, STAGING_DIR)
    counts: dict[str, int] = {}
    try:
        # One graph for all splits: TFX reads every split with the same schema.
        transformer = Transformer(transform_fn_dir, transformed_schema, jobs[0].tfxio)
        logging.info(
            "Transform: transformed examples encoded %s",
            "column-wise" if transformer.column_wise else "by tfx_bsl's encoder",
        )
        for job in jobs:
            if not job.tfxio.ArrowSchema().equals(jobs[0].tfxio.ArrowSchema()):
                raise Uncovered("splits read with different schemas")
            counts[job.name] = write_split(job, transformer, staging)
        for job in jobs:
            tf.io.gfile.makedirs(job.output_dir)
            tf.io.gfile.rename(
                os.path.join(staging, job.name, OUTPUT_FILE),
                os.path.join(job.output_dir, OUTPUT_FILE),
                overwrite=True,
            )
    finally:
        if tf.io.gfile.exists(staging):
            tf.io.gfile.rmtree(staging)
    return counts
