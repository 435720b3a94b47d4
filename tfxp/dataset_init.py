"""`tfxp init NAME --csv FILE... --label COLUMN`: a new dataset from CSV files, no code.

Writes, after every check has passed (a bad input writes nothing):
  data/NAME/span-1/            the CSV files, published like `tfxp data add` (atomic);
                               or, with --data-root, wherever the user keeps the spans
  schema/NAME/schema.pbtxt     TFDV-inferred from the data's statistics, TRAINING and
                               SERVING environments (the label absent in SERVING)
  schema/NAME/validation.yaml  the default drift/skew thresholds
  schema/NAME/dataset.yaml     label, task, feature treatments, Evaluator thresholds,
                               train steps and hyperparameters: the file the user edits
and prints what it inferred and the command to run next.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.config import PROJECT_ROOT
from pipeline.datasets import (
    DATASET_FILE,
    NAME_RE,
    SCHEMA_FILE,
    TASKS,
    VALID_FEATURE_NAME,
    VALIDATION_FILE,
    dataset_dirs,
    dataset_files,
    feature_name,
)
from tfxp import init_inference
from tfxp.model_choice import choose_model, model_lines

# Columns with at most this many distinct integers are categories (vocabulary), not numbers.
CATEGORICAL_INT_MAX = 20
# A label with at most this many distinct values may be a multiclass label.
MULTICLASS_MAX = 50
# Train steps: about this many passes over the training split (2/3 of the rows), within
# bounds. Measured on scikit-learn's diabetes (442 rows): RMSE 56 after 15 passes, 67
# after 65 (the small tower overfits a small table); wine and breast cancer lose nothing.
TRAIN_EPOCHS = 15
MIN_TRAIN_STEPS, MAX_TRAIN_STEPS = 50, 5000
DEFAULT_BATCH_SIZE = 64
INIT_MARK = "written by `tfxp init`"  # in the dataset files --force may rewrite


FEATURE_TREATMENTS = ("zscore", "vocabulary", "bucketize", "date", "timestamp", "text")
FEATURES_COMMENT = (
    "# Each feature's treatment: zscore (numbers; blanks -> mean + is-missing indicator),",
    "# bucketize (numbers; `buckets: 10`), vocabulary (strings, categorical ints;",
    "# `top_k: 1000`, `oov_buckets: 1`), date / timestamp (`format: iso | dmy | mdy`, a",
    "# timestamp also `unix_seconds`: year, month, day of week and of year, hour, days",
    "# since 1970), text (words -> vocabulary ids; `max_tokens: 32`). Remove a feature,",
    "# or list it under exclude, to drop it.",
)
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
    # Read as every reader reads CSV (components/csv_text.py): a byte-order mark
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


def _read_table(files: list[Path], header: list[str]):
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
        _read_table(files, header), source, keep_unlabelled
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


def _drop_string_domain(schema, feature) -> None:
    """No list of allowed values: inline, or the schema-level domain the feature names."""
    if feature.HasField("string_domain"):
        feature.ClearField("string_domain")
    elif feature.HasField("domain"):
        kept = [d for d in schema.string_domain if d.name != feature.domain]
        feature.ClearField("domain")
        del schema.string_domain[:]
        schema.string_domain.extend(kept)


def infer_schema(inferred: Inferred, arrays: dict):
    """TFDV's schema from the data's statistics, with int domains and environments."""
    import pyarrow as pa
    from tensorflow_data_validation.api import validation_api
    from tensorflow_data_validation.statistics import stats_impl, stats_options

    from components.validation.serving_data import as_lists

    batch = pa.RecordBatch.from_arrays(
        [as_lists(arrays[c.name], c.kind) for c in inferred.columns],
        [c.name for c in inferred.columns],
    )
    stats = stats_impl.generate_statistics_in_memory(batch, stats_options.StatsOptions())
    schema = validation_api.infer_schema(stats, infer_feature_shape=True)
    by_name = {c.name: c for c in inferred.columns}
    import pyarrow.compute as pc

    for feature in schema.feature:
        col = by_name[feature.name]
        if col.missing:
            # A blank cell is an empty value list (as CsvExampleGen writes it): allow zero values.
            feature.ClearField("shape")
            feature.value_count.Clear()
            feature.value_count.max = 1
            feature.presence.min_fraction = 1.0
        if col.kind == "INT" and col.treatment in ("vocabulary", "label"):
            values = arrays[col.name]
            feature.int_domain.min = pc.min(values).as_py()
            feature.int_domain.max = pc.max(values).as_py()
            feature.int_domain.is_categorical = True
        if col.treatment in ("excluded", "date", "timestamp", "text"):
            _drop_string_domain(schema, feature)  # ids, dates, free text: new values expected
        if col is inferred.label:
            feature.not_in_environment.append("SERVING")
    schema.default_environment.extend(["TRAINING", "SERVING"])
    return schema


# ---------------------------------------------------------------------------
# The files init writes.


def _round_up(x: float, places: int = 3) -> float:
    return math.ceil(x * 10**places) / 10**places


def _round_down(x: float, places: int = 3) -> float:
    return math.floor(x * 10**places) / 10**places


def _significant(x: float) -> float:
    """`x` rounded down to 3 significant digits (an RMSE bound in the label's units)."""
    if x <= 0:
        return 0.0
    places = max(0, 2 - int(math.floor(math.log10(x))))
    return _round_down(x, places)


def dataset_yaml(inferred: Inferred, data_root: str | None) -> str:
    q = _yaml_str
    lines = [
        f"# Dataset file of {inferred.name!r}, {INIT_MARK} from {inferred.rows} rows.",
        f"# Edit it, not code: `tfxp run --dataset {inferred.name}` reads it on every run.",
        f"name: {inferred.name}",
    ]
    if data_root:
        lines.append(f"data_root: {q(data_root)}")
    else:
        lines.append(f"data_root: data/{inferred.name}")
    lines += [
        "",
        f"label: {q(inferred.label.name)}",
        f"# binary | multiclass | regression (inferred: {inferred.label.distinct} distinct "
        f"{_kind_word(inferred.label.kind)} values)",
        f"task: {inferred.task}",
    ]
    if inferred.classes:
        order = "[negative, positive]" if inferred.task == "binary" else "output order"
        lines.append(f"# The label's values, {order}.")
        lines.append(f"classes: [{', '.join(q(c) for c in inferred.classes)}]")
    lines += ["", *FEATURES_COMMENT, "features:"]
    for c in inferred.features:
        fmt = f", format: {c.format}" if c.format else ""
        lines.append(f"  {q(c.name)}: {{treatment: {c.treatment}{fmt}}}")
    excluded = [c for c in inferred.columns if c.treatment == "excluded"]
    lines.append("# Columns kept in the data but not used by the model.")
    if excluded:
        lines.append("exclude:")
        lines += [f"  - {q(c.name)}  # {c.note}" for c in excluded]
    else:
        lines.append("exclude: []")
    lines += init_inference.table_option_lines(inferred, _yaml_str)
    lines += [
        "",
        f"# About {TRAIN_EPOCHS} passes over the training split (2/3 of the rows).",
        f"train_steps: {train_steps(inferred.rows)}",
        "eval_steps: 5",
    ]
    lines += model_lines(*_model_choice(inferred), DEFAULT_BATCH_SIZE)  # tfxp/model_choice.py
    lines += [
        "",
        "# When the Evaluator blesses a model (and so the Pusher pushes it).",
        "evaluation:",
    ]
    if inferred.task == "regression":
        bound = _significant(inferred.label_std)
        lines += [
            f"  # Predicting the mean ({inferred.label_mean:.4g}) for every row has RMSE "
            f"{inferred.label_std:.4g}: a model must do better.",
            "  metric: RootMeanSquaredError",
            f"  upper_bound: {bound}",
            "  extra_metrics: [MeanAbsoluteError]",
        ]
    elif inferred.class_weights and inferred.task == "binary":
        lines += init_inference.imbalanced_evaluation_lines(inferred)
    else:
        metric = "BinaryAccuracy" if inferred.task == "binary" else "SparseCategoricalAccuracy"
        extra = "[AUC]" if inferred.task == "binary" else "[]"
        lines += [
            f"  # Always predicting the most frequent class is right {inferred.majority:.1%} "
            "of the time: a model must do better.",
            f"  metric: {metric}",
            f"  lower_bound: {_round_up(inferred.majority)}",
            f"  extra_metrics: {extra}",
        ]
        if inferred.class_weights:
            lines.append("  per_class: true  # each class's recall and precision-recall AUC")
    return "\n".join(lines + _slicing_lines(inferred)) + "\n"


# A categorical feature with at most this many values makes a readable slicing.
SLICE_MAX_VALUES = 12


def suggested_slices(inferred: Inferred) -> list[str]:
    """Features to slice the evaluation by: up to two categorical features with few
    values (fewest first), or for a classifier with none, its label (one slice per class)."""
    categorical = sorted(
        (
            c
            for c in inferred.features
            if c.treatment == "vocabulary" and 2 <= c.distinct <= SLICE_MAX_VALUES
        ),
        key=lambda c: (c.distinct, c.name),
    )
    names = [c.name for c in categorical[:2]]
    if not names and inferred.task != "regression":
        names = [inferred.label.name]
    return names


def _slicing_lines(inferred: Inferred) -> list[str]:
    names = suggested_slices(inferred)
    lines = [
        "",
        "# Evaluation by slice (docs/trust.md): every metric per value of these features",
        "# (a numeric feature needs `buckets: {name: [boundaries]}`), and the blessing",
        "# asks each slice with at least `min_examples` eval rows not to fall more than",
        "# `max_drop` behind the baseline model on that slice. `lower_bound` adds a floor.",
        "# Written with the limitations below into the model card of every pushed model.",
    ]
    if not names:
        return lines + ["# slicing:", "#   by: [a_feature]", "#   min_examples: 20"]
    drop = _significant(0.1 * inferred.label_std) if inferred.task == "regression" else 0.1
    lines += [
        "slicing:",
        f"  by: [{', '.join(_yaml_str(n) for n in names)}]",
        f"  min_examples: {max(20, inferred.rows // 100)}",
        f"  max_drop: {drop}",
        "# What the model is for and where it must not be trusted (the model card says it).",
        "# intended_use: >-",
        "#   ...",
        "# limitations: >-",
        "#   ...",
    ]
    return lines


def train_steps(rows: int, batch_size: int = DEFAULT_BATCH_SIZE) -> int:
    steps = math.ceil(TRAIN_EPOCHS * (rows * 2 // 3) / batch_size)
    return min(MAX_TRAIN_STEPS, max(MIN_TRAIN_STEPS, steps))


def _kind_word(kind: str) -> str:
    return {"INT": "integer", "FLOAT": "number", "BYTES": "text"}[kind]


def _yaml_str(value: str) -> str:
    import yaml

    text = yaml.safe_dump(value, default_style=None).strip()
    return text[: -len("\n...")] if text.endswith("\n...") else text.removesuffix("...").strip()


def validation_yaml(inferred: Inferred) -> str:
    # Ids, dates and free text take new values in every span: not compared.
    off = [
        c.name for c in inferred.columns if c.treatment in ("excluded", "date", "timestamp", "text")
    ]
    features = "".join(f"    {c}: off\n" for c in off) or ""
    block = "  features:\n" + features if features else "  features: {}\n"
    return (
        f"# Data validation thresholds of {inferred.name!r} (read by the validation gate).\n"
        "# drift: a span against the previous span; skew: training data against serving\n"
        "# requests (data_root/serving/*.csv, when there are any). Categorical features are\n"
        "# compared by L-infinity distance, numeric ones by Jensen-Shannon divergence;\n"
        "# `off` = not compared. Small drops are noisy: raise a threshold rather than\n"
        "# turning a feature off. Excluded columns (ids), dates and free text are off.\n"
        "drift:\n  categorical: 0.1\n  numeric: 0.15\n" + block + "skew:\n  categorical: 0.1\n"
        "  numeric: 0.15\n" + block + "\n"
        "# Anomaly kinds reported as warnings instead of blocking the run.\nwarn_only: []\n"
    )


def render_table(inferred: Inferred) -> str:
    width = max(len("column"), *(len(c.name) for c in inferred.columns))
    lines = [f"  {'column':<{width}}  {'type':<6} {'treatment':<11} {'missing':>7}  note"]
    for c in inferred.columns:
        missing = f"{100 * c.missing / inferred.rows:.1f}%"
        treatment = c.treatment
        note = c.note
        if c is inferred.label:
            note = ", ".join(filter(None, [note, f"{inferred.task} label"]))
        elif c.treatment in ("date", "timestamp"):
            note = f"{note} -> year, month, weekday, day of year, {'hour, ' if c.treatment == 'timestamp' else ''}days since 1970"
        elif c.missing and c.treatment == "zscore":
            note = ", ".join(filter(None, [note, "blanks -> mean + is-missing indicator"]))
        lines.append(f"  {c.name:<{width}}  {c.kind:<6} {treatment:<11} {missing:>7}  {note}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# The command.


def _publish(files: list[Path], header: list[str], inferred: Inferred, data_root: str, link: bool):
    """Publishes the drop as span 1 with `tfxp data add`'s atomic publish (headers renamed)."""
    from tfxp.publish import copy_files, publish_span

    def fill(folder: Path) -> None:
        if link:
            for f in files:
                os.symlink(f.resolve(), folder / f.name)
        elif inferred.renamed:
            new_header = ",".join(inferred.renamed.get(h, h) for h in header) + "\n"
            for f in files:
                with f.open("rb") as src, (folder / f.name).open("wb") as dst:
                    src.readline()
                    dst.write(new_header.encode())
                    shutil.copyfileobj(src, dst)
        else:
            copy_files(files, folder)

    return publish_span(data_root, fill, columns=_checked_kinds(inferred, by_source=False))


def _target_dir(name: str) -> Path:
    return dataset_dirs()[0] / name


def _check_target(name: str, force: bool) -> Path:
    """The name is usable and free (or, with --force, init's own); returns its folder."""
    if not NAME_RE.match(name):
        raise InitError(
            f"dataset name {name!r}: use lowercase letters, digits, - and _ (it names folders "
            "and the pipeline)"
        )
    existing = dataset_files().get(name)
    target = _target_dir(name)
    if (existing or (target / DATASET_FILE).exists()) and not force:
        where = existing.parent if existing else target
        raise InitError(
            f"dataset {name!r} exists ({where}); pick another name, or pass --force to rewrite "
            "its schema, validation.yaml and dataset.yaml (the data is never touched)"
        )
    # --force must not overwrite a dataset file someone wrote by hand.
    if existing and force and INIT_MARK not in existing.read_text(encoding="utf-8"):
        raise InitError(
            f"dataset {name!r} ({existing}) was not written by `tfxp init`: --force only "
            "rewrites init's own files; pick another name"
        )
    return target


def _checked_kinds(inferred: Inferred, by_source: bool) -> dict[str, str]:
    """Column -> type the CSV checks hold the files to. A label whose bad rows are dropped
    is checked as text: its unparseable cells are dropped rows, not errors (as in ExampleGen)."""
    kinds = {(c.source if by_source else c.name): c.kind for c in inferred.columns}
    if not inferred.keep_unlabelled:
        kinds[inferred.label.source if by_source else inferred.label.name] = "BYTES"
    return kinds


def _check_csv(files: list[Path], inferred: Inferred) -> None:
    """The data's own CSV checks (ExampleGen's rules), with the inferred column types."""
    from components.example_gen.csv_checks import CsvInputError, check_csv_files

    types = _checked_kinds(inferred, by_source=True)
    try:
        check_csv_files([str(f) for f in files], types)
    except CsvInputError as e:
        raise InitError(str(e)) from e


def _print_renames(inferred: Inferred, out) -> None:
    for source, new in inferred.renamed.items():
        print(
            f"column {source!r} is not a valid feature name (letters, digits and _, not "
            f"starting with a digit): renamed to {new!r} in the data and the schema "
            "(`tfxp data add` and `tfxp predict` map the old name to it)",
            file=out,
        )


def _place_data(
    files: list[Path],
    header: list[str],
    inferred: Inferred,
    data_root: str,
    remote: bool,
    spans: list,
    link: bool,
) -> str:
    """Span 1 from the files, unless data_root already has spans; returns what was done."""
    if spans:
        # Spans already there (kept data, or a --force rerun) are the data: add nothing.
        return f"kept the {len(spans)} span(s) already in {data_root} (nothing copied)"
    if remote:
        from tfxp.storage.storage import upload_span

        done = upload_span([str(f) for f in files], data_root, span=1)
        return f"uploaded {len(done.uris)} file(s) to {data_root}/span-1/"
    span = _publish(files, header, inferred, data_root, link)
    how = "linked" if link else "copied"
    return f"{how} {len(span.files)} file(s) to {span.path}"


def _write_dataset_files(name: str, target: Path, inferred: Inferred, schema, data_root: str):
    """schema.pbtxt, validation.yaml and dataset.yaml into `target`.

    Written to a sibling folder first and then moved in, so a failure while writing
    (a full disk, a bad schema) leaves `target` as it was.
    """
    from google.protobuf import text_format

    default_root = str(PROJECT_ROOT / "data" / name)
    # The default data root is left out of dataset.yaml (the file reads data/NAME).
    relative = None if data_root == default_root else data_root
    incoming = target.parent / f".incoming-{name}-{uuid.uuid4().hex[:8]}"
    incoming.mkdir(parents=True)
    try:
        (incoming / SCHEMA_FILE).write_text(
            f"# Curated schema of {name!r}: inferred by TFDV from {inferred.rows} rows by `tfxp "
            "init`; edit it by hand.\n# Environments: TRAINING data carries the label "
            f"{inferred.label.name!r}; SERVING requests do not.\n"
            + text_format.MessageToString(schema)
        )
        (incoming / VALIDATION_FILE).write_text(validation_yaml(inferred))
        (incoming / DATASET_FILE).write_text(dataset_yaml(inferred, relative))
        target.mkdir(parents=True, exist_ok=True)
        for f in incoming.iterdir():
            os.replace(f, target / f.name)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)


def _print_summary(name: str, target: Path, inferred: Inferred, published: str, out) -> None:
    print(f"dataset {name}: {inferred.rows} rows, {len(inferred.columns)} columns", file=out)
    print(render_table(inferred), file=out)
    for line in init_inference.summary_lines(inferred):
        print(line, file=out)
    if inferred.task == "regression":
        base = f"predicting the mean has RMSE {inferred.label_std:.4g}"
    else:
        base = f"{len(inferred.classes)} classes {inferred.classes[:10]}; the most frequent is {inferred.majority:.1%} of rows"
    print(f"task: {inferred.task} on {inferred.label.name!r} ({base})", file=out)
    print("model: {} ({})".format(*_model_choice(inferred)), file=out)
    print(f"data: {published}", file=out)
    print(f"wrote {target / SCHEMA_FILE}", file=out)
    print(f"      {target / VALIDATION_FILE}", file=out)
    print(f"      {target / DATASET_FILE}   <- edit this, not code", file=out)
    print(f"next: tfxp run --dataset {name}", file=out)


def run_init(args: argparse.Namespace, out=None) -> int:
    # sys.stdout looked up per call, not bound at import: callers (and tests) redirect it.
    out = out or sys.stdout
    name = args.name
    target = _check_target(name, args.force)
    files, header = check_files(args.csv)
    keep = getattr(args, "keep_unlabelled", False)
    inferred, arrays = infer(
        name, files, header, args.label, args.task, args.exclude or (), keep_unlabelled=keep
    )
    if args.link and inferred.renamed:
        raise InitError(
            f"--link: column names {sorted(inferred.renamed)} must be renamed in the data's "
            "header, which a link cannot do; copy the files (drop --link) or fix the header"
        )
    data_root = args.data_root or str(PROJECT_ROOT / "data" / name)
    remote = "://" in data_root
    if not remote:
        data_root = str(Path(data_root).resolve())
    # Every check before any write.
    _check_csv(files, inferred)
    schema = infer_schema(inferred, arrays)

    from pipeline.spans import list_spans

    spans = [] if remote else [s for s in list_spans(data_root) if s.files]
    _print_renames(inferred, out)
    published = _place_data(files, header, inferred, data_root, remote, spans, args.link)
    _write_dataset_files(name, target, inferred, schema, data_root)
    _print_summary(name, target, inferred, published, out)
    return 0


def _model_choice(inferred: Inferred) -> tuple[str, str]:
    """The model init writes, and why (tfxp/model_choice.py)."""
    weighted = bool(inferred.class_weights) and inferred.task == "binary"
    treatments = [c.treatment for c in inferred.features]
    return choose_model(inferred.rows, treatments, imbalanced=weighted)
