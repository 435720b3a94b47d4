"""`tfxp models compare`: champion against challenger on the traffic they both saw.

Read from the request log (components/validation/serving_log.py). With `tfxp serve --shadow`
every request is answered by one version (`__role=served`) and also scored by
the challenger (`__role=shadow`) under the same request id: those pairs give the
agreement of the two versions, the share of equal predicted classes for a
classifier, the mean absolute difference of predictions for a regressor. A
request of several examples logs one record per example, in order, so the k-th
served and the k-th shadow record of a request id are the same example.

Labels that arrive later (a CSV with a request-id column and a label column,
one row per logged example in the same order) give each version's own metrics
on the requests it scored, shadow or served (split traffic included).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from components.validation import serving_log as sl

REGRESSION = "regression"


class CompareError(ValueError):
    """Nothing to compare, or an input that cannot be read; the message says which."""


@dataclass(frozen=True)
class Record:
    request_id: str
    k: int  # the k-th record of this request id in this role (0-based)
    version: int | None
    label: str | None
    role: str
    output: tuple[float, ...]


@dataclass
class Agreement:
    served_version: int | None
    shadow_version: int | None
    pairs: int
    agreement: float | None = None  # classification: share of equal classes
    mean_abs_diff: float | None = None  # predictions' mean absolute difference


@dataclass
class VersionMetrics:
    version: int | None
    role: str
    labelled: int
    accuracy: float | None = None
    mae: float | None = None
    rmse: float | None = None


@dataclass
class Comparison:
    folder: str
    files: int
    records: int
    task: str
    counts: dict[str, int] = field(default_factory=dict)  # "version label role" -> records
    agreements: list[Agreement] = field(default_factory=list)
    metrics: list[VersionMetrics] = field(default_factory=list)
    labels_file: str | None = None
    labels_matched: int = 0


def load_records(folder: str, window: sl.WindowOptions | None) -> tuple[list[Record], int]:
    """The log's records (the window's files, or all with `window` None) and the file count."""
    import os

    if not os.path.isdir(folder):
        raise CompareError(
            f"no request log at {folder}: `tfxp serve` writes it there (see docs/serving-logs.md)"
        )
    files = sl.published_files(folder)
    if window is not None:
        files = sl.window_files(files, window)
    if not files:
        raise CompareError(f"{folder} holds no published log file (requests-*.tfrecord.gz)")
    table = sl.read_metadata(list(reversed(files)))  # oldest first: the order of the requests
    columns = [sl.first_values(table, c) for c in (sl.REQUEST_ID, sl.VERSION, sl.LABEL, sl.ROLE)]
    outputs = (
        table.column(sl.OUTPUT).to_pylist()
        if sl.OUTPUT in table.column_names
        else [None] * table.num_rows
    )
    seen: dict[tuple[str, str], int] = defaultdict(int)
    records = []
    for rid, version, label, role, output in zip(*columns, outputs, strict=True):
        if rid is None:
            continue
        role = role or sl.SERVED
        k = seen[(rid, role)]
        seen[(rid, role)] += 1
        records.append(Record(rid, k, version, label or None, role, tuple(output or ())))
    return records, len(files)


def predicted_class(output: tuple[float, ...]) -> int:
    """Binary: one probability (class 1 at 0.5 or above); multi-class: the top score."""
    if len(output) == 1:
        return int(output[0] >= 0.5)
    return max(range(len(output)), key=lambda i: output[i])


def _agreements(records: list[Record], task: str) -> list[Agreement]:
    served = {(r.request_id, r.k): r for r in records if r.role == sl.SERVED}
    by_pair: dict[tuple, list[tuple[Record, Record]]] = defaultdict(list)
    for r in records:
        other = served.get((r.request_id, r.k)) if r.role == sl.SHADOW else None
        if other is not None and r.output and other.output:
            by_pair[(other.version, r.version)].append((other, r))
    out = []
    for (a, b), pairs in sorted(by_pair.items(), key=lambda kv: str(kv[0])):
        agreement = Agreement(a, b, len(pairs))
        # Multi-class: the scores' mean absolute difference over the classes.
        diffs = [
            sum(abs(p - q) for p, q in zip(x.output, y.output, strict=False)) / len(x.output)
            for x, y in pairs
        ]
        agreement.mean_abs_diff = sum(diffs) / len(diffs)
        if task != REGRESSION:
            same = sum(predicted_class(x.output) == predicted_class(y.output) for x, y in pairs)
            agreement.agreement = same / len(pairs)
        out.append(agreement)
    return out


def read_labels(path: str, id_column: str, label_column: str) -> dict[str, list[str]]:
    """request id -> its labels in file order (one per logged example of the request)."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            for column, flag in ((id_column, "--id-column"), (label_column, "--label-column")):
                if column not in header:
                    raise CompareError(
                        f"{path}: no column {column!r} (columns: {', '.join(header) or 'none'}); "
                        f"name it with {flag}"
                    )
            labels: dict[str, list[str]] = defaultdict(list)
            for row in reader:
                if row[id_column] and row[label_column] not in (None, ""):
                    labels[row[id_column]].append(row[label_column])
    except OSError as e:
        raise CompareError(f"{path}: cannot read the labels file: {e.strerror}") from None
    return labels


def _label_value(text: str, task: str, classes: list[str], where: str) -> float:
    if task != REGRESSION and text in classes:
        return float(classes.index(text))
    lowered = text.strip().lower()
    if task == "binary" and lowered in ("true", "false"):
        return float(lowered == "true")
    try:
        return float(text)
    except ValueError:
        raise CompareError(f"{where}: label {text!r} is not a number or a class name") from None


def _metrics(
    records: list[Record], labels: dict[str, list[str]], task: str, classes: list[str], path: str
) -> tuple[list[VersionMetrics], int]:
    groups: dict[tuple, list[tuple[float, Record]]] = defaultdict(list)
    for r in records:
        found = labels.get(r.request_id, [])
        if r.k < len(found) and r.output:
            value = _label_value(found[r.k], task, classes, f"{path}: request {r.request_id}")
            groups[(r.version, r.role)].append((value, r))
    matched = sum(len(v) for v in groups.values())
    out = []
    for (version, role), rows in sorted(groups.items(), key=lambda kv: str(kv[0])):
        m = VersionMetrics(version, role, len(rows))
        if task == REGRESSION:
            errors = [r.output[0] - y for y, r in rows]
            m.mae = sum(abs(e) for e in errors) / len(errors)
            m.rmse = math.sqrt(sum(e * e for e in errors) / len(errors))
        else:
            m.accuracy = sum(predicted_class(r.output) == int(y) for y, r in rows) / len(rows)
        out.append(m)
    return out, matched


def compare(
    folder: str,
    task: str,
    *,
    window: sl.WindowOptions | None = None,
    labels_path: str | None = None,
    id_column: str = "request_id",
    label_column: str = "label",
    classes: list[str] | None = None,
) -> Comparison:
    """Agreement of the versions on shared requests, and per-version metrics on labels."""
    records, files = load_records(folder, window)
    result = Comparison(folder, files, len(records), task)
    for r in records:
        key = f"{r.version} {r.label or '-'} {r.role}"
        result.counts[key] = result.counts.get(key, 0) + 1
    result.agreements = _agreements(records, task)
    if labels_path:
        labels = read_labels(labels_path, id_column, label_column)
        result.labels_file = labels_path
        result.metrics, result.labels_matched = _metrics(
            records, labels, task, classes or [], labels_path
        )
        if not result.labels_matched:
            raise CompareError(
                f"{labels_path}: none of its {len(labels)} request ids is in the log "
                f"({len(records)} records in {folder})"
            )
    elif not result.agreements:
        raise CompareError(
            f"no request in {folder} was scored by two versions ({len(records)} records): "
            "serve with --shadow for agreement, or pass --labels FILE.csv for each version's metrics"
        )
    return result


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


def render(c: Comparison) -> str:
    lines = [f"request log {c.folder}: {c.records} records in {c.files} file(s), task {c.task}"]
    lines.append("  records by version, label, role:")
    lines += [f"    {k}: {n}" for k, n in sorted(c.counts.items())]
    if c.agreements:
        lines.append("agreement on the same requests (served vs shadow):")
    for a in c.agreements:
        what = (
            f"mean |difference| {_num(a.mean_abs_diff)}"
            if a.agreement is None
            else f"same class {a.agreement:.1%}, mean |difference| of scores {_num(a.mean_abs_diff)}"
        )
        lines.append(
            f"  version {a.served_version} (served) vs {a.shadow_version} (shadow): "
            f"{a.pairs} requests, {what}"
        )
    if not c.agreements:
        lines.append("agreement: no request scored by two versions (serve with --shadow)")
    if c.labels_file:
        lines.append(f"metrics on labels from {c.labels_file} ({c.labels_matched} matched):")
    for m in c.metrics:
        figures = (
            f"accuracy {_num(m.accuracy)}"
            if m.accuracy is not None
            else f"MAE {_num(m.mae)}, RMSE {_num(m.rmse)}"
        )
        lines.append(f"  version {m.version} ({m.role}): {m.labelled} labelled, {figures}")
    return "\n".join(lines)


def to_dict(c: Comparison) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(c)
