"""Scores an event CSV with a pushed sequence model: one prediction per key.

The events are grouped, ordered and encoded into SequenceExamples by the
ExampleGen's own functions (components/example_gen/sequence_records.py), without the
label, and handed to the model's `serving_default`, which parses them and applies
the transform graph itself. `tfxp predict` and `tfxp infer` both come here for
`kind: sequence` datasets; `tfxp serve` answers the same bytes with the same numbers.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from dataclasses import dataclass

from components.batch_inference import serving
from components.batch_inference.serving import tabular_cells, tabular_columns
from components.example_gen.csv_checks import CsvInputError, check_csv_files
from components.example_gen.sequence_records import (
    Layout,
    SequenceInputError,
    examples_of_files,
)
from components.validation.schema_importer import load_schema, sequence_column_types
from pipeline.config import PipelineConfig
from tfxp.models.predict import PredictError, latest_pushed_model, with_feature_names

BATCH_SIZE = 512


class SequencePredictError(RuntimeError):
    """The model or the event table cannot be used; the message says what to do."""


@dataclass
class SequencePredictions:
    csv_paths: list[str]
    model_dir: str
    key: str
    columns: tuple[str, ...]
    rows: list[list[str]]  # [key, *cells]
    events: int
    output: str | None

    def __str__(self) -> str:
        n = len(self.rows)
        lines = [
            f"scored {n} sequences ({self.events} events) of {', '.join(self.csv_paths)} "
            f"with {self.model_dir}"
        ]
        if self.columns == ("prediction",):
            values = [float(r[1]) for r in self.rows]
            lines.append(
                f"predicted values: mean {sum(values) / n:.4g}, min {min(values):.4g}, "
                f"max {max(values):.4g}"
            )
        else:
            counts: dict[str, int] = {}
            for r in self.rows:
                counts[r[-1]] = counts.get(r[-1], 0) + 1
            lines.append("predicted: " + ", ".join(f"{c} {k}" for c, k in sorted(counts.items())))
        if self.output:
            lines.append(f"predictions (one row per {self.key}) written to {self.output}")
        else:
            lines.append(f"  {self.key}  " + "  ".join(self.columns))
            lines += ["  " + "  ".join(r) for r in self.rows[:20]]
            if n > 20:
                lines.append(f"  ... {n - 20} more (use --output to write them all)")
        return "\n".join(lines)


def sequence_layout(config: PipelineConfig) -> Layout:
    """The dataset's layout, with every column's type from its curated schema."""
    sequence = config.sequence
    kinds = sequence_column_types(load_schema(config.schema_file))
    kinds[sequence.order_by] = "BYTES" if sequence.order_format == "timestamp" else "FLOAT"
    return Layout.of(sequence.to_dict(), kinds)


def serialized_examples(
    config: PipelineConfig, csv_paths: Iterable[str]
) -> tuple[list[tuple[str, bytes]], int]:
    """((key, serialized SequenceExample without the label) of every key, events read)."""
    layout = sequence_layout(config)
    paths = [str(p) for p in csv_paths]
    for path in paths:
        if not os.path.isfile(path):
            raise SequencePredictError(f"{path}: no such file")
    kinds = {c: layout.kinds[c] for c in layout.columns(with_label=False)}
    # Headers `tfxp init` renamed (invalid feature names) are read under their new names.
    copies = {p: with_feature_names(p, layout.kinds, config.csv_encoding) for p in paths}
    readable = [copies[p] or p for p in paths]
    try:
        # The tables' checks (file, line, column) for the columns a request carries.
        events = check_csv_files(
            readable, kinds, required=list(kinds), encoding=config.csv_encoding
        )
        built = examples_of_files(readable, layout, config.csv_encoding, with_label=False)
    except (CsvInputError, SequenceInputError) as e:
        message = str(e)
        for path, copy in copies.items():
            message = message.replace(copy, path) if copy else message  # the user's file
        raise SequencePredictError(message) from e
    finally:
        for copy in copies.values():
            if copy:
                os.remove(copy)
    return [(key, example.SerializeToString()) for key, example in built], events


def score(serve, options, examples: list[bytes]) -> list[list[str]]:
    """serving_default's output cells (trainer/sequence/train.py) for every example."""
    import tensorflow as tf

    cells: list[list[str]] = []
    for start in range(0, len(examples), BATCH_SIZE):
        batch = tf.constant(examples[start : start + BATCH_SIZE])
        try:
            out = serve(examples=batch)
        except tf.errors.InvalidArgumentError as e:
            raise SequencePredictError(
                f"the model rejected a batch of sequences: {e.message.splitlines()[0]}"
            ) from e
        cells.extend(tabular_cells(options, out))
    return cells


def predict_events(
    config: PipelineConfig,
    csv_paths: list[str],
    *,
    output: str | None = None,
    model_dir: str | None = None,
) -> SequencePredictions:
    """One prediction per key of the event CSV(s), written to `output` when given."""
    built, events = serialized_examples(config, csv_paths)
    if not built:
        raise SequencePredictError(f"{', '.join(csv_paths)}: no events to score")
    try:
        model_dir = model_dir or latest_pushed_model(config.serving_dir)
        serve = serving.load_serving_signature(model_dir)
    except (PredictError, serving.ServingModelError) as e:
        raise SequencePredictError(str(e)) from e
    options = config.sequence
    cells = score(serve, options, [b for _, b in built])
    rows = [[key, *c] for (key, _), c in zip(built, cells, strict=True)]
    columns = tabular_columns(options)
    if output:
        tmp = output + ".tmp"
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow([options.key, *columns])
            writer.writerows(rows)
        os.replace(tmp, output)  # never a half-written predictions file
    return SequencePredictions(
        list(csv_paths), model_dir, options.key, columns, rows, events, output
    )
