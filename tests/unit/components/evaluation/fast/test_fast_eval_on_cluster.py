"""The fast Evaluator as a Beam pipeline (components/evaluation/fast/on_cluster.py): on
beam_spark under local[2] it gives the in-process form's metrics and plots on the same
rows (bit for bit), and the executor runs it, not TFMA's pipeline, under the Spark
runner. The model is a small SavedModel built here (a logistic score of two features)."""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from spark_local import SPARK_ARGS, local_spark, taxi_examples
from tensorflow_model_analysis.metrics import metric_types
from tfx.components.evaluator import executor as tfx_evaluator
from tfx.dsl.components.base import base_beam_executor
from tfx.types import standard_artifacts

from beam_spark.runner import SparkRunner
from components.evaluation.fast import executor, metrics, on_cluster, pieces, slices
from components.evaluation.fast.scoring import ModelScorer
from components.example_gen.layout import Layout
from components.io import pieces as file_pieces_module

ROWS = 300


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local[2] SparkContext the runner reuses (the one running in this process, if any)."""
    with local_spark("fast-eval") as context:
        yield context


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> tuple[Any, Layout]:
    """The ingest's examples of the embedded taxi sample: an eval split of two GZIP files."""
    return taxi_examples(
        tmp_path_factory.mktemp("examples"), {"eval": [ROWS // 3, ROWS - ROWS // 3]}
    )


class _Model(tf.Module):
    """A logistic score of trip miles and fare; the label is a tip over 20% of the fare."""

    def _floats(self, serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        spec = {
            n: tf.io.FixedLenFeature([], tf.float32, 0.0) for n in ("trip_miles", "fare", "tips")
        }
        return tf.io.parse_example(serialized, spec)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        f = self._floats(examples)
        return {"outputs": tf.sigmoid(0.3 * f["trip_miles"] - 0.05 * f["fare"] + 0.2)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        f = self._floats(examples)
        return {"tipped_xf": tf.cast(f["tips"] > 0.2 * f["fare"], tf.float32)}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Any:
    """A Model artifact whose Format-Serving folder holds the SavedModel."""
    artifact = standard_artifacts.Model()
    artifact.uri = str(tmp_path_factory.mktemp("model"))
    module = _Model()
    signatures = {"serving_default": module.serve, "transform_features": module.transform}
    tf.saved_model.save(module, os.path.join(artifact.uri, "Format-Serving"), signatures)
    return artifact


def _config() -> tfma.EvalConfig:
    config = tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                model_type=tfma.constants.TF_GENERIC,
                label_key="tipped_xf",
                preprocessing_function_names=["transform_features"],
            )
        ],
        slicing_specs=[tfma.SlicingSpec(), tfma.SlicingSpec(feature_keys=["payment_type"])],
        metrics_specs=[
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(class_name=name)
                    for name in ("ExampleCount", "AUC", "BinaryAccuracy", "CalibrationPlot")
                ]
            )
        ],
    )
    return tfma.utils.update_eval_config_with_defaults(config, rubber_stamp=True)


def _plain(evaluated: executor.Evaluated) -> str:
    """Every slice's metrics and plots, as comparable text (protos as JSON)."""

    def text(value: Any) -> str:
        if hasattr(value, "DESCRIPTOR"):
            return json_format.MessageToJson(value, sort_keys=True)
        return repr(np.asarray(value).tolist()) if isinstance(value, np.ndarray) else repr(value)

    return (
        "\n".join(
            f"{key} {metric_key} {text(value)}"
            for key, found in evaluated.sliced
            for metric_key, value in sorted(found.items(), key=lambda kv: str(kv[0]))
        )
        + f"\n{sorted(evaluated.counts.items())}"
    )


@pytest.fixture()
def small_pieces(monkeypatch):
    """Pieces of 2 KB: the test's files (several KB each) are cut into several."""
    monkeypatch.setattr(file_pieces_module, "PIECE_BYTES", 2048)


@pytest.mark.timeout(300)
def test_beam_form_on_spark_equals_the_in_process_form(
    spark, examples, model, tmp_path, small_pieces
):
    """Small batches and pieces: every piece scores several batches in a Spark task of
    its own, and the pieces' accumulators merge in piece order, as in process."""
    artifact, layout = examples
    config = _config()
    assert executor.fast_path_refusal(config) is None
    path = os.path.join(model.uri, "Format-Serving")
    files = sorted(tf.io.gfile.glob(os.path.join(artifact.uri, "Split-eval", "*")))
    cut = file_pieces_module.pieces(files, "GZIP", batch_size=16)
    assert len(cut) > len(files)
    found = on_cluster.evaluate_pieces(
        beam.Pipeline(runner=SparkRunner(spark_context=spark)),
        cut,
        config,
        [path],
        {},
        layout,
        str(tmp_path / "staging"),
    )
    features = slices.SliceFeatures(config, {}, layout)
    scorers = [ModelScorer(config.model_specs[0], path)]
    computations = metrics.computations(config)
    in_process = pieces.merged(
        each
        for _, file_pieces in itertools.groupby(cut, key=lambda p: p.files)
        for each in pieces.file_found(scorers, features, computations, list(file_pieces))
    )
    ours, expected = (
        executor.finish(config, f.slices, features.ordered) for f in (found, in_process)
    )
    assert expected.counts[()] == ROWS and len(expected.counts) > 2
    assert any(
        isinstance(k, metric_types.PlotKey) for _, found in expected.sliced for k in found
    ), "no plot compared"
    assert _plain(ours) == _plain(expected)
    # And merging pieces changes no metric beyond float rounding of the sums.
    one_piece = pieces.piece_found(
        scorers,
        features,
        computations,
        file_pieces_module.Piece(tuple(files), "GZIP", batch_size=16),
    )
    whole = executor.finish(config, one_piece.slices, features.ordered)
    for (key, values), (other_key, other) in zip(whole.sliced, ours.sliced, strict=True):
        assert key == other_key
        for metric_key, value in values.items():
            if isinstance(value, float):
                assert other[metric_key] == pytest.approx(value, rel=1e-9, nan_ok=True)


def _run(tmp_path: Path, artifact: Any, model: Any, args: list[str]) -> str:
    evaluation = standard_artifacts.ModelEvaluation()
    evaluation.uri = str(tmp_path / "evaluation")
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(tmp_path / "blessing")
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=args, tmp_dir=str(tmp_path / "tmp"), unique_id="1"
    )
    executor.Executor(context).Do(
        {"examples": [artifact], "model": [model]},
        {"evaluation": [evaluation], "blessing": [blessing]},
        {
            "eval_config": json_format.MessageToJson(_config()),
            "example_splits": '["eval"]',
        },
    )
    return evaluation.uri


def _written(uri: str) -> list[str]:
    metrics_found = [json_format.MessageToJson(m, sort_keys=True) for m in tfma.load_metrics(uri)]
    plots_found = [json_format.MessageToJson(p, sort_keys=True) for p in tfma.load_plots(uri)]
    return metrics_found + plots_found


@pytest.mark.timeout(300)
def test_executor_runs_the_beam_form_under_the_spark_runner(
    spark, examples, model, tmp_path, caplog, monkeypatch
):
    artifact, _ = examples

    def tfma_path(*args: Any) -> None:
        raise AssertionError("TFMA's executor ran")

    monkeypatch.setattr(tfx_evaluator.Executor, "Do", tfma_path)
    with caplog.at_level(logging.INFO, logger="beam_spark.runner"):
        on_spark = _run(tmp_path / "spark", artifact, model, SPARK_ARGS)
    assert "Spark jobs" in caplog.text  # the runner ran the fast path's pipeline
    in_process = _run(tmp_path / "local", artifact, model, [])
    found, expected = _written(on_spark), _written(in_process)
    assert len(expected) > 4 and '"calibrationHistogramBuckets"' in "".join(expected)
    assert found == expected
