"""Scores the rows of a raw CSV with a pushed model.

The model's `serving_default` signature takes serialized raw tf.Examples and
applies the transform graph itself, so this module only turns CSV rows into
tf.Examples typed by the curated schema: no preprocessing is repeated here.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass

from components import csv_text
from components.example_gen import csv_checks
from components.schema_importer import load_schema, schema_column_types, schema_nan_free_columns
from pipeline.config import PipelineConfig

BATCH_SIZE = 1024
SIGNATURE = "serving_default"


class PredictError(RuntimeError):
    """The model or its input cannot be used; the message says what to do."""


@dataclass
class PredictResult:
    csv_path: str
    model_dir: str
    probabilities: list[float]
    output: str | None

    def __str__(self) -> str:
        n = len(self.probabilities)
        positives = sum(p >= 0.5 for p in self.probabilities)
        lines = [
            f"scored {n} rows of {self.csv_path} with {self.model_dir}",
            f"predicted positive (p >= 0.5): {positives} of {n}",
        ]
        if self.output:
            lines.append(f"predictions written to {self.output}")
        else:
            lines += [f"  row {i + 1}: {p:.4f}" for i, p in enumerate(self.probabilities[:20])]
            if n > 20:
                lines.append(f"  ... {n - 20} more (use --output to write them all)")
        return "\n".join(lines)


def latest_pushed_model(serving_dir: str) -> str:
    """The newest version directory Pusher wrote under `serving_dir`."""
    versions = []
    if os.path.isdir(serving_dir):
        versions = [d for d in os.listdir(serving_dir) if d.isdigit()]
    if not versions:
        raise PredictError(
            f"no pushed model under {serving_dir}; run the pipeline first (`make run`) "
            "or pass --model DIR"
        )
    return os.path.join(serving_dir, max(versions, key=int))


def _rows(path: str, encoding: str = "utf-8") -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    """The header and (line, row) of each data row, read as ExampleGen reads them
    (components/csv_text.py: byte-order mark skipped, text in the dataset's encoding)."""
    reader = csv.reader(csv_text.TextLines(path, encoding, strict=True))
    header = [h.strip() for h in next(reader)]

    def gen() -> Iterator[tuple[int, list[str]]]:
        line = reader.line_num + 1
        for row in reader:
            if row:
                yield line, row
            line = reader.line_num + 1

    return header, gen()


def _example(header: list[str], row: list[str], types: dict[str, str]) -> bytes:
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


def predict_csv(
    config: PipelineConfig,
    csv_path: str,
    *,
    output: str | None = None,
    model_dir: str | None = None,
) -> PredictResult:
    types = _checked_column_types(config, csv_path)
    model_dir = model_dir or latest_pushed_model(config.serving_dir)
    serve = _serving_signature(model_dir)
    header, rows = _rows(csv_path, config.csv_encoding)
    probabilities, lines, all_rows = _score(
        serve, csv_path, header, rows, types, keep_rows=bool(output)
    )
    _refuse_unscorable(csv_path, lines, probabilities)
    if output:
        _write_predictions(output, header, all_rows, probabilities)
    return PredictResult(csv_path, model_dir, probabilities, output)


def _checked_column_types(config: PipelineConfig, csv_path: str) -> dict[str, str]:
    """Column -> schema type, once the CSV passed the ingest's checks."""
    if config.example_gen != "csv":
        raise PredictError(
            f"`tfxp predict` scores CSV rows; {config.pipeline_name!r} is an image dataset. Its "
            f"pushed models ({config.serving_dir}/<version>) take encoded image files: "
            "tf.saved_model.load(DIR).signatures['serving_default'](image_bytes=[png_bytes, ...])"
        )
    if not os.path.isfile(csv_path):
        raise PredictError(f"{csv_path}: no such file")
    schema = load_schema(config.schema_file)
    types = schema_column_types(schema)
    # Serving rows need every feature but the label; check before loading the model.
    required = [n for n in types if n != config.label_key]
    csv_checks.check_csv_files(
        [csv_path],
        types,
        required=required,
        encoding=config.csv_encoding,
        finite=schema_nan_free_columns(schema),
    )
    return types


def _serving_signature(model_dir: str):
    import tensorflow as tf

    try:
        model = tf.saved_model.load(model_dir)
        return model.signatures[SIGNATURE]
    except (OSError, KeyError, ValueError) as e:
        raise PredictError(
            f"{model_dir}: not a SavedModel with a {SIGNATURE!r} signature: {e}"
        ) from e


def _score(
    serve,
    csv_path: str,
    header: list[str],
    rows: Iterator[tuple[int, list[str]]],
    types: dict[str, str],
    *,
    keep_rows: bool,
) -> tuple[list[float], list[int], list[list[str]]]:
    """(probability, line) of every row, in BATCH_SIZE batches; and the rows if `keep_rows`."""
    import tensorflow as tf

    probabilities: list[float] = []
    batch: list[bytes] = []
    all_rows: list[list[str]] = []
    lines: list[int] = []

    def flush() -> None:
        if not batch:
            return
        try:
            out = serve(examples=tf.constant(batch))
        except tf.errors.InvalidArgumentError as e:
            first = lines[len(probabilities)]  # line of the batch's first row
            raise PredictError(
                f"{csv_path}: the model rejected rows from line {first}: {e.message.splitlines()[0]}"
            ) from e
        probabilities.extend(float(p) for p in tf.reshape(next(iter(out.values())), [-1]).numpy())
        batch.clear()

    for line, row in rows:
        batch.append(_example(header, row, types))
        lines.append(line)
        if keep_rows:
            all_rows.append(row)
        if len(batch) >= BATCH_SIZE:
            flush()
    flush()
    return probabilities, lines, all_rows


def _refuse_unscorable(csv_path: str, lines: list[int], probabilities: list[float]) -> None:
    # A NaN cell where the schema allows it can still give the model nothing to
    # score: such rows are refused by line, never printed or written as NaN.
    unscorable = [(i, line) for i, line in enumerate(lines) if not math.isfinite(probabilities[i])]
    if unscorable:
        shown = ", ".join(str(line) for _, line in unscorable[:20])
        more = f" and {len(unscorable) - 20} more" if len(unscorable) > 20 else ""
        raise PredictError(
            f"{csv_path}: the model cannot score {len(unscorable)} row(s) (its output is not a "
            f"number), at line(s) {shown}{more}; they hold values the model cannot use (e.g. "
            "NaN): fix or remove them and rerun. Nothing was written."
        )


def _write_predictions(
    output: str, header: list[str], rows: list[list[str]], probabilities: list[float]
) -> None:
    tmp = output + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([*header, "probability", "prediction"])
        for row, p in zip(rows, probabilities, strict=True):
            writer.writerow([*row, f"{p:.6f}", int(p >= 0.5)])
    os.replace(tmp, output)  # never leave a half-written predictions file
