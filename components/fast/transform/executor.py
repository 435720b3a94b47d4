"""Transform's executor: TFX's analysis, then the transformed examples written in-process.

TFX's Transform runs one Beam pipeline: tf.Transform's analysis over the analyze
splits, then `TransformDataset` over every transform split, encoded and written by
Beam's Python TFRecord sink. This executor runs TFX's own executor for the
analysis alone (the same call with no transformed-examples output: TFX then
writes only the transform graph), and writes the transformed examples itself
(`materialize.py`): TensorFlow's C++ reader and parser, tf.Transform's own graph
state, the examples encoded column-wise when every output is one number per
example (else by tf.Transform's Arrow converter and tfx_bsl's encoder), framed and
GZIP-compressed by the CSV ingest's writer, on batches of 8,192. For examples whose
layout the ingest recorded, the analysis reads them through `source.py` (whole
files decoded by TensorFlow) instead of Beam's record-by-record source.

It covers TFX's defaults as this project runs them: tf.Example payloads in GZIP
TFRecords, statistics disabled, the TF1 transform graph (force_tf_compat_v1),
one examples artifact, any splits config. Anything else runs TFX's executor
unchanged, as do Beam runners that do not run in this machine's processes, except
the project's Spark runner: there TFX's analysis runs on the cluster, reading the
ingest's files by pieces, and the write runs as a Beam pipeline of one task per piece
(`on_cluster.py`). The run log says which path ran.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

import tensorflow as tf
import tensorflow_transform as tft
from absl import logging
from tfx.components.transform import executor as tfx_transform
from tfx.components.transform import executor_utils
from tfx.components.util import examples_utils, tfxio_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils
from tfx_bsl.tfxio import tf_example_record

from components.base.local_beam import cluster_runner, runner_refusal
from components.example_gen.layout import Layout, layout_of
from components.fast.transform.materialize import SplitJob, Uncovered, materialize
from components.fast.transform.on_cluster import materialize_on_cluster
from components.fast.transform.source import LayoutTFExampleRecord

KEYS = standard_component_specs
_TELEMETRY = ["FastTransform"]


def _refusal(input_dict, output_dict, exec_properties) -> str | None:
    """Why the in-process writing cannot promise TFX's output here, or None."""
    if not exec_properties.get(KEYS.DISABLE_STATISTICS_KEY):
        return "pre- and post-transform statistics"
    if exec_properties.get(KEYS.STATS_OPTIONS_UPDATER_FN_KEY):
        return "a statistics options updater"
    if not output_dict.get(KEYS.TRANSFORMED_EXAMPLES_KEY):
        return "no transformed examples to write"
    if not exec_properties.get(KEYS.FORCE_TF_COMPAT_V1_KEY):
        return "TF2 transform graphs (force_tf_compat_v1=False)"
    examples = input_dict[KEYS.EXAMPLES_KEY]
    if len(examples) != 1 or len(output_dict[KEYS.TRANSFORMED_EXAMPLES_KEY]) != 1:
        return "several examples artifacts"
    payload, data_view = tfxio_utils.resolve_payload_format_and_data_view_uri(examples)
    if payload != example_gen_pb2.FORMAT_TF_EXAMPLE or data_view:
        return f"payload format {example_gen_pb2.PayloadFormat.Name(payload)}"
    file_format = examples_utils.get_file_format(examples[0])
    if file_format != tfx_transform.labels.FORMAT_TFRECORD:
        return f"file format {file_format}"
    return None


def _jobs(input_dict, output_dict, exec_properties) -> list[SplitJob]:
    """One job per transform split, with the TFXIO TFX's executor would read it with."""
    examples = input_dict[KEYS.EXAMPLES_KEY]
    splits = executor_utils.ResolveSplitsConfig(
        exec_properties.get(KEYS.SPLITS_CONFIG_KEY), examples
    ).transform
    schema_file = io_utils.get_only_uri_in_dir(
        artifact_utils.get_single_uri(input_dict[KEYS.SCHEMA_KEY])
    )
    schema = io_utils.SchemaReader().read(schema_file)
    transformed = output_dict[KEYS.TRANSFORMED_EXAMPLES_KEY]
    executor_utils.SetSplitNames(splits, transformed)
    jobs = []
    for split in splits:
        pattern = io_utils.all_files_pattern(artifact_utils.get_split_uri(examples, split))
        files = sorted(tf.io.gfile.glob(pattern))
        if not files:
            raise Uncovered(f"no example files for split {split!r} ({pattern})")
        tfxio = tfxio_utils.make_tfxio(
            file_pattern=pattern,
            file_format=examples_utils.get_file_format(examples[0]),
            telemetry_descriptors=_TELEMETRY,
            payload_format=example_gen_pb2.FORMAT_TF_EXAMPLE,
            schema=schema,
        )
        output_dir = artifact_utils.get_split_uri(transformed, split)
        jobs.append(SplitJob(split, files, tfxio, output_dir))
    return jobs


def _empty_outputs(output_dict) -> None:
    """What the fast path wrote into this execution's own output folders, removed."""
    for artifacts in output_dict.values():
        for artifact in artifacts:
            if not tf.io.gfile.isdir(artifact.uri):
                continue
            for child in tf.io.gfile.listdir(artifact.uri):
                path = os.path.join(artifact.uri, child.rstrip("/"))
                if tf.io.gfile.isdir(path):
                    tf.io.gfile.rmtree(path)
                else:
                    tf.io.gfile.remove(path)


@contextlib.contextmanager
def _analysis_reading_by(layout: Layout | None, by_pieces: bool) -> Iterator[None]:
    """TFX's executor, while inside, reading examples of `layout` through `source.py`
    (`by_pieces`: large files cut into pieces, on a cluster).

    TFX's `Executor.Do` builds its Beam pipeline in a `TransformProcessor` made from
    the module's name, so the processor is swapped there for this call only (one
    Transform runs per process)."""
    stock_processor = getattr(tfx_transform, "TransformProcessor", None)
    if layout is None or stock_processor is None:  # None: a TFX that renamed it
        yield
        return
    used: list[str] = []

    class LayoutProcessor(stock_processor):  # type: ignore[valid-type,misc]  # found at run time
        def _CreateTFXIO(self, dataset, schema):  # TFX's name
            tfxio = super()._CreateTFXIO(dataset, schema)
            if type(tfxio) is not tf_example_record.TFExampleRecord:
                return tfxio
            refusal = LayoutTFExampleRecord.covers(schema, layout)
            if refusal:
                logging.info("Transform: analysis reads through TFX's source (%s)", refusal)
                return tfxio
            used.append(dataset.file_pattern)
            return LayoutTFExampleRecord(
                dataset.file_pattern, schema, layout, tfxio.telemetry_descriptors, by_pieces
            )

    tfx_transform.TransformProcessor = LayoutProcessor  # type: ignore[misc]  # swapped for this call
    try:
        yield
    finally:
        tfx_transform.TransformProcessor = stock_processor  # type: ignore[misc]
    if used:
        logging.info("Transform: the analysis read the examples by their layout")


class Executor(tfx_transform.Executor):
    """TFX's Transform executor, with the transformed examples written by the fast path:
    in this process, or by its Beam form on the project's Spark runner."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # TFX's name
        started = time.perf_counter()
        args = self._beam_pipeline_args
        # On the project's Spark runner the analysis and the write run there.
        on_spark = cluster_runner(args)
        refusal = (None if on_spark else runner_refusal(args, single_process=False)) or _refusal(
            input_dict, output_dict, exec_properties
        )
        if refusal is None:
            try:
                self._fast(input_dict, output_dict, exec_properties, on_spark)
            except Uncovered as uncovered:
                refusal = str(uncovered)
                # TFX's executor renames its graph into place, onto an empty folder only.
                _empty_outputs(output_dict)
            else:
                logging.info(
                    "Transform: fast path%s, %.1f s",
                    " (its Beam form on the cluster)" if on_spark else "",
                    time.perf_counter() - started,
                )
                return
        logging.info("Transform: TFX path (fast path does not cover: %s)", refusal)
        super().Do(input_dict, output_dict, exec_properties)

    def _fast(self, input_dict, output_dict, exec_properties, on_spark: bool) -> None:
        jobs = _jobs(input_dict, output_dict, exec_properties)
        analysis_outputs = {
            k: v for k, v in output_dict.items() if k != KEYS.TRANSFORMED_EXAMPLES_KEY
        }
        started = time.perf_counter()
        # TFX's own analysis: without a transformed-examples output it writes the
        # transform graph and materializes nothing (on the cluster under Spark).
        layout = layout_of(artifact_utils.get_single_instance(input_dict[KEYS.EXAMPLES_KEY]))
        with _analysis_reading_by(layout, by_pieces=on_spark):
            super().Do(input_dict, analysis_outputs, exec_properties)
        analysed = time.perf_counter()
        output = tft.TFTransformOutput(
            artifact_utils.get_single_uri(output_dict[KEYS.TRANSFORM_GRAPH_KEY])
        )
        root = artifact_utils.get_single_uri(output_dict[KEYS.TRANSFORMED_EXAMPLES_KEY])
        graph, schema = output.transform_savedmodel_dir, output.transformed_metadata.schema
        if on_spark:
            pipeline = self._make_beam_pipeline()
            counts = materialize_on_cluster(pipeline, jobs, graph, schema, root)
        else:
            counts = materialize(jobs, graph, schema, root)
        logging.info(
            "Transform: analysis (TFX) %.1f s, transformed examples %s %.1f s: %s",
            analysed - started,
            "on the cluster" if on_spark else "in-process",
            time.perf_counter() - analysed,
            ", ".join(f"{split} {n:,}" for split, n in counts.items()),
        )
