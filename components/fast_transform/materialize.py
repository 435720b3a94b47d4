"""Transformed examples written in this process: tf.Transform's own code, no Beam.

tf.Transform's `TransformDataset` over Beam reads each split record by record in
Python (Beam's TFRecord source), decodes batches with tfx_bsl, runs the
transform graph (`_RunMetaGraphDoFn`), converts the outputs to Arrow
(`_convert_to_record_batch`), encodes them with tfx_bsl and writes them record
by record through Beam's Python GZIP sink. Here the same steps run on batches of
8,192 examples: TensorFlow's C++ reader, `tf.io.parse_example` with the TFXIO's
own parsing config in place of the Arrow decoder and TensorAdapter (the same
tensors), tf.Transform's own graph state and Arrow converter called directly,
tfx_bsl's encoder, and TensorFlow's C++ GZIP writer. The transform graph is
applied example by example, so the examples are the ones Beam produces, in
input order.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform import impl_helper
from tensorflow_transform.beam import impl as tft_beam_impl
from tfx_bsl.coders import example_coder
from tfx_bsl.tfxio import tfxio as tfxio_module

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
        parser, tensor_names = tfxio._GetTfExampleParserConfig()  # noqa: SLF001 - its TensorFlowDataset's
        if any(feature != tensor for feature, tensor in tensor_names.items()):
            raise Uncovered("tensor names that differ from their feature names")
        graph_state = tft_beam_impl._RunMetaGraphDoFn._GraphStateCompatV1  # noqa: SLF001 - TFT's own
        self._graph = graph_state(
            transform_fn_dir,
            set(self._config.tensor_representations),
            [],
            tft_beam_impl._FIXED_PARALLELISM_TF_CONFIG,  # noqa: SLF001 - as on Beam's local runners
        )
        # Only the inputs the outputs depend on, as TFT feeds them.
        self.parser = {key: parser[key] for key in self._graph.inputs_tensor_keys}
        self._converter = impl_helper.make_tensor_to_arrow_converter(transformed_schema)
        self._transformed_schema = transformed_schema
        self._encoders = threading.local()  # batches are encoded on two threads

    def _encoder(self) -> example_coder.RecordBatchToExamplesEncoder:
        if not hasattr(self._encoders, "encoder"):
            self._encoders.encoder = example_coder.RecordBatchToExamplesEncoder(
                self._transformed_schema
            )
        return self._encoders.encoder

    def encoded(self, parsed: dict[str, tf.Tensor | tf.SparseTensor]) -> list[bytes]:
        """One batch of parsed raw examples -> serialized transformed examples, same order."""
        feed = [_feed_value(parsed[key]) for key in self._graph.inputs_tensor_keys]
        fetched = self._graph.callable_get_outputs(*feed)
        outputs = dict(zip(self._graph.outputs_tensor_keys, fetched, strict=True))
        out: list[bytes] = []
        for record_batch, unary in tft_beam_impl._convert_to_record_batch(  # noqa: SLF001
            outputs, self._converter, set(), self._config, validate_varlen_sparse_values=False
        ):
            if unary:
                raise Uncovered("pass-through features")
            out.extend(self._encoder().encode(record_batch))
        return out


def _feed_value(value: tf.Tensor | tf.SparseTensor):
    """An eager tensor as TFT's TensorAdapter feeds a TF1 session: numpy or SparseTensorValue."""
    if isinstance(value, tf.SparseTensor):
        return tf.compat.v1.SparseTensorValue(
            value.indices.numpy(), value.values.numpy(), value.dense_shape.numpy()
        )
    return value.numpy()


def parsed_batches(files: list[str], parser: dict) -> Iterator[dict]:
    """The files' examples in order, parsed in batches of BATCH_SIZE by TensorFlow."""
    compressed = {f.endswith(".gz") for f in files}
    if len(compressed) != 1:
        raise Uncovered("a split mixes GZIP and uncompressed files (or has none)")
    dataset = tf.data.TFRecordDataset(
        files, compression_type="GZIP" if compressed.pop() else "", buffer_size=1 << 22
    )
    dataset = dataset.batch(BATCH_SIZE).map(
        lambda serialized: tf.io.parse_example(serialized, parser),
        num_parallel_calls=2,
        deterministic=True,
    )
    try:
        yield from dataset.prefetch(2)
    except tf.errors.InvalidArgumentError as error:
        # TFX's executor reports the bad example in its own words.
        raise Uncovered(f"an example TFX's decoder must judge ({error.message[:200]})") from error


def write_split(job: SplitJob, transformer: Transformer, staging: str) -> int:
    """Transforms one split into `staging`/<split>/; returns its example count."""
    folder = os.path.join(staging, job.name)
    tf.io.gfile.makedirs(folder)
    count = 0
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    # One batch is transformed on a worker thread (the session run leaves the GIL)
    # while the previous one is written.
    with (
        tf.io.TFRecordWriter(os.path.join(folder, OUTPUT_FILE), options) as writer,
        ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool,
    ):
        pending: deque = deque()
        for parsed in parsed_batches(job.files, transformer.parser):
            pending.append(pool.submit(transformer.encoded, parsed))
            if len(pending) >= IN_FLIGHT:
                count += _write(writer, pending.popleft().result())
        while pending:
            count += _write(writer, pending.popleft().result())
    return count


def _write(writer: tf.io.TFRecordWriter, examples: list[bytes]) -> int:
    for example in examples:
        writer.write(example)
    return len(examples)


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
