"""Your own table, no code: `tfxp init` -> `tfxp run` -> `tfxp predict` -> `tfxp data add` -> rerun.

Tables scikit-learn ships, written to CSV here with a column of strings and
blank cells added: wine (multiclass, string and integer labels), breast
cancer (binary; its column names have spaces, so they are renamed) and
diabetes (regression). No per-dataset Python: every dataset is made by
`tfxp init` and trained by the generic tabular trainer.
"""

from __future__ import annotations

import contextlib
import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from data.tables import CASES, write_table
from metadata.summary import RunSummary
from pipeline.datasets import DATASET_PATH_ENV

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

METRIC = {
    "multiclass": "sparse_categorical_accuracy",
    "binary": "binary_accuracy",
    "regression": "root_mean_squared_error",
}


@contextlib.contextmanager
def dataset_path(home: Path):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DATASET_PATH_ENV, str(home))
        yield


def tfxp(home: Path, *args: str) -> tuple[int, str, str]:
    from tfxp.cli import main

    out, err = io.StringIO(), io.StringIO()
    with dataset_path(home), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@dataclass
class TableRuns:
    name: str
    task: str
    labels: list
    init_output: str
    first: RunSummary
    predict_output: str
    predictions: list[dict]
    home: Path
    config: Any
    rows: list[dict]


@pytest.fixture(scope="module", params=sorted(CASES))
def table_runs(request, tmp_path_factory) -> TableRuns:
    from pipeline.datasets import dataset_config
    from tfxp.local.runner import run_local

    name = request.param
    task = CASES[name][3]
    tmp = tmp_path_factory.mktemp(name)
    home, data, run = tmp / "schema", tmp / "data", tmp / "run"
    _, labels = write_table(name, tmp / f"{name}.csv")
    code, init_out, err = tfxp(
        home, "init", name, "--csv", str(tmp / f"{name}.csv"), "--label", CASES[name][1],
        "--data-root", str(data),
    )  # fmt: skip
    assert code == 0, err

    with dataset_path(home):
        # Train steps as `tfxp init` chose them (about 15 passes over the training rows).
        config = dataset_config(name).replace(run_dir=str(run))
    quiet = {"printer": lambda _: None}
    first = run_local(config, **quiet)

    # Rows to score: the published span's rows (renamed header) without the label.
    (span_file,) = (data / "span-1").glob("*.csv")
    with span_file.open() as f:
        rows = list(csv.DictReader(f))
    label = config.label_key
    requests = tmp / "requests.csv"
    with requests.open("w", newline="") as f:
        writer = csv.DictWriter(f, [k for k in rows[0] if k != label])
        writer.writeheader()
        writer.writerows({k: v for k, v in r.items() if k != label} for r in rows[:40])
    out = tmp / "predictions.csv"
    code, predict_out, err = tfxp(
        home, "predict", "--dataset", name, "--run-dir", str(run), str(requests), "-o", str(out)
    )
    assert code == 0, err
    with out.open() as f:
        predictions = list(csv.DictReader(f))
    return TableRuns(
        name, task, labels, init_out, first, predict_out, predictions, home, config, rows
    )


@pytest.fixture(scope="module")
def second_span(table_runs) -> tuple[RunSummary, RunSummary]:
    """Span 2 via `tfxp data add`, its run, and an unchanged rerun (a fixture of its own, so
    each test's timeout covers at most two runs)."""
    from tfxp.local.runner import run_local

    t = table_runs
    # The same rows in another order: new bytes, the same distribution (no drift).
    drop = Path(t.config.run_dir).parent / "drop" / "more.csv"
    drop.parent.mkdir()
    with drop.open("w", newline="") as f:
        writer = csv.DictWriter(f, list(t.rows[0]))
        writer.writeheader()
        writer.writerows(t.rows[::-1])
    code, _, err = tfxp(t.home, "data", "add", t.name, str(drop))
    assert code == 0, err
    quiet = {"printer": lambda _: None}
    return run_local(t.config, **quiet), run_local(t.config, **quiet)


def test_init_prints_what_it_inferred(table_runs):
    out = table_runs.init_output
    assert f"task: {table_runs.task}" in out
    assert "site" in out and "vocabulary" in out and "zscore" in out
    assert "blanks -> mean + is-missing indicator" in out
    assert f"next: tfxp run --dataset {table_runs.name}" in out
    if table_runs.name == "cancer":  # "mean radius" is not a valid feature name
        assert "'mean radius' is not a valid feature name" in out and "'mean_radius'" in out


def test_run_pushes_a_blessed_model_beating_the_trivial_baseline(table_runs):
    first = table_runs.first
    assert first.blessed and first.pushed, first.render()
    value = first.metrics[METRIC[table_runs.task]]
    if table_runs.task == "regression":
        baseline = float(np.std(table_runs.labels))  # RMSE of predicting the mean
        assert value < 0.85 * baseline, (value, baseline)
    else:
        _, counts = np.unique(table_runs.labels, return_counts=True)
        majority = counts.max() / counts.sum()
        assert value > majority + 0.5 * (1 - majority), (value, majority)


def test_predict_scores_rows_without_label(table_runs):
    rows = table_runs.predictions
    assert len(rows) == 40
    assert "scored 40 rows" in table_runs.predict_output
    if table_runs.task == "regression":
        values = [float(r["prediction"]) for r in rows]
        assert len(set(values)) > 1  # not a constant model
    else:
        classes = {str(v) for v in table_runs.labels}
        assert {r["prediction"] for r in rows} <= classes
        probability_columns = [k for k in rows[0] if k.startswith("probability_")]
        assert probability_columns
        if table_runs.task == "multiclass":
            assert len(probability_columns) == len(classes)
            for r in rows:
                assert abs(sum(float(r[k]) for k in probability_columns) - 1.0) < 1e-3


# A second span goes through the same commands whatever the table: one dataset
# (string labels, the vocabulary path) shows it; the others would only repeat it.
@pytest.mark.parametrize("table_runs", ["wine"], indirect=True)
def test_second_span_trains_and_an_unchanged_rerun_is_cached(table_runs, request):
    second, cached = request.getfixturevalue("second_span")
    assert {c.state for c in second.components} <= {"COMPLETE", "CACHED", "RESOLVED"}
    assert "CsvExampleGen" in second.executed and "Trainer" in second.executed
    assert "CuratedSchemaImporter" in second.cached  # the schema did not change
    assert not cached.executed, cached.render()


def test_console_shows_an_init_datasets_runs(table_runs):
    """`tfxp ui` over a `tfxp init` dataset's store: its runs, pages and lineage answer."""
    from console_check import check_console

    from metadata.store import location_from

    with dataset_path(table_runs.home):
        shown = check_console(location_from(run_dir=table_runs.config.local_dir))
    assert shown and set(shown.values()) == {"complete"}, shown


@pytest.mark.parametrize("baseline", [False, True], ids=["first-run", "own-baseline"])
def test_evaluation_takes_the_fast_path_and_equals_tfma(table_runs, baseline, tmp_path, caplog):
    """Every task's model (binary: logistic and class outputs; multiclass: probabilities
    and class; regression: predictions, RMSE) is evaluated on the fast path, and TFX's
    executor (TFMA) on the same inputs agrees on every metric, the validation result and
    the blessing; against a baseline too (the model itself: every diff is 0)."""
    from evaluator_parity import assert_same_evaluation, fast_and_tfma
    from evaluator_runs import evaluator_inputs

    logs = "".join(p.read_text() for p in (Path(table_runs.config.run_dir) / "logs").glob("*.log"))
    assert "Evaluator: fast path" in logs and "Evaluator: TFMA path" not in logs
    inputs, properties, _ = evaluator_inputs(table_runs.config)
    # The newest evaluation may have had a baseline (a later span's run): set it either way.
    inputs = {k: v for k, v in inputs.items() if k != "baseline_model"}
    if baseline:
        inputs["baseline_model"] = inputs["model"]
    values = assert_same_evaluation(*fast_and_tfma(inputs, properties, tmp_path, caplog))
    names = {name for _, name in values}
    assert any(f'"{METRIC[table_runs.task]}"' in k for k in names), names
    diffs = [v for (_, k), v in values.items() if "is_diff: true" in k]
    assert bool(diffs) == baseline and all(v == 0.0 for v in diffs)


@pytest.mark.parametrize("table_runs", ["diabetes"], indirect=True)
def test_console_draws_a_regression_models_plots(table_runs):
    """The diabetes model's evaluation page in headless Chromium: predicted against
    actual (with y = x) and the residual histogram drew, with plots.json's numbers, the
    data link serves that file, no console error."""
    import json

    from browser import console_errors, fetched, new_driver
    from selenium.webdriver.common.by import By
    from test_ui_browser import _drawn, serving
    from tfx.orchestration import metadata

    connection = metadata.sqlite_metadata_connection_config(table_runs.config.metadata_path)
    with metadata.Metadata(connection) as m:
        evaluation = max(m.store.get_artifacts_by_type("ModelEvaluation"), key=lambda a: a.id)
    plots = json.loads((Path(evaluation.uri) / "plots.json").read_text())
    models = plots["slices"]["overall"]["models"]
    assert set(models) == {""} and {"predicted_actual", "residuals"} <= set(models[""])
    with dataset_path(table_runs.home), serving(Path(table_runs.config.local_dir)) as base:
        driver = new_driver()
        try:
            driver.get(f"{base}/artifact/{evaluation.id}")
            diagonal, line = _drawn(driver, "chart-predicted-actual")
            assert diagonal["x"] == diagonal["y"] and len(diagonal["x"]) == 2
            assert line["x"] == models[""]["predicted_actual"]["predicted"]
            assert line["y"] == models[""]["predicted_actual"]["actual"]
            (bars,) = _drawn(driver, "chart-residuals")
            assert bars["y"] == models[""]["residuals"]["count"]
            assert (
                sum(bars["y"]) + models[""]["residuals"]["below"] + models[""]["residuals"]["above"]
                == plots["slices"]["overall"]["examples"][""]
            )
            link = driver.find_element(By.ID, "data-residuals").get_attribute("href")
            text = fetched(driver, link)
            assert json.loads(text) == plots
            assert not console_errors(driver)
        finally:
            driver.quit()
