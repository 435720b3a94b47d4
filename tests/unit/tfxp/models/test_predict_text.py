"""`tfxp predict` reads CSV as ExampleGen does and refuses rows it cannot score.

A stand-in SavedModel (its serving_default parses trip_miles and returns NaN
above 1000 miles) keeps this a unit test: no pipeline run.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from components.example_gen.csv_checks import CsvInputError
from pipeline.config import PROJECT_ROOT
from pipeline.datasets import dataset_config
from tfxp.models.predict import PredictError, predict_csv

EMBEDDED_CSV = PROJECT_ROOT / "data" / "taxi" / "span-1" / "data.csv"


class _Model(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
        spec = {"trip_miles": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0])}
        miles = tf.io.parse_example(examples, spec)["trip_miles"]
        nan = tf.constant(np.nan, tf.float32)
        return {"output_0": tf.where(miles > 1000.0, nan, tf.sigmoid(miles / 10.0))}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("model") / "1")
    model = _Model()
    tf.saved_model.save(model, path, signatures={"serving_default": model.serve})
    return path


def _rows(n: int = 30) -> list[list[str]]:
    with EMBEDDED_CSV.open(newline="") as f:
        return list(itertools.islice(csv.reader(f), n + 1))


def _write(path: Path, rows, prefix: bytes = b"") -> str:
    with path.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    path.write_bytes(prefix + path.read_bytes())
    return str(path)


def test_bom_file_scores_as_the_plain_file(tmp_path, model_dir):
    config = dataset_config("taxi")
    plain = predict_csv(config, _write(tmp_path / "plain.csv", _rows()), model_dir=model_dir)
    bom = _write(tmp_path / "bom.csv", _rows(), prefix=b"\xef\xbb\xbf")
    assert predict_csv(config, bom, model_dir=model_dir).probabilities == plain.probabilities


def test_rows_the_model_cannot_score_are_refused_by_line(tmp_path, model_dir):
    rows = _rows()
    miles = rows[0].index("trip_miles")
    rows[4][miles] = rows[9][miles] = "5000"  # lines 5 and 10
    out = tmp_path / "pred.csv"
    path = _write(tmp_path / "data.csv", rows)
    with pytest.raises(PredictError) as info:
        predict_csv(dataset_config("taxi"), path, model_dir=model_dir, output=str(out))
    assert "cannot score 2 row(s)" in str(info.value) and "line(s) 5, 10" in str(info.value)
    assert not out.exists(), "nothing is written when a row cannot be scored"


def test_nan_in_a_finite_column_is_refused_before_scoring(tmp_path, model_dir):
    rows = _rows()
    rows[3][rows[0].index("fare")] = "nan"
    path = _write(tmp_path / "data.csv", rows)
    with pytest.raises(CsvInputError, match=r"data.csv:4 column 'fare'.*disallow_nan"):
        predict_csv(dataset_config("taxi"), path, model_dir=model_dir)


def test_latin1_file_is_read_in_the_datasets_encoding(tmp_path, model_dir):
    rows = _rows()
    rows[2][rows[0].index("company")] = "Café Cab"
    path = tmp_path / "latin.csv"
    with path.open("w", newline="", encoding="latin-1") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    with pytest.raises(CsvInputError, match=r"latin.csv:3 column 'company': not valid UTF-8"):
        predict_csv(dataset_config("taxi"), str(path), model_dir=model_dir)
    result = predict_csv(
        dataset_config("taxi").replace(csv_encoding="latin-1"), str(path), model_dir=model_dir
    )
    assert len(result.probabilities) == 30
