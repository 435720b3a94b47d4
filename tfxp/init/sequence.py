"""`tfxp init NAME --csv events.csv --label L --sequence-key K --order-by T`: a sequence
dataset from an event table (one row per event), no code.

On top of the tables' inference (tfxp/init/profile.py: each column's type and
treatment, the task), it finds which columns are constant within every key
(context: one value per sequence) and which vary (feature lists: one value per
step), and refuses, naming the rows, a label that varies within a key and order
values that repeat within a key. The schema is TFDV's, inferred from the
SequenceExamples the ExampleGen will write (components/example_gen/sequence_records.py
builds both), so the pipeline validates exactly what init saw.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.config import PROJECT_ROOT
from pipeline.dataset_sequence import MAX_LENGTH_LIMIT
from tfxp.init.dataset_file import INIT_MARK, round_up, yaml_str
from tfxp.init.profile import Column, Inferred, InitError, check_files, infer

# The steps the model reads: the 95th percentile of lengths, rounded up to a power of two.
LENGTH_QUANTILE = 0.95
MIN_MAX_LENGTH, DEFAULT_MAX_LENGTH_CAP = 8, 256
SEQUENCE_BATCH = 64
TRAIN_EPOCHS = 30
MIN_TRAIN_STEPS, MAX_TRAIN_STEPS = 100, 3000
SLICE_MAX_VALUES = 12
SHOWN_ROWS = 3


@dataclass
class SequenceInferred:
    """What init found in an event table, beside the tables' `Inferred`."""

    table: Inferred
    key: Column
    order: Column
    order_format: str
    context: list[Column] = field(default_factory=list)
    features: list[Column] = field(default_factory=list)
    excluded: list[Column] = field(default_factory=list)
    sequences: int = 0
    lengths: tuple[int, int, int] = (0, 0, 0)  # min, median, max
    max_length: int = 64
    classes: list[str] = field(default_factory=list)
    majority: float = 0.0


def _column(inferred: Inferred, given: str, flag: str) -> Column:
    for c in inferred.columns:
        if given in (c.name, c.source):
            return c
    names = ", ".join(c.source for c in inferred.columns)
    raise InitError(f"{flag} {given!r}: no such column; columns: {names}")


def _row_places(files: list[Path]) -> list[tuple[Path, int]]:
    """(file, data rows) in the order the rows were read, to name a row by file and line."""
    from tfxp.init.profile import read_table

    places = []
    for f in files:
        header = [h.strip() for h in _header_of(f)]
        places.append((f, read_table([f], header).num_rows))
    return places


def _header_of(path: Path) -> list[str]:
    from components.io import csv_text

    return csv_text.read_header(str(path))


def _where(index: int, places: list[tuple[Path, int]]) -> str:
    for f, rows in places:
        if index < rows:
            return f"{f}:{index + 2}"  # line 1 is the header
        index -= rows
    return f"row {index}"


def _varying(keys, values) -> list[int]:
    """Indices of keys (into the unique keys' table) whose `values` take more than one value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.table({"k": keys, "v": pc.cast(values, pa.string())})
    counts = table.group_by("k").aggregate([("v", "count_distinct", pc.CountOptions(mode="all"))])
    many = pc.greater(counts.column("v_count_distinct"), 1)
    return counts.column("k").filter(many).to_pylist()


def _rows_of(keys, key_value) -> list[int]:
    import pyarrow.compute as pc

    return pc.indices_nonzero(pc.equal(keys, key_value)).to_pylist()


def _refuse_varying_label(keys, label: Column, arrays, places) -> None:
    bad = _varying(keys, arrays[label.name])
    if not bad:
        return
    rows = _rows_of(keys, bad[0])
    values = arrays[label.name].take(rows).to_pylist()
    shown = ", ".join(
        f"{_where(r, places)} ({v!r})" for r, v in list(zip(rows, values, strict=True))[:6]
    )
    raise InitError(
        f"label {label.name!r} varies within the sequence {bad[0]!r} ({shown}"
        f"{', ...' if len(rows) > 6 else ''}); {len(bad)} key(s) have more than one label. "
        "A sequence has one label: fix those rows, or choose the key that the label belongs to"
    )


def _refuse_repeated_order(keys, order, places, key: Column, order_col: Column) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.table({"k": keys, "o": pc.cast(order, pa.string())})
    counts = table.group_by(["k", "o"]).aggregate([("o", "count")])
    repeated = counts.filter(pc.greater(counts.column("o_count"), 1))
    if not repeated.num_rows:
        return
    first_key, first_order = repeated.column("k")[0].as_py(), repeated.column("o")[0].as_py()
    rows = pc.indices_nonzero(
        pc.and_(pc.equal(table.column("k"), first_key), pc.equal(table.column("o"), first_order))
    ).to_pylist()
    shown = ", ".join(_where(r, places) for r in rows[:SHOWN_ROWS])
    raise InitError(
        f"order column {order_col.name!r} repeats within key {key.name}={first_key!r}: rows "
        f"{shown} all have {first_order!r} ({repeated.num_rows} repeat(s) in all). Events of a "
        "sequence need distinct order values: use a finer timestamp, or a column that counts events"
    )


def _order_format(order: Column, values, places) -> str:
    """number, or timestamp when every value parses as an ISO date-time."""
    from components.example_gen.sequence_records import SequenceInputError, parse_order

    if order.missing:
        raise InitError(f"order column {order.name!r} is blank in {order.missing} row(s)")
    if order.kind in ("INT", "FLOAT"):
        return "number"
    for i, value in enumerate(values.to_pylist()):
        try:
            parse_order(value, "timestamp", _where(i, places))
        except SequenceInputError as e:
            raise InitError(
                f"{e}; the order column holds numbers or ISO timestamps "
                "(2026-03-01 10:15:30, 2026-03-01T10:15:30Z)"
            ) from e
    return "timestamp"


def _roles(seq: SequenceInferred, keys, arrays) -> None:
    """Context (constant per key) or feature list (varying), each with its model treatment."""
    table = seq.table
    for c in table.columns:
        if c in (seq.key, seq.order, table.label):
            continue
        if c.treatment not in ("zscore", "bucketize", "vocabulary"):
            seq.excluded.append(c)
            continue
        constant = not _varying(keys, arrays[c.name])
        if constant and c.kind == "BYTES" and c.distinct >= seq.sequences > 20:
            c.treatment, c.note = "excluded", "a different value in every sequence (an id?)"
            seq.excluded.append(c)
            continue
        c.treatment = "vocabulary" if c.treatment == "vocabulary" else "zscore"
        (seq.context if constant else seq.features).append(c)
    if not seq.features:
        raise InitError(
            "no column varies within a sequence: there are no per-event features. Is "
            f"{seq.key.name!r} the sequence key (one value per sequence, many rows each)?"
        )


def _lengths(seq: SequenceInferred, keys, arrays, label: Column) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    counts = pa.table({"k": keys}).group_by("k").aggregate([("k", "count")])
    lengths = np.sort(counts.column("k_count").to_numpy())
    seq.sequences = len(lengths)
    seq.lengths = (int(lengths[0]), int(np.median(lengths)), int(lengths[-1]))
    p95 = int(np.quantile(lengths, LENGTH_QUANTILE))
    seq.max_length = min(
        DEFAULT_MAX_LENGTH_CAP, max(MIN_MAX_LENGTH, 2 ** math.ceil(math.log2(max(p95, 1))))
    )
    seq.max_length = min(seq.max_length, MAX_LENGTH_LIMIT)
    if seq.table.task != "regression":
        per_key = pa.table({"k": keys, "y": pc.cast(arrays[label.name], pa.string())})
        first = per_key.group_by("k").aggregate([("y", "min")]).column("y_min")
        freq = {v["values"].as_py(): v["counts"].as_py() for v in pc.value_counts(first)}
        seq.classes = list(seq.table.classes)
        seq.majority = max(freq.values()) / seq.sequences


def infer_sequences(args: argparse.Namespace, name: str):
    """(SequenceInferred, files, header, typed arrays) of the event table."""
    files, header = check_files(args.csv)
    inferred, arrays = infer(
        name, files, header, args.label, args.task, args.exclude or (), keep_unlabelled=True
    )
    key = _column(inferred, args.sequence_key, "--sequence-key")
    order = _column(inferred, args.order_by, "--order-by")
    if key is inferred.label or order is inferred.label or key is order:
        raise InitError("--sequence-key, --order-by and --label must name three different columns")
    if key.missing:
        raise InitError(f"key column {key.name!r} is blank in {key.missing} row(s)")
    import pyarrow as pa
    import pyarrow.compute as pc

    places = _row_places(files)
    keys = pc.cast(arrays[key.name], pa.string())
    _refuse_varying_label(keys, inferred.label, arrays, places)
    order_format = _order_format(order, arrays[order.name], places)
    ordered = arrays[order.name]
    if order_format == "timestamp":
        ordered = pc.utf8_trim_whitespace(ordered)
    _refuse_repeated_order(keys, ordered, places, key, order)
    seq = SequenceInferred(inferred, key, order, order_format)
    _lengths(seq, keys, arrays, inferred.label)
    _roles(seq, keys, arrays)
    if args.max_length:
        seq.max_length = args.max_length
    key.treatment, key.note = "key", "the sequence key"
    order.treatment, order.note = "order", f"orders the events ({order_format})"
    return seq, files, header


def options_dict(seq: SequenceInferred, model: str = "gru") -> dict:
    """SequenceOptions.to_dict() of what init found (for the ExampleGen's records and the schema)."""
    t = seq.table
    return {
        "key": seq.key.name,
        "order_by": seq.order.name,
        "order_format": seq.order_format,
        "label": t.label.name,
        "task": t.task,
        "classes": list(t.classes),
        "context": {c.name: c.treatment for c in seq.context},
        "features": {c.name: c.treatment for c in seq.features},
        "max_length": seq.max_length,
        "truncate": "keep_last",
        "model": model,
    }


def kinds(seq: SequenceInferred) -> dict[str, str]:
    kinds = {c.name: c.kind for c in seq.table.columns}
    kinds[seq.order.name] = "BYTES" if seq.order_format == "timestamp" else "FLOAT"
    return kinds


def infer_sequence_schema(seq: SequenceInferred, files: list[Path], model: str):
    """TFDV's schema of the SequenceExamples built from the files."""
    from tensorflow_data_validation.api import validation_api
    from tensorflow_data_validation.statistics import stats_impl, stats_options
    from tfx_bsl.coders import sequence_example_coder
    from tfx_bsl.tfxio import tensor_representation_util

    from components.example_gen.sequence_records import (
        Layout,
        SequenceInputError,
        examples_of_files,
    )
    from trainer.sequence.features import SEQUENCE_STRUCT

    layout = Layout.of(options_dict(seq, model), kinds(seq))
    try:
        built = examples_of_files([str(f) for f in files], layout, renamed=seq.table.renamed)
    except SequenceInputError as e:
        raise InitError(str(e)) from e
    decoder = sequence_example_coder.SequenceExamplesToRecordBatchDecoder(SEQUENCE_STRUCT)
    batch = decoder.DecodeBatch([example.SerializeToString() for _, example in built])
    stats = stats_impl.generate_statistics_in_memory(batch, stats_options.StatsOptions())
    schema = validation_api.infer_schema(stats, infer_feature_shape=True)
    for feature in schema.feature:
        if feature.name == seq.key.name:  # new keys in every span: no list of allowed values
            feature.ClearField("domain")
            feature.ClearField("string_domain")
        if feature.name == seq.table.label.name:
            feature.not_in_environment.append("SERVING")
    schema.default_environment.extend(["TRAINING", "SERVING"])
    # Written out, the tensor representations make TFX's Transform read SequenceExamples
    # natively (ragged feature lists); without them it falls back to raw records.
    tensor_representation_util.SetTensorRepresentationsInSchema(
        schema, tensor_representation_util.InferTensorRepresentationsFromSchema(schema)
    )
    return schema


def train_steps(sequences: int) -> int:
    steps = math.ceil(TRAIN_EPOCHS * (sequences * 2 // 3) / SEQUENCE_BATCH)
    return min(MAX_TRAIN_STEPS, max(MIN_TRAIN_STEPS, steps))


def dataset_yaml(seq: SequenceInferred, data_root: str | None, model: str) -> str:
    q = yaml_str
    t = seq.table
    lines = [
        f"# Dataset file of {t.name!r}, {INIT_MARK} from {t.rows} events of "
        f"{seq.sequences} sequences.",
        f"# Edit it, not code: `tfxp run --dataset {t.name}` reads it on every run.",
        f"name: {t.name}",
        "kind: sequence",
        f"data_root: {q(data_root) if data_root else f'data/{t.name}'}",
        "",
        f"label: {q(t.label.name)}",
        "# binary | multiclass | regression",
        f"task: {t.task}",
    ]
    if t.classes:
        lines.append(f"classes: [{', '.join(q(c) for c in t.classes)}]")
    lines += [
        "",
        "# One tf.train.SequenceExample per key: context columns are constant within a",
        "# sequence, features have one value per event (step), in order_by's order.",
        "# Treatments: zscore (numbers) or vocabulary (categories).",
        "sequence:",
        f"  key: {q(seq.key.name)}",
        f"  order_by: {q(seq.order.name)}",
        f"  order_format: {seq.order_format}",
        "  context:" + ("" if seq.context else " {}"),
        *[f"    {q(c.name)}: {c.treatment}" for c in seq.context],
        "  features:",
        *[f"    {q(c.name)}: {c.treatment}" for c in seq.features],
        f"  # lengths {seq.lengths[0]} to {seq.lengths[2]} events (median {seq.lengths[1]});"
        " longer sequences keep their last max_length events",
        f"  max_length: {seq.max_length}",
        "  truncate: keep_last",
        "  # gru (a recurrent network) or conv (dilated 1-D convolutions)",
        f"  model: {model}",
    ]
    if seq.excluded:
        unused = ", ".join(f"{c.name} ({c.note or c.treatment})" for c in seq.excluded)
        lines.append(f"# Columns not used: {unused}")
    lines += [
        "",
        f"# About {TRAIN_EPOCHS} passes over the training split (2/3 of the sequences).",
        f"train_steps: {train_steps(seq.sequences)}",
        "eval_steps: 5",
        "hyperparameters:",
        f"  batch_size: {SEQUENCE_BATCH}",
        "",
        "# When the Evaluator blesses a model (and so the Pusher pushes it).",
        "evaluation:",
        *_evaluation_lines(seq),
        *_slicing_lines(seq),
    ]
    return "\n".join(lines) + "\n"


def _evaluation_lines(seq: SequenceInferred) -> list[str]:
    t = seq.table
    if t.task == "regression":
        from tfxp.init.dataset_file import significant

        return [
            f"  # Predicting the mean for every sequence has RMSE about {t.label_std:.4g}.",
            "  metric: RootMeanSquaredError",
            f"  upper_bound: {significant(t.label_std)}",
            "  extra_metrics: [MeanAbsoluteError]",
        ]
    metric = "BinaryAccuracy" if t.task == "binary" else "SparseCategoricalAccuracy"
    return [
        f"  # Always predicting the most frequent class is right for {seq.majority:.1%} of the "
        "sequences: a model must do better.",
        f"  metric: {metric}",
        f"  lower_bound: {round_up(seq.majority)}",
        f"  extra_metrics: {'[AUC]' if t.task == 'binary' else '[]'}",
    ]


def _slicing_lines(seq: SequenceInferred) -> list[str]:
    names = [
        c.name
        for c in sorted(seq.context, key=lambda c: (c.distinct, c.name))
        if c.treatment == "vocabulary" and 2 <= c.distinct <= SLICE_MAX_VALUES
    ][:2]
    if not names:
        return []
    return [
        "",
        "# Evaluation by slice of context features: every metric per value, and the",
        "# blessing asks each slice not to fall more than max_drop behind the baseline.",
        "slicing:",
        f"  by: [{', '.join(yaml_str(n) for n in names)}]",
        f"  min_examples: {max(20, seq.sequences // 100)}",
        "  max_drop: 0.1",
    ]


def validation_yaml(seq: SequenceInferred) -> str:
    return (
        f"# Data validation thresholds of {seq.table.name!r} (read by the validation gate).\n"
        "# drift: a span against the previous span; skew: training data against serving\n"
        "# requests. Context features and the sequence length compare sequences; per-step\n"
        "# features compare every step. The key takes new values in every span: off.\n"
        "drift:\n  categorical: 0.1\n  numeric: 0.15\n"
        f"  features:\n    {seq.key.name}: off\n"
        "skew:\n  categorical: 0.1\n  numeric: 0.15\n"
        f"  features:\n    {seq.key.name}: off\n"
        "\n# Anomaly kinds reported as warnings instead of blocking the run.\nwarn_only: []\n"
    )


def render_table(seq: SequenceInferred) -> str:
    t = seq.table
    columns = [seq.key, seq.order, t.label, *seq.context, *seq.features, *seq.excluded]
    role = {id(seq.key): "key", id(seq.order): "order", id(t.label): "label"}
    role.update({id(c): "context" for c in seq.context})
    role.update({id(c): "feature" for c in seq.features})
    width = max(len("column"), *(len(c.name) for c in columns))
    lines = [
        f"  {'column':<{width}}  {'role':<8} {'type':<6} {'treatment':<11} {'missing':>7}  note"
    ]
    for c in columns:
        missing = f"{100 * c.missing / t.rows:.1f}%"
        r = role.get(id(c), "unused")
        treatment = c.treatment if r in ("context", "feature") else "-"
        note = c.note if r != "label" else f"{t.task} label, one per sequence"
        lines.append(
            f"  {c.name:<{width}}  {r:<8} {c.kind:<6} {treatment:<11} {missing:>7}  {note}"
        )
    return "\n".join(lines)


def default_data_root(name: str) -> str:
    return str(PROJECT_ROOT / "data" / name)
