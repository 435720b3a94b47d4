"""Predictions as CSV and TFRecords, published whole or not at all.

One output row per scored input row: `file` and `line` (where the row is in
the span), the dataset's key columns, then the prediction columns (one
probability per class and the class, or the value). The same rows go to
`predictions.csv` and, as tf.Examples, to `predictions.tfrecord.gz` (GZIP);
the rows that could not be scored go to `skipped_rows.csv` (file, line,
reason), and `summary.json` says which model scored which data.

Everything is written into a hidden `.incoming-<id>` folder beside the
destination and renamed into place at the end: a reader never sees half a
predictions file, and a failure leaves nothing behind.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import uuid
from collections.abc import Sequence
from typing import Any

from components.batch_inference.scoring import SkippedRow
from components.batch_inference.serving import RowEncoder
from components.example_gen.csv_checks import BYTES, FLOAT, INT
from components.io.log_policy import Applier

PREDICTIONS_CSV = "predictions.csv"
PREDICTIONS_TFRECORD = "predictions.tfrecord.gz"
SKIPPED_CSV = "skipped_rows.csv"
SUMMARY_JSON = "summary.json"
TMP_PREFIX = ".incoming-"
LOCATION_COLUMNS = ("file", "line")


def _column_kinds(columns: Sequence[str], tabular: Any) -> list[str]:
    """FLOAT, INT or BYTES per prediction column, for the TFRecord features."""
    kinds = []
    for c in columns:
        if c.startswith("probability"):
            kinds.append(FLOAT)
        elif tabular is None:
            kinds.append(INT)  # the single-output model's 0/1 class
        elif tabular.task == "regression":
            kinds.append(FLOAT)
        else:
            kinds.append(BYTES)  # a class name
    return kinds


class PredictionsWriter:
    """A sink for components.batch_inference.scoring.score_files; `publish` makes it visible."""

    def __init__(
        self,
        destination: str,
        key_columns: Sequence[str],
        prediction_columns: Sequence[str],
        tabular: Any = None,
        *,
        base: str | None = None,
        policy: Applier | None = None,
    ) -> None:
        self.destination = destination.rstrip("/")
        # The dataset's request_log: policy applies to the input columns echoed here:
        # a dropped key column is not written, a hashed one holds its HMAC category.
        self.policy = policy or Applier(None)
        self._key_actions = [self.policy.action(k) for k in key_columns]
        self.key_columns = tuple(
            k for k, a in zip(key_columns, self._key_actions, strict=True) if a != "drop"
        )
        self.prediction_columns = tuple(prediction_columns)
        self.columns = (*LOCATION_COLUMNS, *self.key_columns, *self.prediction_columns)
        # The TFRecords hold the CSV's cells as a tf.Example: file, key columns and class
        # names as bytes, line and a 0/1 class as int64, probabilities and values as float.
        columns = self.prediction_columns
        kinds = dict(zip(columns, _column_kinds(columns, tabular), strict=True))
        kinds.update({"file": BYTES, "line": INT, **{k: BYTES for k in self.key_columns}})
        self._encode = RowEncoder(list(self.columns), kinds)
        self._base = base
        parent = os.path.dirname(self.destination) or "."
        if os.path.isdir(self.destination):
            parent = self.destination  # an existing (empty) folder: a TFX artifact's uri
        os.makedirs(parent, exist_ok=True)
        self.tmp = os.path.join(parent, f"{TMP_PREFIX}{uuid.uuid4().hex}")
        os.makedirs(self.tmp)
        self._open()

    def _open(self) -> None:
        import tensorflow as tf

        self._csv_file = open(  # noqa: SIM115 - closed in close()
            os.path.join(self.tmp, PREDICTIONS_CSV), "w", newline="", encoding="utf-8"
        )
        self._csv = csv.writer(self._csv_file, lineterminator="\n")
        self._csv.writerow(self.columns)
        self._skip_file = open(  # noqa: SIM115 - closed in close()
            os.path.join(self.tmp, SKIPPED_CSV), "w", newline="", encoding="utf-8"
        )
        self._skips = csv.writer(self._skip_file, lineterminator="\n")
        self._skips.writerow(("file", "line", "reason"))
        self._records = tf.io.TFRecordWriter(
            os.path.join(self.tmp, PREDICTIONS_TFRECORD), options="GZIP"
        )
        self._closed = False

    def _name(self, path: str) -> str:
        return os.path.relpath(path, self._base) if self._base else os.path.basename(path)

    def write(self, path: str, line: int, keys: Sequence[str], cells: Sequence[str]) -> None:
        if self.policy.changes_anything:
            keys = [
                self.policy.hashed([k])[0].decode() if a == "hash" else k
                for k, a in zip(keys, self._key_actions, strict=True)
                if a != "drop"
            ]
        row = (self._name(path), str(line), *keys, *cells)
        self._csv.writerow(row)
        self._records.write(self._encode(row))

    def skipped(self, row: SkippedRow) -> None:
        self._skips.writerow((self._name(row.path), row.line, row.reason))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._csv_file.close()
            self._skip_file.close()
            self._records.close()

    def publish(self, summary: dict[str, Any]) -> str:
        """Writes summary.json and moves everything into the destination; returns it."""
        self.close()
        if self.policy.policy is not None:
            summary = {**summary, "request_log_policy": self.policy.fingerprint}
        with open(os.path.join(self.tmp, SUMMARY_JSON), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2, sort_keys=True)
            f.write("\n")
        if not os.path.exists(self.destination):
            os.rename(self.tmp, self.destination)  # the whole folder appears at once
            return self.destination
        # An existing folder (a TFX artifact's uri): each file appears whole, the summary last.
        names = [PREDICTIONS_CSV, PREDICTIONS_TFRECORD, SKIPPED_CSV, SUMMARY_JSON]
        taken = [n for n in names if os.path.exists(os.path.join(self.destination, n))]
        if taken:
            self.discard()
            raise FileExistsError(f"{self.destination} already holds {', '.join(taken)}")
        for n in names:
            os.replace(os.path.join(self.tmp, n), os.path.join(self.destination, n))
        os.rmdir(self.tmp)
        return self.destination

    def discard(self) -> None:
        """Removes everything written so far (after a failure)."""
        self.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> PredictionsWriter:
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is not None:
            self.discard()
