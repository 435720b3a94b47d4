"""Checks raw CSV drops against the curated schema before anything is ingested.

CsvExampleGen infers column types from the data, so text in a numeric column
silently turns the column into strings, and a short row fails deep inside Beam
with no file or line. These checks run first and name the file, the line, the
column and what is wrong.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import tensorflow as tf

# Schema feature types (tensorflow_metadata FeatureType names).
INT, FLOAT, BYTES = "INT", "FLOAT", "BYTES"
MAX_REPORTED_PROBLEMS = 20


class CsvInputError(ValueError):
    """Raised when raw CSV input does not match what the pipeline expects."""


@dataclass(frozen=True)
class CsvProblem:
    path: str
    line: int | None  # 1-based physical line in the file; None for file-level problems
    column: str | None
    message: str

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        if self.column is not None:
            where += f" column {self.column!r}"
        return f"{where}: {self.message}"


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _cell_problem(value: str, kind: str) -> str | None:
    """Why CsvExampleGen would not read `value` as `kind`, or None.

    Mirrors tfx_bsl's type inference: Python's int()/float() on the raw cell
    (surrounding spaces allowed, a blank-but-not-empty cell is text), and
    integers must fit int64, or the whole column silently becomes text.
    """
    if value == "":
        return None  # missing value; presence is checked by the schema later
    try:
        if kind == INT:
            if not INT64_MIN <= int(value) <= INT64_MAX:
                return f"{value!r} does not fit a 64-bit integer (schema type INT)"
        elif kind == FLOAT and not math.isfinite(float(value)) and value.lower() != "nan":
            return f"{value!r} is not a finite number (schema type FLOAT)"
    except ValueError:
        if kind == INT:
            # CsvExampleGen reads "3.0" as a float; an INT column must not hold it.
            return f"{value!r} is not an integer (schema type INT)"
        return f"{value!r} is not a number (schema type FLOAT)"
    return None


def check_csv_text(
    path: str,
    lines: Iterable[str],
    columns: Mapping[str, str],
    required: Iterable[str] | None = None,
    max_problems: int = MAX_REPORTED_PROBLEMS,
) -> tuple[int, list[CsvProblem]]:
    """Checks one CSV file's lines. Returns (data row count, problems).

    Args:
      path: the file's name, used in messages only.
      lines: the file's text lines (with or without line endings).
      columns: expected column name -> schema type (INT, FLOAT or BYTES).
      required: columns that must be in the header (default: all of `columns`).
      max_problems: stop collecting after this many problems.
    """
    problems: list[CsvProblem] = []
    required = list(columns if required is None else required)
    reader = csv.reader(lines, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        return 0, [CsvProblem(path, None, None, "file is empty: expected a header line")]
    except csv.Error as e:
        return 0, [CsvProblem(path, 1, None, f"unreadable header: {e}")]
    header = [h.strip() for h in header]
    missing = [c for c in required if c not in header]
    for name in missing:
        problems.append(
            CsvProblem(path, 1, name, "column is missing from the header (the schema requires it)")
        )
    duplicates = sorted({h for h in header if header.count(h) > 1})
    for name in duplicates:
        problems.append(CsvProblem(path, 1, name, "column appears more than once in the header"))
    if problems:
        return 0, problems

    typed = [
        (i, name, columns[name])
        for i, name in enumerate(header)
        if columns.get(name) in (INT, FLOAT)
    ]
    rows = 0
    line_start = 2
    while len(problems) < max_problems:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            problems.append(CsvProblem(path, line_start, None, f"malformed CSV: {e}"))
            break
        line = line_start
        line_start = reader.line_num + 1
        if not row:
            continue  # blank line: CsvExampleGen skips these too
        rows += 1
        if len(row) != len(header):
            problems.append(
                CsvProblem(path, line, None, f"has {len(row)} fields, the header has {len(header)}")
            )
            continue
        for i, name, kind in typed:
            message = _cell_problem(row[i], kind)
            if message:
                problems.append(CsvProblem(path, line, name, message))
                if len(problems) >= max_problems:
                    break
    if rows == 0 and not problems:
        problems.append(CsvProblem(path, None, None, "file has a header but no data rows"))
    return rows, problems


def check_csv_files(
    paths: Iterable[str], columns: Mapping[str, str], required: Iterable[str] | None = None
) -> int:
    """Checks every file; returns the total row count or raises CsvInputError.

    All files of a drop are checked before raising, so one run reports every
    broken file instead of one per attempt.
    """
    paths = list(paths)
    if not paths:
        raise CsvInputError("no CSV files to check")
    total, problems = 0, []
    first_header: tuple[str, list[str]] | None = None
    for path in paths:
        # CsvExampleGen reads all files of a split with the first file's header.
        with tf.io.gfile.GFile(path, "r") as text:
            header = next(csv.reader([text.readline()]), [])
        if first_header is None:
            first_header = (path, header)
        elif header and header != first_header[1]:
            problems.append(
                CsvProblem(
                    path,
                    1,
                    None,
                    f"header differs from {first_header[0]}'s; files of one drop must share a header",
                )
            )
            continue
        # GFile reads local paths and remote URIs (s3://, gs://) alike.
        with tf.io.gfile.GFile(path, "r") as text:
            try:
                rows, found = check_csv_text(path, text, columns, required)
            except UnicodeDecodeError as e:
                rows, found = 0, [CsvProblem(path, None, None, f"not UTF-8 text: {e}")]
        total += rows
        problems.extend(found)
    if problems:
        shown = problems[:MAX_REPORTED_PROBLEMS]
        more = len(problems) - len(shown)
        lines = "\n  ".join(str(p) for p in shown)
        suffix = f"\n  ... and {more} more" if more else ""
        raise CsvInputError(
            f"{len(problems)} problem(s) in the CSV input:\n  {lines}{suffix}\n"
            "Fix the file(s) or the curated schema, then rerun."
        )
    return total
