"""What every scorer of raw CSV rows shares: the serving signature, rows as tf.Examples, outputs as cells.

A pushed model's `serving_default` signature takes serialized raw tf.Examples
and applies the transform graph itself, so scoring only turns CSV rows into
tf.Examples typed by the curated schema: no preprocessing is repeated. `tfxp
predict` (one CSV, outside the pipeline) and batch inference (a span, recorded
in ML Metadata) both read rows, build examples and format outputs here, so the
two give the same numbers for the same row.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any

from components import csv_text
from components.example_gen import csv_checks

SIGNATURE = "serving_default"


class ServingModelError(RuntimeError):
    """The model cannot be used for scoring; the message says what to do."""


def load_serving_signature(model_dir: str):
    """The `serving_default` concrete function of the SavedModel in `model_dir`."""
    import tensorflow as tf

    try:
        model = tf.saved_model.load(model_dir)
        return model.signatures[SIGNATURE]
    except (OSError, KeyError, ValueError) as e:
        raise ServingModelError(
            f"{model_dir}: not a SavedModel with a {SIGNATURE!r} signature: {e}"
        ) from e


def csv_rows(
    path: str, encoding: str = "utf-8", *, strict: bool = True
) -> tuple[list[str], Iterator[tuple[int, list[str]]], csv_text.TextLines]:
    """The header, (line, row) of each data row, and the text lines read, as ExampleGen
    reads them (components/csv_text.py: byte-order mark skipped, text in the dataset's
    encoding). `strict=False` keeps reading past bytes that are not valid text (the
    lines are in the returned TextLines' `invalid`)."""
    text = csv_text.TextLines(path, encoding, strict=strict)
    reader = csv.reader(text)
    header = [h.strip() for h in next(reader, [])]

    def gen() -> Iterator[tuple[int, list[str]]]:
        line = reader.line_num + 1
        for row in reader:
            if row:
                yield line, row
            line = reader.line_num + 1

    return header, gen(), text


def raw_example(header: list[str], row: list[str], types: dict[str, str]) -> bytes:
    """A serialized tf.Example of one CSV row, typed by the schema (`types`: name -> INT/FLOAT/BYTES)."""
    import tensorflow as tf

    feature = {}
    for name, value in zip(header, row, strict=True):
        kind = types.get(name)
        value = value.strip()
        if kind is None or value == "":
            continue  # unknown column, or a missing value: left out like CsvExampleGen does
        if kind == csv_checks.INT:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
        elif kind == csv_checks.FLOAT:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
        else:
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def tabular_columns(options) -> tuple[str, ...]:
    """Output columns of a tabular model: one probability per class and the class, or the value."""
    if options.task == "regression":
        return ("prediction",)
    if options.task == "binary":
        return (f"probability_{options.classes[1]}", "prediction")
    return (*(f"probability_{c}" for c in options.classes), "prediction")


def tabular_cells(options, out) -> list[list[str]]:
    """serving_default's outputs (trainer/tabular/train.py) -> CSV cells per row."""
    if options.task == "regression":
        return [[f"{v:.6g}"] for v in out["predictions"].numpy().reshape(-1)]
    key = "logistic" if options.task == "binary" else "probabilities"
    scores = out[key].numpy()
    names = [c.decode() for c in out["class"].numpy()]
    return [[*(f"{p:.6f}" for p in row), c] for row, c in zip(scores, names, strict=True)]


# A model with its own code (taxi): one probability, the positive class from 0.5 on.
SINGLE_OUTPUT_COLUMNS = ("probability", "prediction")


def prediction_columns(tabular: Any) -> tuple[str, ...]:
    """The output columns for a dataset's model: `tabular_columns`, or probability and prediction."""
    return tabular_columns(tabular) if tabular is not None else SINGLE_OUTPUT_COLUMNS


def single_output(out) -> list[float]:
    """A model with one output (taxi's `probability`): its value per row."""
    import tensorflow as tf

    return [float(p) for p in tf.reshape(next(iter(out.values())), [-1]).numpy()]


def single_output_cells(p: float) -> list[str]:
    return [f"{p:.6f}", str(int(p >= 0.5))]


def row_score(tabular: Any, cells: list[str]) -> float:
    """One number per scored row (the value, or the top class probability): NaN means unscorable."""
    if tabular is None or not tabular.classes:
        return float(cells[0])
    return max(map(float, cells[:-1]))


def prediction_cells(tabular: Any, out) -> list[list[str]]:
    """The signature's outputs for a batch -> the output cells of each row."""
    if tabular is not None:
        return tabular_cells(tabular, out)
    return [single_output_cells(p) for p in single_output(out)]
