"""The Arrow CSV executor writes the same examples, in the same splits, as TFX's CsvExampleGen."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import tensorflow as tf
from e2e_support import small_config, write_sample

from components import arrow_csv
from pipeline.runner import run_local

pytestmark = pytest.mark.slow


def _ingest(tmp: Path, reader: str, monkeypatch) -> dict[str, Counter]:
    config = small_config(tmp, run_dir=str(tmp / f"run-{reader}"), csv_reader=reader)
    run_local(config, to_nodes=["CsvExampleGen"], printer=lambda _: None)
    splits: dict[str, Counter] = {}
    for folder in Path(config.pipeline_root).glob("CsvExampleGen/examples/*/Split-*"):
        shards = sorted(str(p) for p in folder.glob("*.gz"))
        assert shards and not list(folder.glob("*.incomplete"))
        records = tf.data.TFRecordDataset(shards, compression_type="GZIP")
        splits[folder.name] = Counter(
            tf.train.Example.FromString(r.numpy()).SerializeToString(deterministic=True)
            for r in records
        )
    return splits


def test_arrow_executor_matches_csv_example_gen(tmp_path, monkeypatch):
    write_sample(tmp_path / "data", rows=3000)  # includes many missing values
    calls = []
    encode = arrow_csv.encode_batch
    monkeypatch.setattr(arrow_csv, "encode_batch", lambda *a: calls.append(1) or encode(*a))
    ours = _ingest(tmp_path, "arrow", monkeypatch)
    assert calls, "the Arrow reader was not used"
    theirs = _ingest(tmp_path, "tfx", monkeypatch)
    assert sorted(ours) == sorted(theirs) == ["Split-eval", "Split-train"]
    assert sum(sum(c.values()) for c in ours.values()) == 3000
    for split in ours:
        assert ours[split] == theirs[split], split
