"""Rows without a usable label: found, counted and dropped before they become examples.

A row whose label cell is blank, or does not parse as the label's schema type
(text such as "n/a" in a numeric label, NaN, an infinity), cannot be learned
from. With the dataset's `unlabelled_rows: drop` (the default of a generic
tabular dataset), ExampleGen leaves such rows out of every split and records how
many it dropped on the Examples artifact (`UNLABELLED_DROPPED`), so the run's
metadata says what was not trained on. The same rule is `tfxp init`'s.

Two readers use it: the Arrow ingest (whole record batches, `drop_unlabelled`)
and TFX's reader with the CSV checks (one cell at a time, `usable_label`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from components.example_gen.csv_checks import BYTES, FLOAT, INT
from components.io import csv_text

# The Examples artifact's custom property: rows left out for a blank or unparseable label.
UNLABELLED_DROPPED = "unlabelled_rows_dropped"

# Decimal numbers (surrounding spaces are trimmed first), as both readers parse a cell;
# NaN, infinities and Python's "1_000" are no label and are not matched.
_NUMBER = {
    INT: r"^[+-]?[0-9]+$",
    FLOAT: r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$",
}
_ARROW_TYPES = {INT: pa.int64(), FLOAT: pa.float64()}


def usable_label(cell: str, kind: str) -> bool:
    """True if `cell` is a label of schema type `kind` (INT, FLOAT or BYTES)."""
    if cell == "":
        return False
    if kind == BYTES:
        return True
    # The batch rule's pattern (not int()/float(), which also take "1_0", "nan", "inf").
    return re.fullmatch(_NUMBER[kind], cell.strip()) is not None


def has_label(cells, at: int, kind: str) -> bool:
    """TFX's reader path: whether a parsed CSV row (cells as bytes) has a usable label."""
    cell = cells[at] if at < len(cells) else b""
    text = cell.decode("utf-8", "replace") if isinstance(cell, bytes) else str(cell)
    return usable_label(text, kind)


def usable_mask(column: pa.Array, kind: str) -> pa.Array:
    """Boolean mask of the usable labels of a string column (nulls are blank cells)."""
    present = pc.is_valid(column)
    if kind == BYTES:
        return present
    trimmed = pc.utf8_trim_whitespace(column)
    return pc.and_kleene(present, pc.match_substring_regex(trimmed, _NUMBER[kind])).fill_null(False)


def drop_unlabelled(batch: pa.RecordBatch, label: str, kind: str) -> tuple[pa.RecordBatch, int]:
    """(the rows of `batch` with a usable label, the label typed as `kind`; rows dropped).

    `batch` holds the label as text (read as a string column whatever its type), so a
    value that does not parse is dropped here rather than failing the whole block.
    """
    column = batch.column(label)
    mask = usable_mask(column, kind)
    kept = batch.filter(mask)
    dropped = batch.num_rows - kept.num_rows
    if kind == BYTES:
        return kept, dropped
    values = pc.cast(pc.utf8_trim_whitespace(kept.column(label)), _ARROW_TYPES[kind])
    arrays = [values if name == label else kept.column(name) for name in kept.schema.names]
    return pa.RecordBatch.from_arrays(arrays, names=kept.schema.names), dropped


def count_unlabelled(
    paths: Iterable[str], label: str, kind: str, encoding: str = csv_text.DEFAULT_ENCODING
) -> int:
    """Rows of the CSV files whose label cell is not usable (files already checked)."""
    import csv

    dropped = 0
    for path in paths:
        reader = csv.reader(csv_text.TextLines(path, encoding))
        header = [h.strip() for h in next(reader, [])]
        if label not in header:
            continue
        at = header.index(label)
        for row in reader:
            if row and not usable_label(row[at] if at < len(row) else "", kind):
                dropped += 1
    return dropped


def label_as_text(columns: Mapping[str, str], label: str) -> dict[str, str]:
    """`columns` with the label read as text: its cells are checked by `usable_label`."""
    return {**columns, label: BYTES} if label in columns else dict(columns)
