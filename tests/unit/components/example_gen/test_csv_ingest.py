"""The Arrow ingest's pieces: TFX's split rule, TFRecord framing, GZIP shards, byte ranges."""

from __future__ import annotations

import gzip
import os
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import tensorflow as tf
from tfx.components.example_gen import base_example_gen_executor
from tfx.proto import example_gen_pb2

from components.example_gen import arrow_csv, csv_ingest, tfrecord_shards
from components.validation.schema_importer import load_schema, schema_column_types
from pipeline.config import PROJECT_ROOT
from tfxp.storage import verify

EMBEDDED_CSV = PROJECT_ROOT / "data" / "taxi" / "span-1" / "data.csv"


@pytest.fixture(scope="module")
def columns() -> dict[str, str]:
    return schema_column_types(load_schema(str(PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt")))


@pytest.fixture(scope="module")
def batch(columns) -> pa.RecordBatch:
    return next(arrow_csv.read_batches(str(EMBEDDED_CSV), columns)).slice(0, 2000)


@pytest.mark.parametrize("hash_buckets", [(2, 1), (7, 2, 1), (1,), (1000, 999), (2**31, 2**32 - 1)])
def test_splits_are_tfx_partition_fn(batch, columns, hash_buckets):
    records = arrow_csv.encode_batch(batch, columns)
    config = example_gen_pb2.SplitConfig(
        splits=[
            example_gen_pb2.SplitConfig.Split(name=f"s{i}", hash_buckets=b)
            for i, b in enumerate(hash_buckets)
        ]
    )
    boundaries = list(np.cumsum(hash_buckets))
    theirs = [
        base_example_gen_executor._PartitionFn(r, len(boundaries), boundaries, config)
        for r in records
    ]
    framed, keys = tfrecord_shards.framed_examples(batch, columns, frozenset(), digests=True)
    ours = tfrecord_shards.split_of(tfrecord_shards.buckets_of(keys, boundaries[-1]), boundaries)
    assert ours.tolist() == theirs
    if len(hash_buckets) > 1:
        assert len(set(theirs)) == len(hash_buckets)  # the test can tell splits apart


def test_framed_records_read_back_with_tensorflow(tmp_path, batch, columns):
    framed, _ = tfrecord_shards.framed_examples(batch, columns, frozenset(), digests=False)
    path = tmp_path / "plain.tfrecord"
    path.write_bytes(b"".join(framed.to_pylist()))
    read = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    assert read == arrow_csv.encode_batch(batch, columns)


def _write_shard(path: str, batch, columns, pieces: int = 3) -> int:
    writer = tfrecord_shards.GzipShardWriter(path)
    n = 0
    for i in range(pieces):
        part = batch.slice(i * len(batch) // pieces, len(batch) // pieces)
        framed, _ = tfrecord_shards.framed_examples(part, columns, frozenset(), digests=False)
        writer.write(tfrecord_shards.contiguous(framed), len(framed))
        n += len(framed)
    assert not os.path.exists(path), "a shard appears only when complete"
    writer.close()
    return n


def test_gzip_shard_is_one_complete_stream(tmp_path, batch, columns):
    path = str(tmp_path / "data_tfrecord-00000-of-00001.gz")
    n = _write_shard(path, batch, columns)
    assert os.listdir(tmp_path) == ["data_tfrecord-00000-of-00001.gz"]
    report = verify.check_shard(path)
    assert report.ok and report.records == n
    with gzip.open(path) as f:  # Python's gzip checks the CRC-32 and size trailer
        assert len(f.read()) > 0


@pytest.mark.parametrize("cut", [0.5, 0.9, 0.999])
def test_truncated_shard_is_reported_corrupt(tmp_path, batch, columns, cut):
    path = str(tmp_path / "data_tfrecord-00000-of-00001.gz")
    _write_shard(path, batch, columns)
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: int(len(data) * cut)])
    # TensorFlow's reader may or may not notice (it depends on where the cut falls,
    # for Beam's shards too); the missing GZIP trailer always tells.
    report = verify.check_shard(path)
    assert not report.ok and report.error


def test_aborted_shard_leaves_nothing(tmp_path):
    writer = tfrecord_shards.GzipShardWriter(str(tmp_path / "s.gz"))
    writer.write(pa.py_buffer(b"x" * 100), 1)
    writer.abort()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("tasks,block", [(1, 1 << 20), (3, 997), (7, 64)])
def test_byte_ranges_cover_every_line_once(tmp_path, tasks, block):
    rng = random.Random(tasks)
    files = []
    lines_in = []
    for k in range(3):
        lines = [f"{k},{i},{'x' * rng.randrange(0, 300)}\n" for i in range(rng.randrange(1, 400))]
        if k == 1:
            lines.insert(5, "\n")  # a blank line: kept in the stream, skipped by the parser
        if k == 2:
            lines[-1] = lines[-1].rstrip("\n")  # no final newline
        path = tmp_path / f"part-{k}.csv"
        path.write_text("a,b,c\n" + "".join(lines))
        files.append((str(path), 6, path.stat().st_size, 0))
        lines_in += [line.rstrip("\n") for line in lines]
    plan = csv_ingest.plan_tasks(files, tasks)
    assert len(plan) == tasks
    lines_out = []
    for pieces in plan:
        for piece in pieces:
            for chunk in csv_ingest.read_blocks(piece, 6, block_bytes=block):
                # whole lines only (the file's last line may lack its newline)
                assert chunk.endswith(b"\n") or Path(piece.path).read_bytes().endswith(chunk)
                lines_out += chunk.decode().splitlines()
    assert lines_out == lines_in


def test_read_ahead_keeps_order_and_raises_the_readers_error():
    from concurrent.futures import ThreadPoolExecutor

    def blocks():
        yield from (b"a\n", b"b\n", b"c\n")
        raise arrow_csv.ArrowCsvError("s3://bucket/x.csv: connection reset")

    seen = []
    with ThreadPoolExecutor(max_workers=1) as reader:
        with pytest.raises(arrow_csv.ArrowCsvError, match="connection reset"):
            for block in csv_ingest.read_ahead(blocks(), reader):
                seen.append(block)
        assert seen == [b"a\n", b"b\n", b"c\n"]
        assert list(csv_ingest.read_ahead(iter([]), reader)) == []
