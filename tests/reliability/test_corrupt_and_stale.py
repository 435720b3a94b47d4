"""Corrupt shards are named, and nothing stale is ever served from cache.

Faults: a flipped byte (CRC mismatch) and a truncated GZIP stream in an
Examples shard; edits to the schema, the preprocessing code, the model code
and the config. Promises: the consuming component fails naming the artifact
and the shard, `tfxp verify` reports per shard; every edit re-executes exactly
what depends on it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from reliability_support import write_sample

from pipeline.config import PipelineConfig
from pipeline.datasets import dataset_config
from tfxp.local.runner import PipelineRunError, run_local

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _config(tmp: Path, rows: int = 2000) -> PipelineConfig:
    write_sample(tmp, rows)
    schema = tmp / "schema.pbtxt"
    shutil.copy(dataset_config("taxi").schema_file, schema)
    return dataset_config("taxi").replace(
        data_root=str(tmp / "data"),
        run_dir=str(tmp / "run"),
        schema_file=str(schema),
        train_steps=10,
        eval_steps=1,
    )


def _states(summary) -> dict[str, str]:
    return {c.node_id: c.state for c in summary.components}


def _verify(config: PipelineConfig) -> subprocess.CompletedProcess:
    """`tfxp verify --run-dir RUN` in-process (a child would import TensorFlow again)."""
    import contextlib
    import io

    from tfxp.cli import main

    argv = ["verify", "--run-dir", config.run_dir]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def _shard(config: PipelineConfig, split: str) -> str:
    pattern = os.path.join(
        config.pipeline_root, "CsvExampleGen", "examples", "*", f"Split-{split}", "*.gz"
    )
    return sorted(glob.glob(pattern))[0]


@pytest.mark.parametrize("damage", ["flipped byte", "truncated gzip"])
def test_corrupt_shard_is_named_by_the_consumer_and_by_verify(tmp_path, damage):
    config = _config(tmp_path)
    run_local(config, to_nodes=["StatisticsGen"], printer=lambda _: None)
    clean = _verify(config)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "verdict: ok" in clean.stdout

    shard = _shard(config, "train")
    data = bytearray(Path(shard).read_bytes())
    if damage == "flipped byte":
        data[len(data) // 2] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    Path(shard).write_bytes(bytes(data))

    with pytest.raises(PipelineRunError) as info:
        run_local(config, to_nodes=["Transform"], printer=lambda _: None)
    message = str(info.value)
    assert message.startswith("Transform failed")
    assert f"shard {shard}" in message and "Examples artifact" in message

    report = _verify(config)
    assert report.returncode == 1
    assert "Split-train/" in report.stdout and "CORRUPT" in report.stdout
    assert "Split-eval/" in report.stdout  # the intact shard is reported too, as ok


def test_verify_counts_records_against_the_statistics(tmp_path):
    """Fault: a shard lost records but is otherwise perfect (valid GZIP, valid TFRecord
    framing and CRCs). Only the count against StatisticsGen's num_examples can tell."""
    import tensorflow as tf

    config = _config(tmp_path)
    run_local(config, to_nodes=["StatisticsGen"], printer=lambda _: None)
    shard = _shard(config, "train")
    records = list(tf.data.TFRecordDataset(shard, compression_type="GZIP").as_numpy_iterator())
    kept = records[: len(records) - 7]
    with tf.io.TFRecordWriter(shard, options="GZIP") as writer:
        for record in kept:
            writer.write(record)
    # The rewritten shard reads cleanly: framing alone cannot catch this.
    assert sum(1 for _ in tf.data.TFRecordDataset(shard, compression_type="GZIP")) == len(kept)

    report = _verify(config)
    assert report.returncode == 1, report.stdout + report.stderr
    assert "CORRUPT:" not in report.stdout  # every shard is readable ...
    missing = [line for line in report.stdout.splitlines() if "statistics recorded" in line]
    assert len(missing) == 1 and missing[0].strip().startswith("split train:"), report.stdout
    assert "verdict: CORRUPT" in report.stdout


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[PipelineConfig, object]:
    """A run to the Trainer; the two tests below only add runs to its store (either order)."""
    config = _config(tmp_path_factory.mktemp("trained"))
    return config, run_local(config, to_nodes=["Trainer"], printer=lambda _: None)


def test_every_kind_of_edit_reexecutes_what_depends_on_it(trained, monkeypatch):
    import pipeline.plan as plan  # it fingerprints the code the definition keys on
    from pipeline import fingerprint

    config, first = trained
    quiet = {"printer": lambda _: None}
    assert _states(first)["Trainer"] == "COMPLETE"

    # Schema: even a comment changes the content hash the importer is keyed by. The
    # schema and preprocessing edits stop at Transform: what follows a re-executed
    # Transform is re-executed by TFX's own cache key (new input artifacts), and the
    # model-code edit below shows the Trainer's own key.
    with open(config.schema_file, "a") as f:
        f.write("# reviewed\n")
    s = _states(run_local(config, to_nodes=["Transform"], **quiet))
    assert s["CsvExampleGen"] == "CACHED"
    assert s["CuratedSchemaImporter"] == s["Transform"] == "COMPLETE", s

    real = fingerprint.code_fingerprint  # patched where the plan calls it

    def edited(target: str):
        return lambda path, *a, **k: (
            real(path, *a, **k)[::-1] if path == target else real(path, *a, **k)
        )

    # Preprocessing code: Transform (and what follows it).
    monkeypatch.setattr(plan, "code_fingerprint", edited(config.preprocessing_fn))
    s = _states(run_local(config, to_nodes=["Transform"], **quiet))
    assert s["CuratedSchemaImporter"] == "CACHED"
    assert s["Transform"] == "COMPLETE", s

    # Model code: the Trainer only (Transform stays cached).
    monkeypatch.setattr(plan, "code_fingerprint", edited(config.run_fn))
    s = _states(run_local(config, to_nodes=["Trainer"], **quiet))
    assert s["Transform"] == "CACHED" and s["Trainer"] == "COMPLETE", s

    # Config: a hyperparameter change reaches the Trainer's parameters.
    changed = config.replace(hyperparameters={"learning_rate": 0.01})
    s = _states(run_local(changed, to_nodes=["Trainer"], **quiet))
    assert s["Transform"] == "CACHED" and s["Trainer"] == "COMPLETE", s
    # ... and an unchanged rerun of that config is fully cached.
    s = _states(run_local(changed, to_nodes=["Trainer"], **quiet))
    assert s["Trainer"] == "CACHED", s


def test_partial_run_from_trainer_reuses_upstream_artifacts(trained):
    config, _ = trained
    s = _states(
        run_local(
            config.replace(enable_cache=False),
            from_nodes=["Trainer"],
            to_nodes=["Trainer"],
            printer=lambda _: None,
        )
    )
    # Only the Trainer executed; upstream nodes did not run at all in this run.
    assert s.get("Trainer") == "COMPLETE"
    assert "Transform" not in s or s["Transform"] != "COMPLETE", s
    assert "CsvExampleGen" not in s or s["CsvExampleGen"] != "COMPLETE", s
