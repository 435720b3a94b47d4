"""For tests of the fast paths' Beam forms on beam_spark: a local[2] SparkContext the
runner reuses, and the ingest's examples of the embedded taxi sample as GZIP TFRecord
files with their layout recorded (the artifact ExampleGen hands on)."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import tensorflow as tf
from tfx.types import standard_artifacts

from components.example_gen import arrow_csv
from components.example_gen.layout import Layout, set_layout
from components.validation.schema_importer import load_schema, schema_column_types
from pipeline.config import PROJECT_ROOT

EMBEDDED_CSV = PROJECT_ROOT / "data" / "taxi" / "span-1" / "data.csv"
SPARK_ARGS = ["--runner=beam_spark.SparkRunner", "--spark_master=local[2]"]


@contextmanager
def local_spark(app_name: str) -> Iterator[Any]:
    """A local[2] SparkContext: the one already running in this process if any (left
    running), else a new one, stopped at the end."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkContext

    from beam_spark.context import spark_conf
    from beam_spark.options import SparkRunnerOptions
    from compat.pyspark import active_spark_context

    active = active_spark_context()
    if active is not None:
        yield active
        return
    options = SparkRunnerOptions(["--spark_master=local[2]", f"--spark_app_name={app_name}"])
    context = SparkContext(conf=spark_conf(options))
    context.setLogLevel("ERROR")
    try:
        yield context
    finally:
        context.stop()


def taxi_examples(root: Path, rows_per_file: dict[str, list[int]]) -> tuple[Any, Layout]:
    """An Examples artifact under `root`: for each split, one GZIP file per entry of
    `rows_per_file`, holding that many of the embedded sample's rows (taken in order)."""
    columns = schema_column_types(load_schema(str(PROJECT_ROOT / "schema/taxi/schema.pbtxt")))
    total = sum(sum(counts) for counts in rows_per_file.values())
    with EMBEDDED_CSV.open() as src:
        header = src.readline().rstrip("\n").split(",")
        lines = iter(list(itertools.islice(src, total)))
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    for split, counts in rows_per_file.items():
        folder = root / f"Split-{split}"
        folder.mkdir()
        for i, rows in enumerate(counts):
            block = "".join(itertools.islice(lines, rows)).encode()
            batch = arrow_csv.parse_block(block, header, columns, f"{EMBEDDED_CSV}:{split}")
            name = f"data-{i:05d}-of-{len(counts):05d}.gz"
            with tf.io.TFRecordWriter(str(folder / name), options) as writer:
                for record in arrow_csv.encode_batch(batch, columns):
                    writer.write(record)
    artifact = standard_artifacts.Examples()
    artifact.uri = str(root)
    artifact.split_names = "[" + ", ".join(f'"{s}"' for s in rows_per_file) + "]"
    set_layout(artifact, columns)
    return artifact, Layout(dict(columns))
