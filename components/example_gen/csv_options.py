"""The CSV ExampleGen's options (its custom config) and the properties both of its readers record."""

from __future__ import annotations

import json
import math
from typing import Any

from components.example_gen import csv_checks
from components.example_gen.driver import custom_struct
from components.io import csv_text

CSV_READER = "csv_reader"  # which reader wrote the examples: "arrow" or "tfx"
# JSON {BYTES column: characters of its longest cell}, for the gate's absurd-cell warning.
LONGEST_CELLS = "longest_cells"

# Default shard sizing: one shard per this much raw CSV per split. GZIP'd
# tf.Examples come out at ~0.3-0.4x the CSV's size (measured on taxi data), so
# this is ~100 MB per shard: large enough that per-file overhead vanishes,
# small enough that readers interleave several shards in parallel.
RAW_BYTES_PER_SHARD = 256 * 1024 * 1024

# The CSV reader when the component's custom config names none: the Arrow
# ingest (components/example_gen/csv_ingest.py), which writes the same examples in the same
# splits as TFX's reader, each shard one GZIP stream with its trailer.
DEFAULT_CSV_READER = "arrow"
CSV_READERS = ("arrow", "tfx")


def columns_of(exec_properties: dict[str, Any]) -> dict[str, str]:
    """Column name -> schema type (INT, FLOAT, BYTES) from the custom config; empty if none."""
    columns = custom_struct(exec_properties).get("columns") or {}
    return {k: str(v) for k, v in columns.items()}


def text_options(exec_properties: dict[str, Any]) -> tuple[str, frozenset[str]]:
    """(the CSV text encoding, FLOAT columns where NaN is refused) from the custom config."""
    struct = custom_struct(exec_properties)
    encoding = str(struct.get("encoding") or csv_text.DEFAULT_ENCODING)
    return encoding, frozenset(str(c) for c in struct.get("nan_free") or ())


def unlabelled_option(exec_properties: dict[str, Any]) -> tuple[str, str]:
    """(the label column whose blank or unparseable rows are dropped, its type), or ("", "")."""
    label = str(custom_struct(exec_properties).get("drop_unlabelled") or "")
    columns = columns_of(exec_properties)
    return (label, columns.get(label, csv_checks.BYTES)) if label else ("", "")


def set_longest_cells(examples, longest: dict[str, int]) -> None:
    examples.set_string_custom_property(LONGEST_CELLS, json.dumps(longest, sort_keys=True))


def shards_for(raw_bytes: int, fraction: float, configured: int = 0) -> int:
    """TFRecord shards for a split holding `fraction` of `raw_bytes` of CSV."""
    if configured > 0:
        return configured
    return max(1, math.ceil(raw_bytes * fraction / RAW_BYTES_PER_SHARD))
