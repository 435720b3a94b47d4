"""Helpers shared by the end-to-end tests (imported as a plain module: tests/e2e is on sys.path)."""

from __future__ import annotations

import csv
import itertools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

# Shared with benchmarks/, so kept outside the tests; e2e tests import them from here too.
from data.tables import EMBEDDED_CSV, SAMPLE_ROWS, small_config, write_sample  # noqa: F401
from metadata.summary import RunSummary
from pipeline.config import PipelineConfig


@dataclass
class TaxiRuns:
    config: PipelineConfig
    first: RunSummary
    cached: RunSummary
    trainer_code_changed: RunSummary
    retrained: RunSummary  # `--no-cache` on the first run's data, code and config

    @property
    def run_ids(self) -> list[str]:
        """The four runs' ids, oldest first."""
        runs = (self.first, self.cached, self.trainer_code_changed, self.retrained)
        return [r.run_id for r in runs]


def four_runs(config: PipelineConfig) -> TaxiRuns:
    """Four runs of `config` on one store: fresh, unchanged (cached), trainer code
    edited, and a `--no-cache` retrain of the first (same data, code, hyperparameters)."""
    import pytest

    import pipeline.plan as plan
    from pipeline import fingerprint
    from tfxp.local.runner import run_local

    first = run_local(config, printer=lambda _: None)
    cached = run_local(config, printer=lambda _: None)
    real = fingerprint.code_fingerprint  # patched where the plan calls it

    def edited(path: str, *args, **kwargs) -> str:
        # Same effect as editing trainer/taxi/model.py: the run_fn's code hash changes.
        value = real(path, *args, **kwargs)
        return value[::-1] if path == config.run_fn else value

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan, "code_fingerprint", edited)
        changed = run_local(config, printer=lambda _: None)
    retrained = run_local(config.replace(enable_cache=False), printer=lambda _: None)
    return TaxiRuns(config, first, cached, changed, retrained)


def write_span(data_root: Path, span: int, *, start: int = 0, rows: int = SAMPLE_ROWS) -> Path:
    """Rows `start`..`start+rows` of the embedded CSV (with its header) as `span-<span>/data.csv`."""
    folder = data_root / f"span-{span}"
    folder.mkdir(parents=True)
    with EMBEDDED_CSV.open() as src, (folder / "data.csv").open("w") as dst:
        dst.write(src.readline())
        dst.writelines(itertools.islice(src, start, start + rows))
    return folder / "data.csv"


def write_scaled_fares(data_root: Path, span: int, source: Path, factor: float) -> Path:
    """`source`'s rows with every fare times `factor` as `span-<span>/data.csv`: the same
    shape, changed content (1.5: new data; 10: drifted past the gate's threshold)."""
    with source.open(newline="") as f:
        rows = list(csv.reader(f))
    fare = rows[0].index("fare")
    for row in rows[1:]:
        if row[fare]:
            row[fare] = f"{float(row[fare]) * factor:.2f}"
    folder = data_root / f"span-{span}"
    folder.mkdir(parents=True)
    with (folder / "data.csv").open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return folder / "data.csv"


def split_examples(pipeline_root: str) -> dict[str, Counter]:
    """Split folder name -> the serialized (deterministic) examples CsvExampleGen wrote."""
    import tensorflow as tf

    splits: dict[str, Counter] = {}
    for folder in Path(pipeline_root).glob("CsvExampleGen/examples/*/Split-*"):
        shards = sorted(str(p) for p in folder.glob("*"))
        records = tf.data.TFRecordDataset(shards, compression_type="GZIP")
        splits[folder.name] = Counter(
            tf.train.Example.FromString(r.numpy()).SerializeToString(deterministic=True)
            for r in records
        )
    return splits


def live_examples(metadata_path: str) -> list:
    """Examples artifacts that are LIVE in the run's ML Metadata (none if it does not exist)."""
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    if not Path(metadata_path).exists():
        return []
    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = metadata_path
    store = metadata_store.MetadataStore(cfg)
    return [
        a
        for a in store.get_artifacts_by_type("Examples")
        if a.state == metadata_store_pb2.Artifact.LIVE
    ]


def failed_executions(metadata_path: str, node_id: str) -> list[str]:
    """States of every execution of pipeline node `node_id` (by its node context)."""
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = metadata_path
    store = metadata_store.MetadataStore(cfg)
    node_contexts = [
        c for c in store.get_contexts_by_type("node") if c.name.endswith(f".{node_id}")
    ]
    assert node_contexts, f"no node context for {node_id} in ML Metadata"
    return [
        metadata_store_pb2.Execution.State.Name(e.last_known_state)
        for c in node_contexts
        for e in store.get_executions_by_context(c.id)
    ]


def first_output(root: Path, component: str, output: str, index: int = 0) -> Path:
    """The first execution's output folder of `component` (ids sort by execution;
    `index` -1: the last one's)."""
    found = sorted((root / component / output).glob("*"), key=lambda p: int(p.name))
    assert found, f"no {component}/{output} under {root}"
    return found[index]


def statistics_values(root: Path) -> dict[tuple[str, str, str], float]:
    """(split, feature, statistic) -> value, from StatisticsGen's first output."""
    import tensorflow_data_validation as tfdv

    folder = first_output(root, "StatisticsGen", "statistics")
    found = {}
    for split in sorted(folder.glob("Split-*")):
        stats = tfdv.load_stats_binary(str(split / "FeatureStats.pb"))
        found[split.name, "", "num_examples"] = float(stats.datasets[0].num_examples)
        for feature in stats.datasets[0].features:
            name = feature.path.step[0] if feature.path.step else feature.name
            kind = feature.WhichOneof("stats")
            common = getattr(feature, kind).common_stats
            found[split.name, name, "num_non_missing"] = float(common.num_non_missing)
            found[split.name, name, "num_missing"] = float(common.num_missing)
            if kind == "num_stats":
                for stat in ("mean", "std_dev", "min", "max"):
                    found[split.name, name, stat] = getattr(feature.num_stats, stat)
            elif kind == "string_stats":
                found[split.name, name, "unique"] = float(feature.string_stats.unique)
    return found


def transformed_values(root: Path, index: int = 0) -> dict:
    """(split, feature) -> the values of every transformed example, sorted (Transform's
    first output; `index` as `first_output`'s)."""
    import numpy as np
    import tensorflow as tf

    folder = first_output(root, "Transform", "transformed_examples", index)
    found: dict = {}
    for split in sorted(folder.glob("Split-*")):
        shards = sorted(str(p) for p in split.glob("*.gz"))
        columns: dict[str, list] = {}
        for record in tf.data.TFRecordDataset(shards, compression_type="GZIP"):
            example = tf.train.Example.FromString(record.numpy())
            for name, feature in example.features.feature.items():
                values = getattr(feature, feature.WhichOneof("kind")).value
                columns.setdefault(name, []).extend(values)
        for name, values in columns.items():
            found[split.name, name] = np.sort(np.asarray(values, dtype=np.float64))
    return found


def finding_row(message: str, feature: str, kind: str) -> str:
    """The row of `feature`'s `kind` finding in a blocked run's terminal table
    (tfxp/presentation/gate_table.py), its cells joined by single spaces."""
    rows = [
        " ".join(line.split())
        for line in message.splitlines()
        if line.split()[:2] == [feature, f"{kind}:"]
    ]
    assert len(rows) == 1, f"no single {kind} row for {feature} in:\n{message}"
    return rows[0]
