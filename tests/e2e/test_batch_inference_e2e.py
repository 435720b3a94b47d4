"""Batch inference on the session's pushed taxi model (`taxi_runs`): `tfxp infer` and the
pipeline's BatchInference step score a generated span, ML Metadata records which model
scored it, and every prediction equals `tfxp predict`'s for the same row.

Works on a copy of the session's store (the shared runs stay as other tests expect them).
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import PROJECT_ROOT, InferenceOptions

# The first test may pay for the session's `taxi_runs` (four pipeline runs).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

GENERATED_ROWS = 400


def _generate(folder: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "data.generate", str(folder), "--rows", str(GENERATED_ROWS)],
        cwd=PROJECT_ROOT,
        check=True,
        capture_output=True,
    )
    [path] = sorted(folder.glob("*.csv"))
    return path


def _with_bad_rows(clean: Path, out: Path) -> dict[int, str]:
    """`clean` plus three bad rows; returns line -> what is wrong."""
    with clean.open(newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    short = rows[5][:-2]
    text_fare = list(rows[6])
    text_fare[header.index("fare")] = "a lot"
    float_month = list(rows[7])
    float_month[header.index("trip_start_month")] = "3.5"
    rows[10:10] = [short, text_fare]  # lines 11 and 12
    rows.append(float_month)  # the last line
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return {11: "fields", 12: "'fare'", len(rows): "'trip_start_month'"}


@pytest.fixture(scope="module")
def scored(taxi_runs, tmp_path_factory):
    """`tfxp infer` on a generated span with bad rows, on a copy of the session's run dir."""
    from metadata.store import location_from
    from tfxp.models.infer import run_infer

    tmp = tmp_path_factory.mktemp("infer")
    run_dir = tmp / "run"
    shutil.copytree(taxi_runs.config.run_dir, run_dir)
    clean = _generate(tmp / "generated")
    bad = _with_bad_rows(clean, tmp / "to_score" / "span-4" / "part-00000.csv")
    config = taxi_runs.config.replace(
        run_dir=str(run_dir), inference=InferenceOptions(data_root=str(tmp / "to_score"))
    )
    result = run_infer(
        config, location_from(default_run_dir=str(run_dir)), span=4, printer=lambda _: None
    )
    return config, result, clean, bad


def _table(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_bad_rows_are_named_by_line_and_skipped(scored):
    _, result, _, bad = scored
    assert result.report.rows_read == GENERATED_ROWS + len(bad)
    assert result.report.rows_scored == GENERATED_ROWS
    assert result.report.rows_skipped == len(bad)
    skipped = {s.line: s.reason for s in result.report.skipped}
    assert sorted(skipped) == sorted(bad)
    for line, what in bad.items():
        assert what in skipped[line]
    listed = _table(Path(result.output) / "skipped_rows.csv")
    assert sorted(int(r["line"]) for r in listed) == sorted(bad)


def test_predictions_match_tfxp_predict_row_for_row(scored, tmp_path):
    from tfxp.models.predict import predict_csv

    config, result, clean, bad = scored
    ours = _table(Path(result.output) / "predictions.csv")
    out = tmp_path / "predict.csv"
    predict_csv(config, str(clean), output=str(out), model_dir=result.model_dir)
    theirs = _table(out)
    assert len(ours) == len(theirs) == GENERATED_ROWS
    for mine, reference in zip(ours, theirs, strict=True):
        assert (mine["probability"], mine["prediction"]) == (
            reference["probability"],
            reference["prediction"],
        )
    # The bad rows were inserted before line 13 and at the end: the others keep their order.
    lines = [int(r["line"]) for r in ours]
    assert lines == sorted(lines) and not set(lines) & set(bad)


def test_lineage_says_which_model_scored_the_span(scored):
    from metadata.lineage import Lineage
    from metadata.scorings import scorings
    from metadata.store import location_from, open_store
    from tfxp.cli import main

    config, result, _, _ = scored

    store = open_store(location_from(default_run_dir=config.run_dir))
    lineage = Lineage(store, config.pipeline_name)
    [found] = scorings(lineage, span=4)
    pushed = lineage.resolve_model("pushed")
    assert found.model_id == pushed.id == result.model_id
    assert found.rows_scored == GENERATED_ROWS and found.rows_skipped == 3
    assert found.uri == str(Path(result.output).resolve())
    assert found.model_version == [p for p in lineage.pushes(pushed.id) if p.pushed][-1].version
    assert result.model_dir.endswith(found.model_version)
    assert main(["lineage", "scored", "--run-dir", config.run_dir, "--span", "4"]) == 0
    assert scorings(lineage, span=99) == []


def test_pipeline_step_scores_the_span_with_the_runs_model(scored, tmp_path):
    from metadata.lineage import Lineage
    from metadata.scorings import scorings
    from metadata.store import location_from, open_store
    from tfxp.local.runner import run_local
    from tfxp.models.predict import predict_csv

    config, _, clean, bad = scored
    with_step = config.replace(
        inference=InferenceOptions(data_root=config.inference.data_root, in_pipeline=True)
    )
    summary = run_local(with_step, printer=lambda _: None)
    assert {c.node_id: c.state for c in summary.components}["BatchInference"] == "COMPLETE"
    store = open_store(location_from(default_run_dir=config.run_dir))
    lineage = Lineage(store, config.pipeline_name)
    [found] = [s for s in scorings(lineage, span=4) if s.run_id == summary.run_id]
    assert found.rows_scored == GENERATED_ROWS and found.rows_skipped == len(bad)
    # The step scored with the Model artifact of this run's Trainer.
    assert found.model_id == lineage.run_info(summary.run_id).model_id
    ours = _table(Path(found.uri) / "predictions.csv")
    out = tmp_path / "predict.csv"
    model_dir = str(Path(lineage.artifact(found.model_id).uri) / "Format-Serving")
    predict_csv(config, str(clean), output=str(out), model_dir=model_dir)
    assert [(r["probability"], r["prediction"]) for r in ours] == [
        (r["probability"], r["prediction"]) for r in _table(out)
    ]
    again = run_local(with_step, printer=lambda _: None)
    assert {c.node_id: c.state for c in again.components}["BatchInference"] == "CACHED"


def test_benchmark_runs_all_three_on_the_same_rows(scored):
    """benchmarks/batch_inference.py end to end on a few rows (its numbers mean nothing here)."""
    import json

    config, _, _, _ = scored
    done = subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "benchmarks" / "batch_inference.py"),
            "--rows",
            "300",
            "--run-dir",
            config.run_dir,
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        check=True,
    )
    result = json.loads(done.stdout)
    assert set(result["results"]) == {"ours", "predict", "tfx_bulk_inferrer"}
    assert all(r["rows_per_s"] > 0 for r in result["results"].values())
