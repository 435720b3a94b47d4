"""Checks raw CSV drops against the curated schema before anything is ingested.

CsvExampleGen infers column types from the data, so text in a numeric column
silently turns the column into strings, and a short row fails deep inside Beam
with no file or line. These checks run first and name the file, the line, the
column and what is wrong.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from components.io import csv_text

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


def _cell_problem(value: str, kind: str, finite: bool = False) -> str | None:
    """Why CsvExampleGen would not read `value` as `kind`, or None.

    Mirrors tfx_bsl's type inference: Python's int()/float() on the raw cell
    (surrounding spaces allowed, a blank-but-not-empty cell is text), and
    integers must fit int64, or the whole column silently becomes text.
    Infinities are refused in every FLOAT column (no model can use them), NaN
    where the schema says so (`finite`: float_domain { disallow_nan: true }).
    """
    if value == "":
        return None  # missing value; presence is checked by the schema later
    try:
        if kind == INT:
            if not INT64_MIN <= int(value) <= INT64_MAX:
                return f"{value!r} does not fit a 64-bit integer (schema type INT)"
        elif kind == FLOAT:
            number = float(value)
            if math.isinf(number):
                return f"{value!r} is not a finite number (schema type FLOAT)"
            if finite and math.isnan(number):
                return (
                    f"{value!r} is not a number, and the schema disallows NaN in this column "
                    "(float_domain { disallow_nan: true })"
                )
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
    *,
    finite: Collection[str] = (),
    cell_chars: dict[str, int] | None = None,
) -> tuple[int, list[CsvProblem]]:
    """Checks one CSV file's lines. Returns (data row count, problems).

    Args:
      path: the file's name, used in messages only.
      lines: the file's text lines (with or without line endings); a
        csv_text.TextLines also gets bytes not valid in its encoding reported.
      columns: expected column name -> schema type (INT, FLOAT or BYTES).
      required: columns that must be in the header (default: all of `columns`).
      max_problems: stop collecting after this many problems.
      finite: FLOAT columns in which NaN is a problem (the schema's disallow_nan).
      cell_chars: if given, filled with the longest cell (in characters) per
        BYTES column, for the gate's warning about absurd cells.
    """
    required = list(columns if required is None else required)
    text = lines if isinstance(lines, csv_text.TextLines) else None
    reader = csv.reader(lines, strict=True)
    header, problems = _check_header(path, reader, text, required)
    if problems:
        return 0, problems
    typed = [
        (i, name, columns[name], name in finite)
        for i, name in enumerate(header)
        if columns.get(name) in (INT, FLOAT)
    ]
    strings = [(i, name) for i, name in enumerate(header) if columns.get(name) == BYTES]
    longest = [0] * len(strings)
    rows, problems = _check_rows(
        path, reader, text, header, typed, strings, longest, max_problems, cell_chars is not None
    )
    if rows == 0 and not problems:
        problems.append(CsvProblem(path, None, None, "file has a header but no data rows"))
    if cell_chars is not None:
        for (_, name), n in zip(strings, longest, strict=True):
            cell_chars[name] = max(cell_chars.get(name, 0), n)
    return rows, problems


def _check_header(
    path: str, reader, text: csv_text.TextLines | None, required: list[str]
) -> tuple[list[str], list[CsvProblem]]:
    """(the stripped header, its problems); the rows are not checked if it has any."""
    try:
        header = next(reader)
    except StopIteration:
        return [], [CsvProblem(path, None, None, "file is empty: expected a header line")]
    except csv.Error as e:
        return [], [CsvProblem(path, 1, None, f"unreadable header: {e}")]
    except csv_text.CsvTextError as e:
        return [], [_problem(e)]
    if text is not None and 1 in text.invalid:
        return [], [_invalid_bytes(text, 1, 1, None)]
    header = [h.strip() for h in header]
    problems = [
        CsvProblem(path, 1, name, "column is missing from the header (the schema requires it)")
        for name in required
        if name not in header
    ]
    duplicates = sorted({h for h in header if header.count(h) > 1})
    for name in duplicates:
        problems.append(CsvProblem(path, 1, name, "column appears more than once in the header"))
    return header, problems


def _check_rows(
    path: str,
    reader,
    text: csv_text.TextLines | None,
    header: list[str],
    typed: list[tuple[int, str, str, bool]],
    strings: list[tuple[int, str]],
    longest: list[int],
    max_problems: int,
    track_longest: bool,
) -> tuple[int, list[CsvProblem]]:
    """(data rows, problems) of the lines after the header; fills `longest` per BYTES column.

    The hot loop of the checks: everything per row stays inline here (no
    per-row function call but the cell check), so keep it that way.
    """
    problems: list[CsvProblem] = []
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
        except csv_text.CsvTextError as e:
            problems.append(_problem(e))
            break
        line = line_start
        line_start = reader.line_num + 1
        if text is not None and text.invalid:
            found = text.invalid_between(line, reader.line_num)
            if found:
                column = next(
                    (h for h, c in zip(header, row, strict=False) if csv_text.has_escapes(c)), None
                )
                problems.append(_invalid_bytes(text, line, reader.line_num, column))
                continue
        if not row:
            continue  # blank line: CsvExampleGen skips these too
        rows += 1
        if len(row) != len(header):
            problems.append(
                CsvProblem(path, line, None, f"has {len(row)} fields, the header has {len(header)}")
            )
            continue
        if track_longest:
            for k, (i, _) in enumerate(strings):
                if len(row[i]) > longest[k]:
                    longest[k] = len(row[i])
        for i, name, kind, nan_is_problem in typed:
            message = _cell_problem(row[i], kind, nan_is_problem)
            if message:
                problems.append(CsvProblem(path, line, name, message))
                if len(problems) >= max_problems:
                    break
    return rows, problems


def _invalid_bytes(
    text: csv_text.TextLines, first: int, last: int, column: str | None
) -> CsvProblem:
    found = text.invalid_between(first, last)
    if found is None:  # the callers found invalid bytes in these lines first
        raise ValueError(f"{text.path}: no invalid bytes in lines {first}..{last}")
    line, offset, bad = found
    return _problem(csv_text.invalid_bytes(text.path, line, column, offset, bad, text.encoding))


def _problem(e: csv_text.CsvTextError) -> CsvProblem:
    if isinstance(e.column, int):  # a field of the header, which names no column yet
        return CsvProblem(e.path or "", e.line, None, f"field {e.column + 1}: {e.detail}")
    return CsvProblem(e.path or "", e.line, e.column, e.detail)


def check_csv_files(
    paths: Iterable[str],
    columns: Mapping[str, str],
    required: Iterable[str] | None = None,
    *,
    encoding: str = csv_text.DEFAULT_ENCODING,
    finite: Collection[str] = (),
    cell_chars: dict[str, int] | None = None,
) -> int:
    """Checks every file; returns the total row count or raises CsvInputError.

    All files of a drop are checked before raising, so one run reports every
    broken file instead of one per attempt. Files are opened with csv_text: a
    UTF-8 byte-order mark is skipped, bytes not valid in `encoding` and
    compressed files are problems. `finite` and `cell_chars`: see check_csv_text.
    """
    paths = list(paths)
    if not paths:
        raise CsvInputError("no CSV files to check")
    try:
        csv_text.check_encoding(encoding)
    except csv_text.CsvTextError as e:
        raise CsvInputError(f"{e}; the dataset's encoding is set in its config") from e
    total, problems = 0, []
    first_header: tuple[str, list[str]] | None = None
    for path in paths:
        # CsvExampleGen reads all files of a split with the first file's header.
        try:
            header = csv_text.read_header(path, encoding)
        except csv_text.CsvTextError as e:
            problems.append(_problem(e))
            continue
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
        text = csv_text.TextLines(path, encoding)
        rows, found = check_csv_text(
            path, text, columns, required, finite=finite, cell_chars=cell_chars
        )
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


# The rule for one cell, shared with batch inference (which skips such rows by line).
cell_problem = _cell_problem
