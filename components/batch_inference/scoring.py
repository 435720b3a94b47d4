"""Scores a span's CSV files row by row in fixed-size batches: memory does not grow with the span.

Each data row becomes a raw tf.Example (serving.RowEncoder,
the same code as `tfxp predict`) and goes to the serving signature in batches
of `batch_size`; each scored row goes straight to the sink (the predictions
writer), so a million-row span needs no more memory than a thousand-row one.

A row the model cannot take is named by file and line, skipped and counted,
never scored with a guess:
  - a row whose field count differs from the header's, text not valid in the
    dataset's encoding, a cell that is not of its schema type (the CSV checks'
    own rule, `csv_checks.cell_problem`);
  - a batch the serving signature rejects (e.g. a missing required value) is
    split in halves until the rejected rows are found alone;
  - a row whose output is not a number (NaN where the schema allows it).
A file that cannot be scored at all (a required column missing from its
header, malformed CSV quoting, unreadable text) raises ScoringError: nothing
from the span is published.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from components.batch_inference import serving
from components.example_gen import csv_checks
from components.io import csv_text

BATCH_SIZE = 1024
# Skipped rows kept in memory for the report; all of them go to the sink.
REPORTED_SKIPS = 20


class ScoringError(ValueError):
    """A file of the span cannot be scored at all; the message names it and what to do."""


@dataclass(frozen=True)
class SkippedRow:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass
class ScoringReport:
    files: list[str] = field(default_factory=list)
    rows_read: int = 0
    rows_scored: int = 0
    rows_skipped: int = 0
    # The first REPORTED_SKIPS skipped rows (the sink has every one).
    skipped: list[SkippedRow] = field(default_factory=list)
    # Time spent reading and scoring (set by the caller that timed it).
    seconds: float = 0.0

    def skip(self, row: SkippedRow) -> None:
        self.rows_skipped += 1
        if len(self.skipped) < REPORTED_SKIPS:
            self.skipped.append(row)


class Sink(Protocol):
    def write(self, path: str, line: int, keys: Sequence[str], cells: Sequence[str]) -> None: ...

    def skipped(self, row: SkippedRow) -> None: ...


@dataclass(frozen=True)
class RowSpec:
    """How rows are read and what goes out with each prediction."""

    types: dict[str, str]  # schema column -> INT/FLOAT/BYTES
    label_key: str
    key_columns: tuple[str, ...] = ()
    encoding: str = "utf-8"
    # FLOAT columns whose schema disallows NaN (a NaN there is a bad row).
    finite: frozenset[str] = frozenset()
    # Maps a file's header to feature names (`tfxp init`'s renamed columns), or None.
    rename: Callable[[list[str]], list[str]] | None = None


def _checked_header(path: str, header: list[str], spec: RowSpec) -> list[str]:
    if spec.rename is not None:
        header = spec.rename(header)
    required = [n for n in spec.types if n != spec.label_key]
    missing = [c for c in required if c not in header]
    missing_keys = [c for c in spec.key_columns if c not in header]
    if missing or missing_keys:
        what = []
        if missing:
            what.append(f"the model's input column(s) {', '.join(missing)}")
        if missing_keys:
            what.append(f"the key column(s) {', '.join(missing_keys)}")
        raise ScoringError(
            f"{path}: the header lacks {' and '.join(what)}; every file of the span needs them "
            "(fix the file, or the dataset file's batch_inference.key_columns)"
        )
    return header


def _cell_problem(row: list[str], typed: list[tuple[int, str, str, bool]]) -> str:
    """Which cell the encoder refused, in the CSV checks' words."""
    for i, name, kind, finite in typed:
        message = csv_checks.cell_problem(row[i], kind, finite)
        if message:
            return f"column {name!r}: {message}"
    return "a value the schema's types do not allow"


def _file_rows(path: str, spec: RowSpec, report: ScoringReport, sink: Sink) -> Iterator[tuple]:
    """(line, keys, serialized example) of each good row of `path`; bad rows go to the report."""
    try:
        header, rows, text = serving.csv_rows(path, spec.encoding, strict=False)
    except csv_text.CsvTextError as e:
        raise ScoringError(f"{e}") from e
    header = _checked_header(path, header, spec)
    typed = [
        (i, name, spec.types[name], name in spec.finite)
        for i, name in enumerate(header)
        if spec.types.get(name) in (csv_checks.INT, csv_checks.FLOAT)
    ]
    key_at = [header.index(k) for k in spec.key_columns]
    encode = serving.RowEncoder(header, spec.types, spec.finite)
    line = 1
    try:
        for line, row in rows:
            report.rows_read += 1
            if text.invalid and line in text.invalid:
                problem = f"not valid {text.encoding} text"
            elif len(row) != len(header):
                problem = f"has {len(row)} fields, the header has {len(header)}"
            else:
                try:
                    yield line, [row[i] for i in key_at], encode(row)
                    continue
                except ValueError:
                    problem = _cell_problem(row, typed)
            skipped = SkippedRow(path, line, problem)
            report.skip(skipped)
            sink.skipped(skipped)
    except csv.Error as e:
        raise ScoringError(f"{path}: malformed CSV after line {line}: {e}; fix the quoting") from e
    except csv_text.CsvTextError as e:
        raise ScoringError(f"{e}") from e


class _Batcher:
    """Feeds the serving signature `batch_size` rows at a time; finds rejected rows by halving."""

    def __init__(self, serve, tabular: Any, report: ScoringReport, sink: Sink) -> None:
        self.serve, self.tabular, self.report, self.sink = serve, tabular, report, sink

    def score(self, path: str, batch: list[tuple]) -> None:
        import tensorflow as tf

        if not batch:
            return
        try:
            out = self.serve(examples=tf.constant([example for _, _, example in batch]))
        except tf.errors.InvalidArgumentError as e:
            if len(batch) == 1:
                reason = e.message.strip().splitlines()[0] if e.message.strip() else str(e)
                self._skip(path, batch[0][0], f"the model rejected the row: {reason}")
                return
            half = len(batch) // 2
            self.score(path, batch[:half])
            self.score(path, batch[half:])
            return
        for (line, keys, _), cells in zip(
            batch, serving.prediction_cells(self.tabular, out), strict=True
        ):
            score = serving.row_score(self.tabular, cells)
            if score != score or score in (float("inf"), float("-inf")):
                self._skip(path, line, "the model's output is not a number (e.g. a NaN input)")
                continue
            self.sink.write(path, line, keys, cells)
            self.report.rows_scored += 1

    def _skip(self, path: str, line: int, reason: str) -> None:
        skipped = SkippedRow(path, line, reason)
        self.report.skip(skipped)
        self.sink.skipped(skipped)


def score_files(
    serve,
    paths: Sequence[str],
    spec: RowSpec,
    sink: Sink,
    *,
    tabular: Any = None,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[ScoringReport], None] | None = None,
) -> ScoringReport:
    """Scores every row of `paths` (in order) with `serve`; each result goes to `sink`."""
    report = ScoringReport(files=[str(p) for p in paths])
    batcher = _Batcher(serve, tabular, report, sink)
    for path in report.files:
        if not os.path.isfile(path):
            raise ScoringError(f"{path}: no such file")
        batch: list[tuple] = []
        for item in _file_rows(path, spec, report, sink):
            batch.append(item)
            if len(batch) >= batch_size:
                batcher.score(path, batch)
                batch = []
                if progress is not None:
                    progress(report)
        batcher.score(path, batch)
    if progress is not None:
        progress(report)
    return report
