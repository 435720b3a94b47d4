"""components.fast.transform: when the fast path runs, and that it feeds the transform
graph the tensors TFX's TensorAdapter would.

The whole executor against TFX's is in tests/e2e/test_fast_transform_e2e.py (taxi)
and tests/e2e/test_image_e2e.py (digits).
"""

from __future__ import annotations

import logging
import random

import numpy as np
import pytest
import tensorflow as tf
from tfx.components.transform import executor as tfx_transform
from tfx.dsl.components.base import base_beam_executor
from tfx.types import standard_artifacts

from components.fast.transform import executor
from components.fast.transform.materialize import _feed_value, parsed_batches
from pipeline.config import PROJECT_ROOT

SCHEMA = PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt"


def _artifacts(tmp_path, file_format: str | None = None):
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    examples.split_names = '["train", "eval"]'
    if file_format:
        examples.set_string_custom_property("file_format", file_format)
    schema = standard_artifacts.Schema()
    schema.uri = str(SCHEMA.parent)
    transformed = standard_artifacts.Examples()
    transformed.uri = str(tmp_path / "transformed")
    graph = standard_artifacts.TransformGraph()
    graph.uri = str(tmp_path / "graph")
    inputs = {"examples": [examples], "schema": [schema]}
    outputs = {"transform_graph": [graph], "transformed_examples": [transformed]}
    return inputs, outputs


PIPELINE_PROPERTIES = {
    "preprocessing_fn": "trainer.taxi.preprocessing.preprocessing_fn",
    "force_tf_compat_v1": 1,
    "disable_statistics": 1,
}


def test_the_pipelines_transform_is_covered(tmp_path):
    inputs, outputs = _artifacts(tmp_path)
    assert executor._refusal(inputs, outputs, PIPELINE_PROPERTIES) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"disable_statistics": 0}, "statistics"),
        ({"force_tf_compat_v1": 0}, "TF2"),
        ({"stats_options_updater_fn": "m.f"}, "statistics options updater"),
    ],
)
def test_options_it_does_not_cover_go_to_tfx(tmp_path, change, reason):
    inputs, outputs = _artifacts(tmp_path)
    refusal = executor._refusal(inputs, outputs, {**PIPELINE_PROPERTIES, **change})
    assert refusal and reason in refusal


def test_parquet_and_no_materialization_go_to_tfx(tmp_path):
    inputs, outputs = _artifacts(tmp_path, file_format="parquet")
    assert "file format parquet" in executor._refusal(inputs, outputs, PIPELINE_PROPERTIES)
    inputs, outputs = _artifacts(tmp_path)
    del outputs["transformed_examples"]
    assert "no transformed examples" in executor._refusal(inputs, outputs, PIPELINE_PROPERTIES)


def test_a_remote_runner_runs_tfxs_executor_unchanged(tmp_path, monkeypatch, caplog):
    calls = []
    monkeypatch.setattr(tfx_transform.Executor, "Do", lambda self, *args: calls.append(args))
    inputs, outputs = _artifacts(tmp_path)
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=["--runner=DataflowRunner"], tmp_dir=str(tmp_path), unique_id="1"
    )
    # On absl's own logger: an earlier test in the worker may have lowered absl's
    # verbosity, which filters INFO before any handler (caplog's too) sees it.
    with caplog.at_level(logging.INFO, logger="absl"):
        executor.Executor(context).Do(inputs, outputs, dict(PIPELINE_PROPERTIES))
    assert calls == [(inputs, outputs, PIPELINE_PROPERTIES)]
    assert (
        "Transform: TFX path (fast path does not cover: Beam runner DataflowRunner" in caplog.text
    )


def _taxi_examples(rows: int) -> list[bytes]:
    """Taxi-like examples; optional features are left out of some rows."""
    rng = random.Random(0)
    out = []
    for i in range(rows):
        feature = {
            "fare": tf.train.Feature(float_list=tf.train.FloatList(value=[rng.random() * 50])),
            "tips": tf.train.Feature(float_list=tf.train.FloatList(value=[rng.random() * 9])),
            "trip_miles": tf.train.Feature(float_list=tf.train.FloatList(value=[rng.random()])),
            "payment_type": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"Cash"])),
        }
        for key in ("trip_start_hour", "trip_start_day", "trip_start_month"):
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 7 + 1]))
        feature["trip_start_timestamp"] = tf.train.Feature(
            int64_list=tf.train.Int64List(value=[1_400_000_000 + i])
        )
        if i % 3:
            feature["company"] = tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[b"Co %d" % i])
            )
            feature["pickup_latitude"] = tf.train.Feature(
                float_list=tf.train.FloatList(value=[41.8 + rng.random() / 10])
            )
            feature["trip_seconds"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))
        out.append(
            tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
        )
    return out


def test_parsed_tensors_equal_tfxs_tensor_adapter(tmp_path):
    """parse_example with the TFXIO's parsing config gives the arrays TFX's Arrow
    decoder and TensorAdapter feed the graph: same keys, dtypes, shapes and values,
    missing optional features included."""
    from tfx.components.util import tfxio_utils
    from tfx.proto import example_gen_pb2
    from tfx.utils import io_utils
    from tfx_bsl.coders import example_coder
    from tfx_bsl.tfxio import tensor_adapter

    path = tmp_path / "data.gz"
    serialized = _taxi_examples(300)
    with tf.io.TFRecordWriter(str(path), tf.io.TFRecordOptions(compression_type="GZIP")) as w:
        for record in serialized:
            w.write(record)
    schema = io_utils.SchemaReader().read(str(SCHEMA))
    tfxio = tfxio_utils.make_tfxio(
        file_pattern=str(path),
        file_format="tfrecords_gzip",
        telemetry_descriptors=["test"],
        payload_format=example_gen_pb2.FORMAT_TF_EXAMPLE,
        schema=schema,
    )
    decoder = example_coder.ExamplesToRecordBatchDecoder(
        tfxio._GetSchemaForDecoding().SerializeToString()
    )
    adapter = tensor_adapter.TensorAdapter(tfxio.TensorAdapterConfig())
    expected = adapter.ToBatchTensors(decoder.DecodeBatch(serialized), produce_eager_tensors=False)
    parser, _ = tfxio._GetTfExampleParserConfig()
    [parsed] = list(parsed_batches([str(path)], parser))
    assert parsed.keys() == expected.keys()
    for key, want in expected.items():
        got = _feed_value(parsed[key])
        if isinstance(want, tf.compat.v1.SparseTensorValue):
            for part in ("indices", "values", "dense_shape"):
                a, b = getattr(got, part), getattr(want, part)
                assert a.dtype == b.dtype and np.array_equal(a, b), (key, part)
        else:
            assert got.dtype == want.dtype and got.shape == want.shape, key
            assert np.array_equal(got, want), key
