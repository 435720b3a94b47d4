"""`tfxp init`, step 1: read the CSV files and infer each column's type and
treatment, the label's task and classes (nothing is written here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.dataset_sections import TASKS
from pipeline.headers import VALID_FEATURE_NAME, feature_name
from tfxp.init import inference as init_inference

# Columns with at most this many distinct integers are categories (vocabulary), not numbers.
CATEGORICAL_INT_MAX = 20
# A label with at most this many distinct values may be a multiclass label.
MULTICLASS_MAX = 50
FEATURE_TREATMENTS = ("zscore", "vocabulary", "bucketize", "date", "timestamp", "text")
# Values per column the date, id and text rules look at.
SAMPLE_VALUES = 5000


class InitError(ValueError):
    """Input `tfxp init` cannot use; nothing was written. The message says what to do."""


@dataclass
class Column:
    name: str  # the feature name (renamed when the CSV's is not valid)
    source: str  # the CSV header's name
    kind: str = "BYTES"  # INT, FLOAT, BYTES
    missing: int = 0
    distinct: int = 0
    treatment: str = ""  # zscore, vocabulary, date, timestamp, text, label, excluded
    note: str = ""
    format: str = ""  # date, timestamp: iso, dmy, mdy, unix_seconds
    values: list[str] = field(default_factory=list, repr=False)  # a sample, present, trimmed


@dataclass
class Inferred:
    name: str
    rows: int
    columns: list[Column]
    label: Column
    task: str
    classes: list[str] = field(default_factory=list)
    majority: float = 0.0  # classification: the most frequent class's share
    label_mean: float = 0.0
    label_std: float = 0.0
    renamed: dict[str, str] = field(default_factory=dict)
    # Rows left out for their label: blank, or not a number in a numeric label.
    unlabelled_blank: int = 0
    unlabelled_bad: int = 0
    keep_unlabelled: bool = False
    class_weights: dict[str, float] | None = None  # an imbalanced label's

    @property
    def features(self) -> list[Column]:
        return [c for c in self.columns if c.treatment in FEATURE_TREATMENTS]


# ---------------------------------------------------------------------------
# Reading and inferring (nothing is written here).


def _header(path: Path) -> list[str]:
    # Read as every reader reads CSV (components/io/csv_text.py): a byte-order mark
    # is dropped, and compressed or non-UTF-8 bytes get a message naming the file.
    from components.io import csv_text

    try:
        header = csv_text.read_header(str(path))
    except csv_text.CsvTextError as e:
        raise InitError(str(e)) from e
    if not any(h.strip() for h in header):
        raise InitError(f"{path}: the file is empty; it needs a header row and data rows")
    return [h.strip() for h in header]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def check_files(paths: Sequence[str]) -> tuple[list[Path], list[str]]:
    """The CSV files exist, have a header row, and share it."""
    if not paths:
        raise InitError("--csv needs at least one CSV file")
    files = [Path(p) for p in paths]
    for f in files:
        if not f.is_file():
            raise InitError(f"{f}: no such file")
        if f.suffix != ".csv":
            raise InitError(f"{f}: only .csv files are ingested (rename it to .csv)")
    names = [f.name for f in files]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InitError(f"two input files share the name {dupes[0]}; rename one")
    header = _header(files[0])
    if all(_is_number(h) or not h for h in header):
        raise InitError(
            f"{files[0]}: the first row ({', '.join(header[:5])}{', ...' if len(header) > 5 else ''}) "
            "looks like data, not a header; add a header row naming the columns"
        )
    blank = [i + 1 for i, h in enumerate(header) if not h]
    if blank:
        raise InitError(f"{files[0]}: header column(s) {blank} have no name; name every column")
    seen = sorted({h for h in header if header.count(h) > 1})
    if seen:
        raise InitError(f"{files[0]}: the header names {seen[0]!r} twice; column names must differ")
    for f in files[1:]:
        if _header(f) != header:
            raise InitError(
                f"{f}: its header differs from {files[0]}'s; all files of a drop share one header"
            )
    return files, header


def read_table(files: list[Path], header: list[str]):
    import pyarrow as pa
    from pyarrow import csv as pacsv

    tables = []
    for f in files:
        try:
            tables.append(
                pacsv.read_csv(
                    f,
                    read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
                    convert_options=pacsv.ConvertOptions(
                        column_types={h: pa.string() for h in header},
                        null_values=[""],
                        strings_can_be_null=True,
                    ),
                )
            )
        except pa.ArrowInvalid as e:
            raise InitError(f"{f}: cannot read it as CSV: {e}") from e
    return pa.concat_tables(tables).combine_chunks()


def _kind(column) -> str:
    import pyarrow as pa
    import pyarrow.compute as pc

    values = pc.utf8_trim_whitespace(column.drop_null())
    for kind, arrow_type in (("INT", pa.int64()), ("FLOAT", pa.float64())):
        try:
            pc.cast(values, arrow_type)
            return kind
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return "BYTES"


def typed(column, kind: str):
    import pyarrow as pa
    import pyarrow.compute as pc

    if kind == "BYTES":
        return column
    return pc.cast(pc.utf8_trim_whitespace(column), pa.int64() if kind == "INT" else pa.float64())


def _sort_classes(values: list[str], kind: str) -> list[str]:
    return sorted(values, key=float) if kind != "BYTES" else sorted(values)


def _resolve_columns(
    files: list[Path], header: list[str], label: str, exclude: Sequence[str]
) -> tuple[dict[str, str], list[str], str, set[str]]:
    """Feature names for the header, and the label and exclusions by those names.

    Returns (renamed, names, label, excluded). The user may name a column by its
    CSV header or by its feature name, so both resolve; checked before any reading.
    """
    renamed = {h: feature_name(h) for h in header if not VALID_FEATURE_NAME.match(h)}
    names = [renamed.get(h, h) for h in header]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise InitError(
            f"after renaming invalid column names, {clash[0]!r} names two columns; "
            "rename one in the CSV header"
        )
    by_any = {**{h: renamed.get(h, h) for h in header}, **{n: n for n in names}}
    if label not in by_any:
        raise InitError(
            f"label column {label!r} is not in {files[0]}; columns: {', '.join(header)}"
        )
    label = by_any[label]
    unknown = [e for e in exclude if e not in by_any]
    if unknown:
        raise InitError(f"--exclude {unknown[0]}: no such column; columns: {', '.join(header)}")
    excluded = {by_any[e] for e in exclude}
    if label in excluded:
        raise InitError(f"--exclude {label}: that is the label column")
    return renamed, names, label, excluded


def _profile_columns(
    table, header: list[str], names: list[str], renamed: dict[str, str]
) -> tuple[list[Column], dict]:
    """Each column's kind, blanks and distinct values; returns (columns, typed arrays by name)."""
    import pyarrow.compute as pc

    columns: list[Column] = []
    arrays = {}
    for source, column_name in zip(header, names, strict=True):
        raw = table.column(source).combine_chunks()
        col = Column(column_name, source, missing=raw.null_count)
        present = raw.drop_null()
        col.distinct = len(pc.unique(pc.utf8_trim_whitespace(present))) if len(present) else 0
        col.kind = _kind(raw) if len(present) else "BYTES"
        col.values = pc.utf8_trim_whitespace(present[:SAMPLE_VALUES]).to_pylist()
        arrays[column_name] = typed(raw, col.kind)
        columns.append(col)
        if source in renamed:
            col.note = f"renamed from {source!r}"
    return columns, arrays


def _check_label(lab: Column, label_values, rows: int) -> None:
    """A label that is blank somewhere or constant cannot be learned from."""
    if lab.missing:
        raise InitError(
            f"label column {lab.name!r} is blank in {lab.missing} of {rows} rows; fill or drop "
            "them (a row without a label cannot be learned from), or leave out "
            "--keep-unlabelled to have them dropped"
        )
    if lab.distinct < 2:
        only = label_values[0].as_py() if rows else None
        raise InitError(
            f"label column {lab.name!r} has a single value ({only!r}) in every row: there is "
            "nothing to predict; choose another label column"
        )


def _choose_task(lab: Column, label_values, task: str | None) -> str:
    """The task the user gave, or the one the label's values suggest; checked against them."""
    if task is None:
        if lab.distinct == 2:
            task = "binary"
        elif lab.kind == "BYTES" or (lab.kind == "INT" and lab.distinct <= CATEGORICAL_INT_MAX):
            task = "multiclass"
        else:
            task = "regression"
    if task not in TASKS:
        raise InitError(f"--task must be one of {', '.join(TASKS)}, not {task!r}")
    if task == "regression" and lab.kind == "BYTES":
        sample = next(v for v in label_values.to_pylist() if v and not _is_number(v))
        raise InitError(
            f"label column {lab.name!r} holds text (e.g. {sample!r}): a regression label must "
            "be numeric; use --task multiclass (or binary) for categories"
        )
    if task == "binary" and lab.distinct != 2:
        raise InitError(
            f"--task binary: label column {lab.name!r} has {lab.distinct} values, not 2; "
            "use --task multiclass"
        )
    if task == "multiclass" and lab.distinct > MULTICLASS_MAX:
        raise InitError(
            f"label column {lab.name!r} has {lab.distinct} values: too many classes for "
            f"multiclass (at most {MULTICLASS_MAX}); use --task regression for numbers"
        )
    return task


def _label_baseline(inferred: Inferred, label_values, raw_label) -> None:
    """What predicting without features scores (the mean, or the most frequent class).

    dataset.yaml's Evaluator threshold is set from it: a model must beat it.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if inferred.task == "regression":
        values = pc.cast(label_values, pa.float64()).to_numpy(zero_copy_only=False)
        inferred.label_mean = float(values.mean())
        inferred.label_std = float(values.std())
    else:
        # From the CSV's text (trimmed), so an integer label's classes are the strings
        # the files hold, not numbers re-rendered.
        counts = pc.value_counts(pc.utf8_trim_whitespace(raw_label))
        freq = {c["values"].as_py(): c["counts"].as_py() for c in counts}
        inferred.classes = _sort_classes(list(freq), inferred.label.kind)
        inferred.majority = max(freq.values()) / inferred.rows
        inferred.class_weights = init_inference.class_weights(freq)


def _assign_treatments(columns: list[Column], lab: Column, excluded: set[str], rows: int) -> None:
    """Each non-label column's treatment, or why it is excluded."""
    for col in columns:
        if col is lab:
            continue
        if col.name in excluded:
            col.treatment, col.note = (
                "excluded",
                (col.note + "; " if col.note else "") + "--exclude",
            )
        elif col.missing == rows:
            col.treatment, col.note = "excluded", "blank in every row"
        elif col.distinct == 1:
            col.treatment, col.note = "excluded", "one value in every row"
        elif init_inference.table_treatment(col, rows):
            pass  # a date, timestamp, free text, or an id by its values
        # Only from 20 rows on: in a tiny table every value may differ without being an id.
        elif col.distinct == rows - col.missing and col.kind != "FLOAT" and rows >= 20:
            col.treatment, col.note = "excluded", "a different value in every row (an id?)"
        elif col.kind == "BYTES" or (col.kind == "INT" and col.distinct <= CATEGORICAL_INT_MAX):
            col.treatment = "vocabulary"
        else:
            col.treatment = "zscore"


def infer(
    name: str,
    files: list[Path],
    header: list[str],
    label: str,
    task: str | None = None,
    exclude: Sequence[str] = (),
    keep_unlabelled: bool = False,
):
    """Types, treatments and the task, from the data. Returns (Inferred, typed Arrow table)."""
    renamed, names, label, excluded = _resolve_columns(files, header, label, exclude)
    source = header[names.index(label)]
    table, blank, bad = init_inference.drop_unlabelled(
        read_table(files, header), source, keep_unlabelled
    )
    if table.num_rows < 10:
        raise InitError(
            f"{table.num_rows} data rows: too few to train and evaluate on (at least 10)"
        )
    columns, arrays = _profile_columns(table, header, names, renamed)
    rows = table.num_rows
    lab = next(c for c in columns if c.name == label)
    _check_label(lab, arrays[label], rows)
    task = _choose_task(lab, arrays[label], task)
    lab.treatment = "label"
    inferred = Inferred(name, rows, columns, lab, task, renamed=renamed)
    inferred.unlabelled_blank, inferred.unlabelled_bad = blank, bad
    inferred.keep_unlabelled = keep_unlabelled
    _label_baseline(inferred, arrays[label], table.column(lab.source).combine_chunks())
    _assign_treatments(columns, lab, excluded, rows)
    if not inferred.features:
        raise InitError("no feature columns left besides the label; check --exclude")
    return inferred, arrays
