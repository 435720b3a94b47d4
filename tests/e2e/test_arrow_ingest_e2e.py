"""The Arrow CSV executor writes the same examples, in the same splits, as TFX's CsvExampleGen."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest
import tensorflow as tf
from e2e_support import small_config, write_sample
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.example_gen import arrow_csv, csv_ingest, csv_options, driver
from tfxp.local.runner import run_local

# The first test of a module also pays for its module fixture's whole runs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    """3000 embedded rows (pickup_census_tract has no value at all there: CsvExampleGen
    writes it untyped), with dropoff_census_tract blanked except in the last row."""
    tmp = tmp_path_factory.mktemp("arrow-ingest")
    path = write_sample(tmp / "data", rows=3000)
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    column = rows[0].index("dropoff_census_tract")
    for row in rows[1:-1]:
        row[column] = ""
    rows[-1][column] = "17031081500"
    with path.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return tmp


def _ingest(tmp: Path, name: str, **changes) -> tuple[dict[str, Counter], dict]:
    config = small_config(tmp, run_dir=str(tmp / f"run-{name}"), **changes)
    run_local(config, to_nodes=["CsvExampleGen"], printer=lambda _: None)
    splits: dict[str, Counter] = {}
    for folder in Path(config.pipeline_root).glob("CsvExampleGen/examples/*/Split-*"):
        shards = sorted(str(p) for p in folder.glob("*"))
        assert shards and all(s.endswith(".gz") for s in shards), shards
        records = tf.data.TFRecordDataset(shards, compression_type="GZIP")
        splits[folder.name] = Counter(
            tf.train.Example.FromString(r.numpy()).SerializeToString(deterministic=True)
            for r in records
        )
    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = config.metadata_path
    [artifact] = metadata_store.MetadataStore(cfg).get_artifacts_by_type("Examples")
    properties = {k: v.string_value or v.int_value for k, v in artifact.custom_properties.items()}
    return splits, properties


@pytest.fixture(scope="module")
def theirs(sample) -> dict[str, Counter]:
    splits, properties = _ingest(sample, "tfx", csv_reader="tfx")
    assert properties[csv_options.CSV_READER] == "tfx"
    return splits


def _assert_same(ours: dict[str, Counter], theirs: dict[str, Counter]) -> None:
    assert sorted(ours) == sorted(theirs) == ["Split-eval", "Split-train"]
    assert sum(sum(c.values()) for c in ours.values()) == 3000
    for split in ours:
        assert ours[split] == theirs[split], split


def test_arrow_executor_is_the_default_and_matches_csv_example_gen(sample, theirs):
    ours, properties = _ingest(sample, "arrow")  # the default reader
    assert properties[csv_options.CSV_READER] == "arrow", "the Arrow reader was not used"
    assert properties[driver.ROW_COUNT] == 3000
    assert properties[driver.TFRECORD_SHARDS] == 2
    _assert_same(ours, theirs)


def test_byte_ranges_many_blocks_and_a_wrong_empty_column_guess(sample, theirs, monkeypatch):
    """Three tasks (byte ranges of one file), many small blocks, and a first block
    without dropoff_census_tract: the run finds the guess wrong and writes again."""
    reruns = []
    run = csv_ingest.run
    monkeypatch.setattr(csv_ingest, "run", lambda *a: reruns.append(1) or run(*a))
    monkeypatch.setattr(csv_ingest, "BLOCK_BYTES", 16 * 1024)
    monkeypatch.setattr(csv_ingest, "GUESS_BYTES", 4 * 1024)
    encode = arrow_csv.example_parts
    blocks = []
    monkeypatch.setattr(arrow_csv, "example_parts", lambda *a: blocks.append(1) or encode(*a))
    ours, properties = _ingest(sample, "ranges", num_shards=3)
    assert properties[csv_options.CSV_READER] == "arrow"
    assert properties[driver.TFRECORD_SHARDS] == 6
    assert len(reruns) == 2 and len(blocks) > 2 * 6
    _assert_same(ours, theirs)
