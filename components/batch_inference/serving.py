"""What every scorer of raw CSV rows shares: the serving signature, rows as tf.Examples, outputs as cells.

A pushed model's `serving_default` signature takes serialized raw tf.Examples
and applies the transform graph itself, so scoring only turns CSV rows into
tf.Examples typed by the curated schema: no preprocessing is repeated. `tfxp
predict` (one CSV, outside the pipeline) and batch inference (a span, recorded
in ML Metadata) both read rows, build examples and format outputs here, so the
two give the same numbers for the same row.
"""

from __future__ import annotations

import csv
import math
import struct
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from components.example_gen import csv_checks
from components.io import csv_text

SIGNATURE = "serving_default"


class ServingModelError(RuntimeError):
    """The model cannot be used for scoring; the message says what to do."""


def load_serving_signature(model_dir: str):
    """The `serving_default` concrete function of the SavedModel in `model_dir`."""
    import tensorflow as tf

    try:
        model = tf.saved_model.load(model_dir)
        return model.signatures[SIGNATURE]
    except (OSError, KeyError, ValueError) as e:
        raise ServingModelError(
            f"{model_dir}: not a SavedModel with a {SIGNATURE!r} signature: {e}"
        ) from e


def csv_rows(
    path: str, encoding: str = "utf-8", *, strict: bool = True
) -> tuple[list[str], Iterator[tuple[int, list[str]]], csv_text.TextLines]:
    """The header, (line, row) of each data row, and the text lines read, as ExampleGen
    reads them (components/io/csv_text.py: byte-order mark skipped, text in the dataset's
    encoding). `strict=False` keeps reading past bytes that are not valid text (the
    lines are in the returned TextLines' `invalid`)."""
    text = csv_text.TextLines(path, encoding, strict=strict)
    reader = csv.reader(text)
    header = [h.strip() for h in next(reader, [])]

    def gen() -> Iterator[tuple[int, list[str]]]:
        line = reader.line_num + 1
        for row in reader:
            if row:
                yield line, row
            line = reader.line_num + 1

    return header, gen(), text


def _varint(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF  # int64 on the wire: a negative number is its 10-byte two's complement
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _length_delimited(tag: int, payload: bytes) -> bytes:
    return bytes((tag,)) + _varint(len(payload)) + payload


# Feature's oneof field for a BytesList (FLOAT and INT entries are spelled out in RowEncoder).
_BYTES_LIST = 0x0A
_FLOAT32 = struct.Struct("<f")
_INFINITIES = (math.inf, -math.inf)


class RowEncoder:
    """Serialized tf.Examples of CSV rows with one header, typed by the schema.

    A missing value (an empty cell) or a column the schema does not know is
    left out, as CsvExampleGen leaves it out. A cell the CSV checks refuse
    (`csv_checks.cell_problem`: not of its type, an integer beyond int64, an
    infinity, NaN in a `finite` column) raises ValueError, so a caller needs no
    separate pass over the cells. The protobuf wire format is written directly,
    with each column's constant bytes prepared once: building tf.train.Example
    messages took ~45 us of CPU a row (the model itself ~10), this ~14.
    tests/unit/components/batch_inference/test_batch_inference.py checks the bytes parse to the message
    TensorFlow's classes build.
    """

    def __init__(
        self, header: list[str], types: dict[str, str], finite: Collection[str] = ()
    ) -> None:
        self.finite = {i for i, name in enumerate(header) if name in finite}
        # (column index, kind, bytes before the value) for each schema column: a FLOAT
        # entry has a fixed length, so its whole prefix is constant; the others start
        # with their key.
        self.columns: list[tuple[int, str, bytes]] = []
        for i, name in enumerate(header):
            kind = types.get(name)
            if kind is None:
                continue
            key = _length_delimited(0x0A, name.encode())
            if kind == csv_checks.FLOAT:
                # map entry {key, value: Feature{float_list: FloatList{value: [packed]}}}
                body = key + b"\x12\x08\x12\x06\x0a\x04"
                self.columns.append((i, kind, b"\x0a" + _varint(len(body) + 4) + body))
            else:
                self.columns.append((i, kind, key))

    def __call__(self, row: Sequence[str]) -> bytes:
        entries: list[bytes] = []
        append = entries.append
        for i, kind, prefix in self.columns:
            value = row[i]
            if not value:
                continue
            if kind == csv_checks.FLOAT:
                number = float(value)  # as the CSV checks read it: surrounding spaces allowed
                if number in _INFINITIES or (number != number and i in self.finite):
                    raise ValueError(f"{value!r} is refused in this column")
                try:
                    append(prefix + _FLOAT32.pack(number))
                except OverflowError:  # beyond float32: protobuf stores an infinity
                    append(prefix + _FLOAT32.pack(math.copysign(math.inf, number)))
                continue
            if kind == csv_checks.INT:
                number = int(value)
                if not csv_checks.INT64_MIN <= number <= csv_checks.INT64_MAX:
                    raise ValueError(f"{value!r} does not fit a 64-bit integer")
                varint = _varint(number)  # at most 10 bytes: every length fits one byte
                n = len(varint)
                body = prefix + bytes((0x12, n + 4, 0x1A, n + 2, 0x0A, n)) + varint
            else:
                value = value.strip()
                if not value:
                    continue
                feature = _length_delimited(_BYTES_LIST, _length_delimited(0x0A, value.encode()))
                body = prefix + _length_delimited(0x12, feature)
            append(b"\x0a" + _varint(len(body)) + body)
        if not entries:
            return b""
        return _length_delimited(0x0A, b"".join(entries))


def raw_example(header: list[str], row: list[str], types: dict[str, str]) -> bytes:
    """A serialized tf.Example of one CSV row (RowEncoder; for one-off rows)."""
    return RowEncoder(header, types)(row)


def tabular_columns(options) -> tuple[str, ...]:
    """Output columns of a tabular model: one probability per class and the class, or the value."""
    if options.task == "regression":
        return ("prediction",)
    if options.task == "binary":
        return (f"probability_{options.classes[1]}", "prediction")
    return (*(f"probability_{c}" for c in options.classes), "prediction")


def tabular_cells(options, out) -> list[list[str]]:
    """serving_default's outputs (trainer/tabular/train.py) -> CSV cells per row."""
    if options.task == "regression":
        return [[f"{v:.6g}"] for v in out["predictions"].numpy().reshape(-1)]
    key = "logistic" if options.task == "binary" else "probabilities"
    scores = out[key].numpy()
    names = [c.decode() for c in out["class"].numpy()]
    return [[*(f"{p:.6f}" for p in row), c] for row, c in zip(scores, names, strict=True)]


# A model with its own code (taxi): one probability, the positive class from 0.5 on.
SINGLE_OUTPUT_COLUMNS = ("probability", "prediction")


def prediction_columns(tabular: Any) -> tuple[str, ...]:
    """The output columns for a dataset's model: `tabular_columns`, or probability and prediction."""
    return tabular_columns(tabular) if tabular is not None else SINGLE_OUTPUT_COLUMNS


def single_output(out) -> list[float]:
    """A model with one output (taxi's `probability`): its value per row."""
    import tensorflow as tf

    return [float(p) for p in tf.reshape(next(iter(out.values())), [-1]).numpy()]


def single_output_cells(p: float) -> list[str]:
    return [f"{p:.6f}", str(int(p >= 0.5))]


def row_score(tabular: Any, cells: list[str]) -> float:
    """One number per scored row (the value, or the top class probability): NaN means unscorable."""
    if tabular is None or not tabular.classes:
        return float(cells[0])
    return max(map(float, cells[:-1]))


def prediction_cells(tabular: Any, out) -> list[list[str]]:
    """The signature's outputs for a batch -> the output cells of each row."""
    if tabular is not None:
        return tabular_cells(tabular, out)
    return [single_output_cells(p) for p in single_output(out)]
