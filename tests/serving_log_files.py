"""Writes request-log files as `tfxp serve` does (docs/serving-logs.md), for tests.

GZIP TFRecord of tf.Examples: the raw features plus the `__*` metadata, written
under a hidden name and renamed into place when complete.
"""

from __future__ import annotations

import csv
import datetime as dt
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import tensorflow as tf

T0 = dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)


def _feature(value) -> tf.train.Feature:
    if value is None or value == "":
        return tf.train.Feature()
    if isinstance(value, bool | int):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
    if isinstance(value, float):
        return tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
    if isinstance(value, list | tuple):
        return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in value]))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[str(value).encode()]))


def example(features: Mapping[str, object], **meta) -> bytes:
    """One logged record: `features` plus `__<key>` for each `meta` key."""
    values = dict(features)
    values.update({f"__{k}": v for k, v in meta.items()})
    proto = tf.train.Example(
        features=tf.train.Features(feature={k: _feature(v) for k, v in values.items()})
    )
    return proto.SerializeToString()


def log_name(opened: dt.datetime, seq: int, pid: int = 4242) -> str:
    return f"requests-{opened.strftime('%Y%m%dT%H%M%S')}-{pid}-{seq:06d}.tfrecord.gz"


def write_log(folder: Path, records: Iterable[bytes], opened: dt.datetime, seq: int = 1) -> Path:
    """Publishes `records` as one complete log file (hidden name, then rename)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = log_name(opened, seq)
    tmp = folder / f".{name}.tmp"
    with tf.io.TFRecordWriter(str(tmp), options="GZIP") as w:
        for r in records:
            w.write(r)
    final = folder / name
    os.rename(tmp, final)
    return final


def typed_rows(path: Path, types: Mapping[str, str], drop: Iterable[str] = ()) -> list[dict]:
    """A CSV's rows with values typed as the schema types them (INT, FLOAT, BYTES)."""
    skip = set(drop)
    out = []
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            typed = {}
            for name, text in row.items():
                if name in skip or text == "":
                    continue
                kind = types.get(name, "BYTES")
                typed[name] = (
                    int(text) if kind == "INT" else float(text) if kind == "FLOAT" else text
                )
            out.append(typed)
    return out


def served_records(
    rows: list[dict],
    *,
    start: dt.datetime = T0,
    version: int = 1,
    label: str = "champion",
    role: str = "served",
    outputs: list[float] | None = None,
    ids: list[str] | None = None,
) -> list[bytes]:
    """One record per row, one second apart from `start`."""
    out = []
    for i, row in enumerate(rows):
        at = start + dt.timedelta(seconds=i)
        out.append(
            example(
                row,
                request_id=ids[i] if ids else f"r{i}",
                logged_at=int(at.timestamp() * 1_000_000),
                model="taxi",
                version=version,
                label=label,
                role=role,
                output=[outputs[i]] if outputs else [0.5],
            )
        )
    return out
