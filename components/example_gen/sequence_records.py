"""Event rows to `tf.train.SequenceExample`s: the pure functions every reader shares.

The SequenceExampleGen (sequence_example_gen.py) runs them inside Beam; `tfxp init`
(the schema) and `tfxp predict` / `tfxp infer` (one prediction per key) run them on
an event CSV in one process. So a served request, a prediction and a training
example of the same events are the same bytes.

A SequenceExample of one key holds
  context        the key, the label (training data only) and each context column;
  feature_lists  one feature list per per-event column, one step per event in the
                 order of the order column, at most `max_length` steps (the last
                 ones by default). A blank cell is a step with no value, so steps
                 stay aligned across the feature lists.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import tensorflow as tf

from components.io import csv_text

INT, FLOAT, BYTES = "INT", "FLOAT", "BYTES"
MAX_NAMED_ROWS = 5


class SequenceInputError(ValueError):
    """An event table that cannot become sequences, naming the file, line and column."""


@dataclass(frozen=True)
class Layout:
    """Which column plays which part, with each column's type (INT, FLOAT or BYTES)."""

    key: str
    order_by: str
    order_format: str  # number | timestamp
    label: str
    context: tuple[str, ...]
    features: tuple[str, ...]
    kinds: Mapping[str, str]
    max_length: int = 64
    truncate: str = "keep_last"

    @classmethod
    def of(cls, options: Mapping[str, Any], kinds: Mapping[str, str]) -> Layout:
        """From SequenceOptions.to_dict() (custom_config) and the columns' types."""
        return cls(
            key=options["key"],
            order_by=options["order_by"],
            order_format=options.get("order_format", "number"),
            label=options["label"],
            context=tuple(options.get("context") or ()),
            features=tuple(options["features"]),
            kinds=dict(kinds),
            max_length=int(options.get("max_length", 64)),
            truncate=options.get("truncate", "keep_last"),
        )

    def columns(self, with_label: bool = True) -> list[str]:
        label = [self.label] if with_label else []
        return [self.key, self.order_by, *label, *self.context, *self.features]


@dataclass(frozen=True)
class Event:
    """One row: its order value, where it came from, and its cells by column index."""

    order: float
    where: str  # "file:line"
    cells: tuple[str, ...]


def parse_order(value: str, order_format: str, where: str) -> float:
    """The order cell as a number (timestamps: seconds since 1970, naive read as UTC)."""
    text = value.strip()
    if not text:
        raise SequenceInputError(f"{where}: the order column is blank; every event needs one")
    try:
        if order_format == "timestamp":
            stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
            return stamp.timestamp()
        number = float(text)
    except ValueError:
        what = (
            "an ISO timestamp (2026-03-01 10:15:30)" if order_format == "timestamp" else "a number"
        )
        raise SequenceInputError(f"{where}: order value {value!r} is not {what}") from None
    if not math.isfinite(number):
        raise SequenceInputError(f"{where}: order value {value!r} is not finite")
    return number


def header_positions(header: list[str], columns: Iterable[str], path: str) -> dict[str, int]:
    """Column -> index in `header`, or an error naming every missing column."""
    names = [h.strip() for h in header]
    missing = [c for c in columns if c not in names]
    if missing:
        raise SequenceInputError(f"{path}: header lacks column(s) {missing} (it has {names})")
    return {c: names.index(c) for c in columns}


def read_events(
    path: str,
    layout: Layout,
    encoding: str = csv_text.DEFAULT_ENCODING,
    with_label: bool = True,
    renamed: Mapping[str, str] | None = None,
) -> Iterator[tuple[str, Event]]:
    """(key, event) for every data row of one CSV file, cells in `layout.columns()` order
    (`renamed`: header name -> feature name, for headers `tfxp init` renamed)."""
    lines = csv_text.TextLines(path, encoding, strict=True)
    reader = csv.reader(iter(lines))
    header = next(reader, None)
    if header is None:
        raise SequenceInputError(f"{path}: empty file (no header)")
    columns = layout.columns(with_label)
    names = [(renamed or {}).get(h.strip(), h.strip()) for h in header]
    at = [header_positions(names, columns, path)[c] for c in columns]
    order_at = columns.index(layout.order_by)
    line = 2
    for row in reader:
        where = f"{path}:{line}"
        line = reader.line_num + 1
        if not row:
            continue
        if len(row) != len(header):
            raise SequenceInputError(
                f"{where}: has {len(row)} fields, the header has {len(header)}"
            )
        cells = tuple(row[i] for i in at)
        key = cells[0]
        if not key.strip():
            raise SequenceInputError(f"{where}: the key column {layout.key!r} is blank")
        yield key, Event(parse_order(cells[order_at], layout.order_format, where), where, cells)


def _feature(value: str, kind: str, where: str, column: str) -> tf.train.Feature:
    feature = tf.train.Feature()
    if value == "":
        return feature  # a missing value: no value, the step kept
    try:
        if kind == INT:
            feature.int64_list.value.append(int(value))
        elif kind == FLOAT:
            number = float(value)
            if math.isinf(number):
                raise ValueError
            feature.float_list.value.append(number)
        else:
            feature.bytes_list.value.append(value.encode("utf-8"))
    except ValueError:
        word = {INT: "an integer", FLOAT: "a finite number"}[kind]
        raise SequenceInputError(f"{where} column {column!r}: {value!r} is not {word}") from None
    return feature


def _check_constant(key: str, events: list[Event], index: int, column: str, role: str) -> None:
    """Refuses a per-sequence column whose value changes within the key, naming the rows."""
    first = events[0].cells[index]
    differing = [e for e in events if e.cells[index] != first]
    if differing:
        shown = ", ".join(f"{e.where} ({e.cells[index]!r})" for e in differing[:MAX_NAMED_ROWS])
        raise SequenceInputError(
            f"key {key!r}: the {role} column {column!r} varies within the sequence: "
            f"{events[0].where} has {first!r}, but {shown}"
        )


def _check_order(key: str, events: list[Event]) -> None:
    for before, after in zip(events, events[1:], strict=False):
        if before.order == after.order:
            raise SequenceInputError(
                f"key {key!r}: rows {before.where} and {after.where} have the same order "
                "value; the order column must order a key's events"
            )


def build(
    key: str, events: list[Event], layout: Layout, with_label: bool = True
) -> tuple[tf.train.SequenceExample, int]:
    """(the SequenceExample of one key's events, how many steps were cut off)."""
    events = sorted(events, key=lambda e: e.order)
    _check_order(key, events)
    columns = layout.columns(with_label)
    example = tf.train.SequenceExample()
    context = example.context.feature
    context[layout.key].bytes_list.value.append(key.encode("utf-8"))
    # columns: key, order, [label], *context, *features
    per_sequence = len(layout.context) + (1 if with_label else 0)
    for index in range(2, 2 + per_sequence):
        column = columns[index]
        role = "label" if with_label and column == layout.label else "context"
        _check_constant(key, events, index, column, role)
        context[column].CopyFrom(
            _feature(events[0].cells[index], layout.kinds[column], events[0].where, column)
        )
    cut = max(0, len(events) - layout.max_length)
    if cut:
        events = events[cut:] if layout.truncate == "keep_last" else events[: layout.max_length]
    lists = example.feature_lists.feature_list
    start = len(columns) - len(layout.features)
    for offset, column in enumerate(layout.features):
        steps = lists[column].feature
        kind = layout.kinds[column]
        for event in events:
            steps.append(_feature(event.cells[start + offset], kind, event.where, column))
    return example, cut


def group(pairs: Iterable[tuple[str, Event]]) -> dict[str, list[Event]]:
    """Key -> its events, in one process (init, predict); the ExampleGen groups in Beam."""
    grouped: dict[str, list[Event]] = {}
    for key, event in pairs:
        grouped.setdefault(key, []).append(event)
    return grouped


def examples_of_files(
    paths: Iterable[str],
    layout: Layout,
    encoding: str = csv_text.DEFAULT_ENCODING,
    with_label: bool = True,
    renamed: Mapping[str, str] | None = None,
) -> list[tuple[str, tf.train.SequenceExample]]:
    """(key, SequenceExample) of every key in the files, keys in first-seen order."""
    grouped: dict[str, list[Event]] = {}
    for path in paths:
        for key, event in read_events(str(path), layout, encoding, with_label, renamed):
            grouped.setdefault(key, []).append(event)
    return [(key, build(key, events, layout, with_label)[0]) for key, events in grouped.items()]
