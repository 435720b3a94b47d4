"""Transform's fast path on beam_spark (components/fast/transform/on_cluster.py and the
executor's wiring): under local[2] the executor runs TFX's analysis and the Beam form of
the write, never TFX's whole pipeline, and the transformed examples equal what the
in-process write makes with the same transform graph (the same multiset, exactly). The
commit renames exactly one file per piece and nothing else."""

from __future__ import annotations

import logging
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import tensorflow as tf
import tensorflow_transform as tft
from spark_local import SPARK_ARGS, local_spark, taxi_examples
from tfx.components.transform import executor as tfx_transform
from tfx.dsl.components.base import base_beam_executor
from tfx.types import standard_artifacts

from components.fast.transform import executor, on_cluster
from components.fast.transform.materialize import STAGING_DIR, SplitJob, Uncovered, materialize
from components.io import pieces as file_pieces
from pipeline.config import PROJECT_ROOT
from trainer.taxi.preprocessing import fill_in_missing


def small_preprocessing_fn(inputs: dict[str, Any]) -> dict[str, Any]:
    """Two of the taxi preprocessing's analyzers (a mean and variance, a vocabulary): each
    analyzer adds Spark jobs, and the pipeline's whole preprocessing on the cluster is
    the e2e test's (tests/e2e/test_spark_cluster_e2e.py)."""
    fare = tf.cast(fill_in_missing(inputs["fare"]), tf.float32)
    company = fill_in_missing(inputs["company"])
    return {
        "fare_xf": tft.scale_to_z_score(fare),
        "company_xf": tft.compute_and_apply_vocabulary(company, top_k=10, num_oov_buckets=1),
        "tips": tf.cast(fill_in_missing(inputs["tips"]), tf.float32),
    }


PROPERTIES = {
    # This module, as pytest imports it (the test folder is on sys.path).
    "preprocessing_fn": f"{__name__}.small_preprocessing_fn",
    "force_tf_compat_v1": 1,
    "disable_statistics": 1,
}


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local[2] SparkContext the runner reuses (the one running in this process, if any)."""
    with local_spark("fast-transform") as context:
        yield context


def _artifacts(root, examples) -> tuple[dict, dict]:
    schema = standard_artifacts.Schema()
    schema.uri = str(root / "schema")  # TFX reads the one file of the folder
    os.makedirs(schema.uri)
    shutil.copy(PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt", schema.uri)
    graph = standard_artifacts.TransformGraph()
    graph.uri = str(root / "graph")
    transformed = standard_artifacts.Examples()
    transformed.uri = str(root / "transformed")
    inputs = {"examples": [examples], "schema": [schema]}
    return inputs, {"transform_graph": [graph], "transformed_examples": [transformed]}


def _examples(split_uri: str) -> Counter:
    """A split folder's examples as a multiset of their serialized protos' text."""
    files = sorted(tf.io.gfile.glob(os.path.join(split_uri, "*")))
    found: Counter = Counter()
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
        found[str(tf.train.Example.FromString(record.numpy()))] += 1
    return found


@pytest.mark.timeout(300)
def test_executor_runs_the_beam_form_and_it_equals_the_in_process_write(
    spark, tmp_path, caplog, monkeypatch
):
    """Pieces of 2 KB and batches of 32: each file is cut into pieces of interleaved
    batches, for the analysis' read and for the write, each a task of its own."""
    (tmp_path / "examples").mkdir()
    examples, _ = taxi_examples(tmp_path / "examples", {"train": [200, 100], "eval": [120]})
    monkeypatch.setattr(file_pieces, "PIECE_BYTES", 2048)
    monkeypatch.setattr(on_cluster, "BATCH_SIZE", 32)
    stock = tfx_transform.Executor.Do

    def analysis_only(self, inputs, outputs, properties):
        # The fast path calls TFX's executor for the analysis alone (no examples output).
        if outputs.get("transformed_examples"):
            raise AssertionError("TFX's whole Transform pipeline ran")
        return stock(self, inputs, outputs, properties)

    monkeypatch.setattr(tfx_transform.Executor, "Do", analysis_only)
    inputs, outputs = _artifacts(tmp_path / "spark", examples)
    context = base_beam_executor.BaseBeamExecutor.Context(
        # --setup_file: TFX then builds no sdist of itself (pipeline/beam.py's spark mode).
        beam_pipeline_args=[*SPARK_ARGS, f"--setup_file={PROJECT_ROOT / 'setup.py'}"],
        tmp_dir=str(tmp_path / "tmp"),
        unique_id="1",
    )
    with caplog.at_level(logging.INFO, logger="absl"):
        executor.Executor(context).Do(inputs, outputs, dict(PROPERTIES))
    assert "Transform: fast path (its Beam form on the cluster)" in caplog.text
    assert "the analysis read the examples by their layout" in caplog.text
    assert "train 300" in caplog.text and "eval 120" in caplog.text  # TFX's split order varies

    # The in-process write, with the graph the cluster's analysis wrote.
    root = outputs["transformed_examples"][0].uri
    graph = tft.TFTransformOutput(outputs["transform_graph"][0].uri)
    jobs = executor._jobs(inputs, outputs, PROPERTIES)
    local_root = tmp_path / "local"
    local_jobs = [
        SplitJob(job.name, job.files, job.tfxio, str(local_root / f"Split-{job.name}"))
        for job in jobs
    ]
    counts = materialize(
        local_jobs,
        graph.transform_savedmodel_dir,
        graph.transformed_metadata.schema,
        str(local_root),
    )
    assert counts == {"train": 300, "eval": 120}
    for job, local in zip(jobs, local_jobs, strict=True):
        shards = sorted(os.listdir(job.output_dir))
        assert (
            len(shards) > 2 and shards[0] == f"transformed_examples-00000-of-{len(shards):05d}.gz"
        )
        assert _examples(job.output_dir) == _examples(local.output_dir)
    assert sorted(os.listdir(root)) == ["Split-eval", "Split-train"]  # staging removed


def _job(tmp_path, name: str) -> SplitJob:
    return SplitJob(name, [], None, str(tmp_path / f"Split-{name}"))  # type: ignore[arg-type]


def test_the_commit_renames_one_file_per_piece_and_never_part_of_a_split(tmp_path):
    """A retried attempt's file beside the recorded one is not committed; an outcome that
    is missing commits nothing."""
    staging = tmp_path / STAGING_DIR / "train"
    staging.mkdir(parents=True)
    for name in ("piece-00000-a.gz", "piece-00000-b.gz", "piece-00001-c.gz"):
        (staging / name).write_bytes(name.encode())
    jobs = [_job(tmp_path, "train")]
    units = [("train", 0, None), ("train", 1, None)]
    record = {
        "stopped": None,
        "written": [
            ["train", 0, str(staging / "piece-00000-b.gz"), 5, True],
            ["train", 1, str(staging / "piece-00001-c.gz"), 2, True],
        ],
    }
    assert on_cluster._commit(jobs, units, record) == {"train": 7}
    committed = tmp_path / "Split-train"
    assert sorted(os.listdir(committed)) == [
        "transformed_examples-00000-of-00002.gz",
        "transformed_examples-00001-of-00002.gz",
    ]
    assert (
        committed / "transformed_examples-00000-of-00002.gz"
    ).read_bytes() == b"piece-00000-b.gz"
    assert os.listdir(staging) == ["piece-00000-a.gz"]  # left for the staging's removal

    other = [_job(tmp_path, "eval")]
    with pytest.raises(RuntimeError, match="pieces written"):
        on_cluster._commit(
            other,
            [("eval", 0, None), ("eval", 1, None)],
            {
                "stopped": None,
                "written": [["eval", 0, "x", 1, True]],
            },
        )
    assert not (tmp_path / "Split-eval").exists()
    with pytest.raises(Uncovered, match="pass-through"):
        on_cluster._commit(other, [], {"stopped": "pass-through features", "written": []})
