"""A table as it comes: `tfxp init` -> `tfxp run` -> `tfxp predict` with no edit.

A cars-like table generated here (~400 rows, MPG regression): 8 rows without a
label, a model year written as an ISO date, a near-unique car name, a free-text
comment column (a few blank), blanks in horsepower. `init` must drop the unlabelled rows (and
say how many), read the year as a date, exclude the name as an id and tokenize
the comment; the run must drop the same rows in ExampleGen (recorded on its
Examples artifact) and bless a model that beats predicting the mean; `predict`
must score raw rows, date string and text included.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from data.tables import ROWS, UNLABELLED, write_cars
from metadata.summary import RunSummary

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@dataclass
class CarsRun:
    rows: list[dict]
    init_output: str
    dataset_yaml: str
    run: RunSummary
    config: object
    predictions: list[dict]
    home: Path


@pytest.fixture(scope="module")
def cars(tmp_path_factory) -> CarsRun:
    from test_tabular_e2e import dataset_path, tfxp

    from pipeline.datasets import dataset_config
    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("cars")
    home, data, run_dir = tmp / "schema", tmp / "data", tmp / "run"
    rows = write_cars(tmp / "cars.csv")
    code, init_out, err = tfxp(
        home, "init", "cars", "--csv", str(tmp / "cars.csv"), "--label", "MPG",
        "--data-root", str(data),
    )  # fmt: skip
    assert code == 0, err
    with dataset_path(home):
        config = dataset_config("cars").replace(run_dir=str(run_dir))
    summary = run_local(config, printer=lambda _: None)

    requests = tmp / "requests.csv"
    with requests.open("w", newline="") as f:
        writer = csv.DictWriter(f, [k for k in rows[0] if k != "MPG"])
        writer.writeheader()
        writer.writerows({k: v for k, v in r.items() if k != "MPG"} for r in rows[:40])
    out = tmp / "predictions.csv"
    code, _, err = tfxp(
        home, "predict", "--dataset", "cars", "--run-dir", str(run_dir), str(requests),
        "-o", str(out),
    )  # fmt: skip
    assert code == 0, err
    with out.open() as f:
        predictions = list(csv.DictReader(f))
    text = (home / "cars" / "dataset.yaml").read_text()
    return CarsRun(rows, init_out, text, summary, config, predictions, home)


def _line(output: str, column: str) -> str:
    return next(line for line in output.splitlines() if line.strip().startswith(column + " "))


def test_init_drops_unlabelled_rows_reads_the_date_and_flags_the_id(cars):
    out = cars.init_output
    assert f"dropped {UNLABELLED} row(s) without a usable label" in out
    assert f"dataset cars: {ROWS - UNLABELLED} rows" in out
    assert " date " in _line(out, "Year") and "ISO dates" in _line(out, "Year")
    name = _line(out, "Name")
    assert "excluded" in name and "distinct values" in name
    assert " text " in _line(out, "Comment")
    assert "Year: {treatment: date, format: iso}" in cars.dataset_yaml
    assert "Comment: {treatment: text}" in cars.dataset_yaml
    assert "unlabelled_rows: drop" in cars.dataset_yaml


def test_example_gen_drops_the_same_rows_and_records_them(cars):
    from components.example_gen.labels import UNLABELLED_DROPPED
    from metadata.properties import prop
    from metadata.store import location_from, open_store

    store = open_store(location_from(run_dir=cars.config.local_dir))
    examples = store.get_artifacts_by_type("Examples")
    raw = [a for a in examples if prop(a, UNLABELLED_DROPPED) is not None]
    assert raw, "no Examples artifact records the dropped rows"
    assert prop(raw[0], UNLABELLED_DROPPED) == UNLABELLED
    assert prop(raw[0], "row_count") == ROWS - UNLABELLED
    assert prop(raw[0], "csv_reader") == "arrow"  # the fast path dropped them, no fallback
    # The metadata layer's lineage says so too (`tfxp lineage`).
    from metadata.lineage import Lineage

    version = Lineage(store, cars.config.pipeline_name).data_version(raw[0])
    assert version.unlabelled_dropped == UNLABELLED
    assert f"{ROWS - UNLABELLED} rows ({UNLABELLED} without a label dropped)" in version.rows_text


def test_the_model_is_blessed_and_beats_the_mean(cars):
    assert cars.run.blessed and cars.run.pushed, cars.run.render()
    labels = [float(r["MPG"]) for r in cars.rows if r["MPG"]]
    rmse = cars.run.metrics["root_mean_squared_error"]
    assert rmse < 0.6 * float(np.std(labels)), (rmse, np.std(labels))


def test_predict_scores_raw_rows_with_dates_and_text(cars):
    assert len(cars.predictions) == 40
    truth = [float(r["MPG"]) for r in cars.rows[:40] if r["MPG"]]
    predicted = [
        float(p["prediction"])
        for p, r in zip(cars.predictions, cars.rows[:40], strict=True)
        if r["MPG"]
    ]
    error = float(np.sqrt(np.mean((np.array(truth) - np.array(predicted)) ** 2)))
    assert error < 0.6 * float(np.std(truth)), error


# Last in the module: it adds a span to the dataset the tests above read.
def test_a_span_whose_dates_changed_format_is_blocked(cars, tmp_path):
    """Span 2 writes the model year as dd/mm/yyyy: the gate blocks before Transform."""
    from test_tabular_e2e import tfxp

    from pipeline import node_ids
    from tfxp.local.runner import ValidationBlockedError, run_local

    drop = tmp_path / "span2.csv"
    with drop.open("w", newline="") as f:
        writer = csv.DictWriter(f, list(cars.rows[0]))
        writer.writeheader()
        for r in cars.rows:
            year, month, day = r["Year"].split("-")
            writer.writerow({**r, "Year": f"{day}/{month}/{year}"})
    code, _, err = tfxp(cars.home, "data", "add", "cars", str(drop))
    assert code == 0, err
    with pytest.raises(ValidationBlockedError) as blocked:
        run_local(cars.config, to_nodes=[node_ids.VALIDATION_GATE], printer=lambda _: None)
    message = str(blocked.value)
    row = " ".join(next(ln for ln in message.splitlines() if ln.split()[:1] == ["Year"]).split())
    assert "share parsed 0 < 0.95 blocks" in row, message
    record = blocked.value.record  # a line per finding, TFDV's descriptions whole
    assert "schema Year: share parsed 0 < threshold 0.95" in record, record
    assert "the date format changed" in record
