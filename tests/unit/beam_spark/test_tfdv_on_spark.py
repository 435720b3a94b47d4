"""TFDV's GenerateStatistics on taxi rows: beam_spark's statistics equal the FnApiRunner's
(counts exact, floats to 1e-6 relative: combine order may move the last digits)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.csv as pa_csv
import pytest
import tensorflow_data_validation as tfdv
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from google.protobuf import json_format

from beam_spark.runner import SparkRunner

ROOT = Path(__file__).resolve().parents[3]
ROWS = 3000
BATCH = 250


def _batches() -> list[pa.RecordBatch]:
    """The rows as TFDV takes them: every feature a list column (null where missing)."""
    table = pa_csv.read_csv(ROOT / "data" / "taxi" / "span-1" / "data.csv").slice(0, ROWS)
    columns = [
        pa.array(
            [None if v is None else [v] for v in column.to_pylist()],
            type=pa.list_(column.type),
        )
        for column in table.columns
    ]
    listed = pa.Table.from_arrays(columns, names=table.column_names)
    return listed.to_batches(max_chunksize=BATCH)


def _statistics(runner: Any, out: Path) -> Any:
    path = str(out / "stats.pb")
    with beam.Pipeline(runner=runner) as p:
        _ = (
            p
            | beam.Create(_batches(), reshuffle=False)
            | tfdv.GenerateStatistics(tfdv.StatsOptions())
            | tfdv.WriteStatisticsToBinaryFile(path)
        )
    return tfdv.load_stats_binary(path)


def _compare(ours: Any, theirs: Any, where: str, problems: list[str]) -> None:
    if isinstance(theirs, dict):
        if set(ours) != set(theirs):
            problems.append(f"{where}: fields {sorted(set(ours) ^ set(theirs))} differ")
        for key in set(ours) & set(theirs):
            _compare(ours[key], theirs[key], f"{where}.{key}", problems)
    elif isinstance(theirs, list):
        if len(ours) != len(theirs):
            problems.append(f"{where}: {len(ours)} entries, expected {len(theirs)}")
        for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
            _compare(a, b, f"{where}[{i}]", problems)
    elif isinstance(theirs, float) and not isinstance(theirs, bool):
        if not math.isclose(float(ours), theirs, rel_tol=1e-6, abs_tol=1e-9):
            problems.append(f"{where}: {ours} != {theirs}")
    elif ours != theirs:
        problems.append(f"{where}: {ours!r} != {theirs!r}")


def _by_path(statistics: dict[str, Any]) -> dict[str, Any]:
    """Features in path order: TFDV lists them in the order its merged accumulators met
    them, which follows the combine order, not the data (a set, compared as one)."""
    for dataset in statistics.get("datasets", []):
        dataset["features"] = sorted(
            dataset.get("features", []), key=lambda f: f.get("path", {}).get("step", [])
        )
    return statistics


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_generate_statistics_equal_the_fn_api_runners(spark_local: Any, tmp_path: Path) -> None:
    (tmp_path / "fn").mkdir()
    (tmp_path / "spark").mkdir()
    expected = _statistics(FnApiRunner(), tmp_path / "fn")
    found = _statistics(SparkRunner(spark_context=spark_local), tmp_path / "spark")
    ours, theirs = (
        _by_path(json_format.MessageToDict(found)),
        _by_path(json_format.MessageToDict(expected)),
    )
    dataset = theirs["datasets"][0]
    assert int(dataset["numExamples"]) == ROWS and len(dataset["features"]) == 18
    problems: list[str] = []
    _compare(ours, theirs, "statistics", problems)
    assert not problems, "\n".join(problems[:20])
