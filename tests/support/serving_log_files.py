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


def live_traffic(data_root: Path, label: str = "champion") -> dict:
    """Requests logged just now (minutes ago) and a day ago under `data_root`/serving-log,
    as the console counts them; returns the counts a page should show."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    folder = data_root / "serving-log"
    rows = [{"trip_miles": 1.0}] * 3
    recent = now - dt.timedelta(minutes=2)
    write_log(folder, served_records(rows, start=recent, version=7, label=label), recent, seq=1)
    shadow = served_records(rows[:2], start=recent, version=8, label="challenger", role="shadow")
    write_log(folder, shadow, recent, seq=2)
    hour_ago = now - dt.timedelta(minutes=50)
    write_log(
        folder, served_records(rows[:1], start=hour_ago, version=7, label=label), hour_ago, seq=3
    )
    old = now - dt.timedelta(days=3)
    write_log(folder, served_records(rows, start=old, version=6), old, seq=4)
    return {"v7 served": (3, 4, 4), "v8 shadow": (2, 2, 2)}


def skew_record(state_dir: Path, state: str = "skew") -> dict:
    """A recorded skew check (what `tfxp watch --skew-every` writes) in `state_dir`."""
    import json

    record = {
        "state": state,
        "checked_at": "2026-12-04T10:00:00+00:00",
        "span": 3,
        "statistics_uri": "/x",
        "log_dir": str(state_dir / "data" / "serving-log"),
        "window": None,
        "described": "serving log data/serving-log (1 file(s) requests-x.tfrecord.gz: 9 served requests)",
        "blocking": ["trip_miles: Jensen-Shannon 0.4 > threshold 0.15"] if state == "skew" else [],
        "warnings": [],
        "measurements": [],
    }
    (state_dir / "serving-skew.json").write_text(json.dumps(record))
    return record
