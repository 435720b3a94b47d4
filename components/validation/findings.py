"""The validation gate's findings and result, and how TFDV's anomalies become findings.

A finding is one anomaly: feature, kind (schema, drift or skew), measured value,
threshold, and whether it blocks or only warns. TFDV reports drift and skew with
the same anomaly types and keeps the distances in `drift_skew_info`; the
functions here turn one TFDV `Anomalies` proto of a known kind into findings
and measurements (components/validation/checks.py runs the checks).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2

SCHEMA, DRIFT, SKEW = "schema", "drift", "skew"
KINDS = (SCHEMA, DRIFT, SKEW)
TRAINING, SERVING = "TRAINING", "SERVING"
BLOCK, WARN, PASS = "BLOCK", "WARN", "PASS"
# Drift and skew are measured on the training split: the data the model learns from.
COMPARED_SPLIT = "train"

L_INFTY = "L-infinity"
JSD = "Jensen-Shannon"


@dataclass
class Finding:
    """One anomaly: what, where, how big, against which threshold, and the verdict."""

    kind: str  # schema, drift or skew
    feature: str
    anomaly: str  # TFDV's anomaly type, e.g. COMPARATOR_L_INFTY_HIGH
    description: str
    measured: float | None = None
    threshold: float | None = None
    measure: str | None = None  # L-infinity / Jensen-Shannon
    where: str = ""  # split(s) or data compared
    severity: str = BLOCK  # BLOCK or WARN
    op: str = ">"  # how measured compares with threshold when it is an anomaly

    def line(self) -> str:
        value = ""
        if self.measured is not None:
            value = f" {self.measure} {self.measured:.4g} {self.op} threshold {self.threshold:g};"
        verdict = "blocks" if self.severity == BLOCK else "warning"
        return f"[{verdict}] {self.kind} {self.feature}:{value} {self.description} ({self.where})"


# The findings as a table (the console's run page): one row per finding, the
# compared data named once above it instead of in every row.
TABLE_COLUMNS = ("feature", "check", "measure", "measured", "threshold", "verdict")


def table_row(f: Finding) -> dict[str, str]:
    return {
        "feature": f.feature,
        "check": f"{f.kind}: {f.anomaly}" if f.anomaly else f.kind,
        "measure": f.measure or "",
        "measured": "" if f.measured is None else f"{f.measured:.4g}",
        "threshold": "" if f.threshold is None else f"{f.op} {f.threshold:g}",
        "verdict": "blocks" if f.severity == BLOCK else "warning",
        "description": f.description,
    }


def compared_data(findings: list[Finding]) -> list[str]:
    """The data the findings compared (each finding's `where`), each named once."""
    return list(dict.fromkeys(f.where for f in findings if f.where))


@dataclass
class Measurement:
    """A drift or skew distance for one feature, anomalous or not (for the report)."""

    kind: str  # drift or skew
    feature: str
    measure: str
    value: float
    threshold: float

    @property
    def exceeded(self) -> bool:
        return self.value > self.threshold


@dataclass
class GateResult:
    decision: str  # PASS, WARN or BLOCK
    findings: list[Finding]
    measurements: list[Measurement]
    notes: list[str]  # what was (not) compared, e.g. "no baseline: first span"
    current_span: int | None = None
    baseline_span: int | None = None
    serving_rows: int | None = None

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == BLOCK]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARN]

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "findings": [asdict(f) for f in self.findings],
            "measurements": [asdict(m) for m in self.measurements],
            "notes": self.notes,
            "current_span": self.current_span,
            "baseline_span": self.baseline_span,
            "serving_rows": self.serving_rows,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> GateResult:
        return cls(
            decision=raw["decision"],
            findings=[Finding(**f) for f in raw["findings"]],
            measurements=[Measurement(**m) for m in raw["measurements"]],
            notes=list(raw["notes"]),
            current_span=raw.get("current_span"),
            baseline_span=raw.get("baseline_span"),
            serving_rows=raw.get("serving_rows"),
        )

    def headline(self) -> str:
        """The verdict in one line: passed, blocked (how many anomalies), or warned."""
        if self.decision == PASS:
            return "validation gate: passed (" + "; ".join(self.notes) + ")"
        if self.decision == BLOCK:
            n = len(self.blocking)
            return f"validation gate blocked the run: {n} anomal{'y' if n == 1 else 'ies'}"
        return f"validation gate: passed with {len(self.warnings)} warning(s)"

    def footer(self) -> list[str]:
        """What follows the findings: the notes, and for a block what to do about it."""
        lines = ["note: " + n for n in self.notes]
        if self.decision == BLOCK:
            kinds = sorted({f.kind for f in self.blocking})
            lines.append(
                "Nothing downstream ran. Fix the data, or raise the threshold / add the kind to "
                "warn_only in the thresholds file (for one run: "
                + " ".join(f"`--warn-only {k}`" for k in kinds)
                + ") if the change is expected."
            )
        return lines

    def message(self) -> str:
        """The gate's verdict as the run's error or warning text, a line per finding
        (the record kept in ML Metadata and sent in alerts; tfxp/presentation/
        gate_table.py renders the same result as a table for the terminal)."""
        if self.decision == PASS:
            return self.headline()
        lines = [self.headline(), *("  " + f.line() for f in self.findings)]
        return "\n".join(lines + ["  " + line for line in self.footer()])


_MEASURE_NAMES = {
    anomalies_pb2.DriftSkewInfo.Measurement.L_INFTY: L_INFTY,
    anomalies_pb2.DriftSkewInfo.Measurement.JENSEN_SHANNON_DIVERGENCE: JSD,
}
_COMPARATOR_TYPES = {
    anomalies_pb2.AnomalyInfo.COMPARATOR_L_INFTY_HIGH,
    anomalies_pb2.AnomalyInfo.COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH,
    anomalies_pb2.AnomalyInfo.COMPARATOR_NORMALIZED_ABSOLUTE_DIFFERENCE_HIGH,
}


def _feature_name(path) -> str:
    return ".".join(path.step)


def _anomaly_types(info: anomalies_pb2.AnomalyInfo) -> list[str]:
    names = [anomalies_pb2.AnomalyInfo.Type.Name(r.type) for r in info.reason]
    return names or ["UNKNOWN_TYPE"]


def measurements_of(anomalies: anomalies_pb2.Anomalies, kind: str) -> dict[str, list[Measurement]]:
    out: dict[str, list[Measurement]] = {}
    for info in anomalies.drift_skew_info:
        name = _feature_name(info.path)
        values = info.drift_measurements if kind == DRIFT else info.skew_measurements
        for m in values:
            if math.isnan(m.value):
                continue
            out.setdefault(name, []).append(
                Measurement(
                    kind, name, _MEASURE_NAMES.get(m.type, "distance"), m.value, m.threshold
                )
            )
    return out


def findings_of(
    anomalies: anomalies_pb2.Anomalies,
    kind: str,
    where: str,
    *,
    comparators_only: bool,
    measured: Mapping[str, list[Measurement]] | None = None,
) -> list[Finding]:
    found = []
    for name, info in sorted(anomalies.anomaly_info.items()):
        for reason in info.reason or [None]:
            rtype = reason.type if reason is not None else anomalies_pb2.AnomalyInfo.UNKNOWN_TYPE
            is_comparator = rtype in _COMPARATOR_TYPES
            if comparators_only != is_comparator:
                continue
            f = Finding(
                kind=kind,
                feature=name,
                anomaly=anomalies_pb2.AnomalyInfo.Type.Name(rtype),
                description=(reason.description if reason is not None else info.description),
                where=where,
            )
            for m in (measured or {}).get(name, []):
                if m.exceeded:
                    f.measured, f.threshold, f.measure = m.value, m.threshold, m.measure
            found.append(f)
    if anomalies.HasField("dataset_anomaly_info"):
        info = anomalies.dataset_anomaly_info
        for t in _anomaly_types(info):
            found.append(Finding(kind, "(dataset)", t, info.description, where=where))
    return found


# Schema anomaly types whose size is a statistic against a schema bound:
# type -> (statistic, bound, comparison).
_BOUNDED = {
    "INT_TYPE_BIG_INT": ("max", "max", ">"),
    "FLOAT_TYPE_BIG_FLOAT": ("max", "max", ">"),
    "INT_TYPE_SMALL_INT": ("min", "min", "<"),
    "FLOAT_TYPE_SMALL_FLOAT": ("min", "min", "<"),
    "FEATURE_TYPE_LOW_FRACTION_PRESENT": ("present fraction", "min_fraction", "<"),
}


def measure_schema_finding(
    finding: Finding,
    schema: schema_pb2.Schema,
    current: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList],
) -> None:
    """Adds the measured statistic and the schema's bound to a range/presence anomaly."""
    kind = _BOUNDED.get(finding.anomaly)
    feature = next((f for f in schema.feature if f.name == finding.feature), None)
    if kind is None or feature is None:
        return
    statistic, bound, op = kind
    if bound == "min_fraction":
        threshold = feature.presence.min_fraction
    else:
        domain = feature.int_domain if feature.HasField("int_domain") else feature.float_domain
        threshold = getattr(domain, bound)
    values = []
    for stats in current.values():
        for f in stats.datasets[0].features:
            if ".".join(f.path.step) != finding.feature or not f.HasField("num_stats"):
                continue
            n = f.num_stats
            total = n.common_stats.num_non_missing + n.common_stats.num_missing
            if statistic == "present fraction":
                values.append(n.common_stats.num_non_missing / total if total else 0.0)
            else:
                values.append(getattr(n, statistic))
    if values:
        finding.measured = max(values) if op == ">" else min(values)
        finding.threshold = float(threshold)
        finding.measure = statistic
        finding.op = op
