"""Scores the rows of a raw CSV with a pushed model.

The model's `serving_default` signature takes serialized raw tf.Examples and
applies the transform graph itself, so this module only turns CSV rows into
tf.Examples typed by the curated schema: no preprocessing is repeated here.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from components.batch_inference import serving
from components.batch_inference.serving import tabular_columns
from components.example_gen import csv_checks
from components.io import csv_text
from components.validation.schema_importer import (
    load_schema,
    schema_column_types,
    schema_nan_free_columns,
)
from pipeline.config import PipelineConfig

BATCH_SIZE = 1024
__all__ = ["PredictError", "PredictResult", "predict_csv"]


class PredictError(RuntimeError):
    """The model or its input cannot be used; the message says what to do."""


@dataclass
class PredictResult:
    csv_path: str
    model_dir: str
    probabilities: list[float]
    output: str | None
    # Tabular datasets (trainer/tabular): the output columns and each row's cells.
    columns: tuple[str, ...] = ()
    scored: list[list[str]] | None = None

    def __str__(self) -> str:
        if self.scored is not None:
            return _render_tabular(self)
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


def predict_csv(
    config: PipelineConfig,
    csv_path: str,
    *,
    output: str | None = None,
    model_dir: str | None = None,
) -> PredictResult:
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
    renamed = with_feature_names(csv_path, types, config.csv_encoding)
    nan_free = schema_nan_free_columns(schema)
    try:
        return _predict(
            config, renamed or csv_path, types, nan_free, output, model_dir, shown=csv_path
        )
    except (PredictError, csv_checks.CsvInputError) as e:
        if not renamed:
            raise
        raise type(e)(str(e).replace(renamed, csv_path)) from e  # name the user's file
    finally:
        if renamed:
            os.remove(renamed)


def with_feature_names(csv_path: str, types: Mapping[str, str], encoding: str) -> str | None:
    """A copy of the file with `tfxp init`'s renamed column names (pipeline.datasets.feature_name)
    in the header, when its header still has the original ones; else None."""
    import io
    import shutil
    import tempfile

    from pipeline.headers import feature_header

    try:
        header = csv_text.read_header(csv_path, encoding)
    except csv_text.CsvTextError:
        return None  # the CSV checks name what is wrong with the file
    names = feature_header(header, types)
    if names == [h.strip() for h in header]:
        return None
    fd, path = tempfile.mkstemp(suffix=".csv")
    with open(csv_path, "rb") as src, os.fdopen(fd, "wb") as out:
        src.readline()  # the old header (and any byte-order mark)
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerow(names)
        out.write(text.getvalue().encode(encoding))
        shutil.copyfileobj(src, out)
    return path


def _predict(config, csv_path, types, nan_free, output, model_dir, shown) -> PredictResult:
    # Serving rows need every feature but the label; check before loading the model.
    required = [n for n in types if n != config.label_key]
    csv_checks.check_csv_files(
        [csv_path],
        types,
        required=required,
        encoding=config.csv_encoding,
        finite=nan_free,
    )
    model_dir = model_dir or latest_pushed_model(config.serving_dir)
    serve = _serving_signature(model_dir)
    header, rows, _ = serving.csv_rows(csv_path, config.csv_encoding)
    probabilities, scored, lines, all_rows = _score(
        serve, csv_path, header, rows, types, config.tabular, keep_rows=bool(output)
    )
    _refuse_unscorable(csv_path, lines, probabilities)
    columns = tabular_columns(config.tabular) if config.tabular is not None else ()
    if output:
        _write_predictions(output, header, all_rows, probabilities, columns, scored)
    if config.tabular is not None:
        return PredictResult(shown, model_dir, probabilities, output, columns, scored)
    return PredictResult(shown, model_dir, probabilities, output)


def _serving_signature(model_dir: str):
    try:
        return serving.load_serving_signature(model_dir)
    except serving.ServingModelError as e:
        raise PredictError(str(e)) from e


def _score(
    serve,
    csv_path: str,
    header: list[str],
    rows: Iterator[tuple[int, list[str]]],
    types: dict[str, str],
    tabular,
    *,
    keep_rows: bool,
) -> tuple[list[float], list[list[str]], list[int], list[list[str]]]:
    """Every row scored in BATCH_SIZE batches: (one number per row: the probability,
    the value or the top class probability; a tabular model's output cells per row;
    each row's line; the rows themselves if `keep_rows`)."""
    import tensorflow as tf

    probabilities: list[float] = []
    scored: list[list[str]] = []
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
        if tabular is not None:
            scored.extend(serving.tabular_cells(tabular, out))
            probabilities.extend(
                serving.row_score(tabular, r) for r in scored[len(probabilities) :]
            )
        else:
            probabilities.extend(serving.single_output(out))
        batch.clear()

    encode = serving.RowEncoder(header, types)
    for line, row in rows:
        batch.append(encode(row))
        lines.append(line)
        if keep_rows:
            all_rows.append(row)
        if len(batch) >= BATCH_SIZE:
            flush()
    flush()
    return probabilities, scored, lines, all_rows


def _refuse_unscorable(csv_path: str, lines: list[int], probabilities: list[float]) -> None:
    # A NaN cell where the schema allows it can still give the model nothing to
    # score: such rows are refused by line, never printed or written as NaN.
    unscorable = [line for i, line in enumerate(lines) if not math.isfinite(probabilities[i])]
    if unscorable:
        listed = ", ".join(str(line) for line in unscorable[:20])
        more = f" and {len(unscorable) - 20} more" if len(unscorable) > 20 else ""
        raise PredictError(
            f"{csv_path}: the model cannot score {len(unscorable)} row(s) (its output is not a "
            f"number), at line(s) {listed}{more}; they hold values the model cannot use (e.g. "
            "NaN): fix or remove them and rerun. Nothing was written."
        )


def _write_predictions(output, header, rows, probabilities, columns, scored) -> None:
    tmp = output + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        if columns:
            writer.writerow([*header, *columns])
            writer.writerows([*row, *cells] for row, cells in zip(rows, scored, strict=True))
        else:
            writer.writerow([*header, *serving.SINGLE_OUTPUT_COLUMNS])
            for row, p in zip(rows, probabilities, strict=True):
                writer.writerow([*row, *serving.single_output_cells(p)])
    os.replace(tmp, output)  # never leave a half-written predictions file


def _render_tabular(result: PredictResult) -> str:
    rows = result.scored or []
    n = len(rows)
    lines = [f"scored {n} rows of {result.csv_path} with {result.model_dir}"]
    if result.columns == ("prediction",):
        values = [float(r[0]) for r in rows]
        if values:
            lines.append(
                f"predicted values: mean {sum(values) / n:.4g}, min {min(values):.4g}, "
                f"max {max(values):.4g}"
            )
    else:
        counts: dict[str, int] = {}
        for r in rows:
            counts[r[-1]] = counts.get(r[-1], 0) + 1
        lines.append(
            "predicted classes: " + ", ".join(f"{c} {k}" for c, k in sorted(counts.items()))
        )
    if result.output:
        lines.append(f"predictions written to {result.output}")
    else:
        lines.append("  row  " + "  ".join(result.columns))
        lines += [f"  {i + 1:>3}  " + "  ".join(r) for i, r in enumerate(rows[:20])]
        if n > 20:
            lines.append(f"  ... {n - 20} more (use --output to write them all)")
    return "\n".join(lines)
