"""The checks behind the validation gate: schema, drift between spans, training/serving skew.

Pure functions over TFDV statistics and a schema, so each is testable without
a pipeline. TFDV does the measuring (`validate_statistics` with drift and skew
comparators); this module decides which comparator each feature gets, runs the
three checks separately (TFDV reports drift and skew with the same anomaly
types, so one combined call could not tell them apart), and turns TFDV's
anomalies and `drift_skew_info` measurements into findings: feature, kind,
measured value, threshold, and whether it blocks or only warns.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml
from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2

SCHEMA, DRIFT, SKEW = "schema", "drift", "skew"
KINDS = (SCHEMA, DRIFT, SKEW)
TRAINING, SERVING = "TRAINING", "SERVING"
BLOCK, WARN, PASS = "BLOCK", "WARN", "PASS"
# Drift and skew are measured on the training split: the data the model learns from.
COMPARED_SPLIT = "train"

L_INFTY = "L-infinity"
JSD = "Jensen-Shannon"


class ValidationConfigError(ValueError):
    """The thresholds file is malformed; the message names the file and the entry."""


@dataclass(frozen=True)
class Thresholds:
    """Default thresholds per feature kind, and per-feature overrides (None = not compared)."""

    categorical: float = 0.1
    numeric: float = 0.15
    features: Mapping[str, float | None] = field(default_factory=dict)

    def for_feature(self, name: str, categorical: bool) -> float | None:
        if name in self.features:
            return self.features[name]
        return self.categorical if categorical else self.numeric


@dataclass(frozen=True)
class ValidationSettings:
    drift: Thresholds = Thresholds()
    skew: Thresholds = Thresholds()
    # Anomaly kinds (schema/drift/skew) or TFDV anomaly type names that only warn.
    warn_only: tuple[str, ...] = ()
    # Date and timestamp columns -> their format (the dataset file's), checked per span.
    date_formats: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        raw = asdict(self)
        if not raw["date_formats"]:  # datasets without dates keep their cache key
            del raw["date_formats"]
        return json.dumps(raw, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ValidationSettings:
        raw = json.loads(text)
        return cls(
            drift=Thresholds(**raw["drift"]),
            skew=Thresholds(**raw["skew"]),
            warn_only=tuple(raw.get("warn_only", ())),
            date_formats=dict(raw.get("date_formats") or {}),
        )

    def with_warn_only(self, kinds: Iterable[str]) -> ValidationSettings:
        merged = tuple(dict.fromkeys([*self.warn_only, *kinds]))
        check_warn_only(merged, "--warn-only")
        return ValidationSettings(self.drift, self.skew, merged, self.date_formats)


def check_warn_only(kinds: Sequence[str], where: str) -> None:
    known = set(KINDS) | set(anomalies_pb2.AnomalyInfo.Type.keys())
    # `kind:feature` (e.g. drift:height) downgrades one feature's findings of that kind.
    unknown = [k for k in kinds if k not in known and k.partition(":")[0] not in KINDS]
    unknown += [k for k in kinds if k.partition(":")[0] in KINDS and k.endswith(":")]
    if unknown:
        raise ValidationConfigError(
            f"{where}: unknown anomaly kind(s) {unknown}; use one of {list(KINDS)}, "
            "a TFDV anomaly type such as ENUM_TYPE_UNEXPECTED_STRING_VALUES, "
            "or kind:feature such as drift:height"
        )


def _number(value: Any, where: str) -> float | None:
    # YAML reads a bare `off` as False.
    if value is False or value is None or (isinstance(value, str) and value.lower() == "off"):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValidationConfigError(f"{where}: expected a number in [0, 1] or `off`, got {value!r}")
    return float(value)


def _thresholds(raw: Any, where: str) -> Thresholds:
    if raw is None:
        return Thresholds()
    if not isinstance(raw, dict):
        raise ValidationConfigError(f"{where}: expected a mapping, got {raw!r}")
    unknown = set(raw) - {"categorical", "numeric", "features"}
    if unknown:
        raise ValidationConfigError(f"{where}: unknown key(s) {sorted(unknown)}")
    default = Thresholds()
    features = raw.get("features") or {}
    if not isinstance(features, dict):
        raise ValidationConfigError(f"{where}.features: expected a mapping of feature: threshold")
    categorical = _number(raw.get("categorical", default.categorical), f"{where}.categorical")
    numeric = _number(raw.get("numeric", default.numeric), f"{where}.numeric")
    if categorical is None or numeric is None:
        raise ValidationConfigError(f"{where}: default thresholds cannot be `off`")
    return Thresholds(
        categorical=categorical,
        numeric=numeric,
        features={str(k): _number(v, f"{where}.features.{k}") for k, v in features.items()},
    )


def load_settings(path: str) -> ValidationSettings:
    """Reads a validation.yaml (see schema/taxi/validation.yaml)."""
    try:
        with open(path) as f:
            raw = yaml.safe_load(f) or {}
    except OSError as e:
        raise ValidationConfigError(f"cannot read thresholds file {path}: {e}") from e
    except yaml.YAMLError as e:
        raise ValidationConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(raw, dict):
        raise ValidationConfigError(f"{path}: expected a mapping with drift/skew/warn_only")
    unknown = set(raw) - {"drift", "skew", "warn_only"}
    if unknown:
        raise ValidationConfigError(f"{path}: unknown key(s) {sorted(unknown)}")
    warn_only = tuple(str(k) for k in (raw.get("warn_only") or ()))
    check_warn_only(warn_only, f"{path}: warn_only")
    return ValidationSettings(
        drift=_thresholds(raw.get("drift"), f"{path}: drift"),
        skew=_thresholds(raw.get("skew"), f"{path}: skew"),
        warn_only=warn_only,
    )


# ---------------------------------------------------------------------------
# Comparators


def is_categorical(feature: schema_pb2.Feature) -> bool:
    return feature.type == schema_pb2.BYTES or (
        feature.HasField("int_domain") and feature.int_domain.is_categorical
    )


def _set_comparator(comparator: schema_pb2.FeatureComparator, categorical: bool, t: float) -> None:
    comparator.Clear()
    if categorical:
        comparator.infinity_norm.threshold = t
    else:
        jsd = comparator.jensen_shannon_divergence
        jsd.threshold = t
        # Quantile histograms: the standard (equal-width) ones put nearly all
        # mass of a heavy-tailed feature (fare, trip_miles) into one bucket,
        # and two samples of the same data then measured up to 0.8.
        jsd.source.type = schema_pb2.HistogramSelection.QUANTILES


def with_comparators(schema: schema_pb2.Schema, settings: ValidationSettings) -> schema_pb2.Schema:
    """A copy of `schema` with drift and skew comparators from the thresholds."""
    out = copy.deepcopy(schema)
    for feature in out.feature:
        categorical = is_categorical(feature)
        for thresholds, comparator in (
            (settings.drift, feature.drift_comparator),
            (settings.skew, feature.skew_comparator),
        ):
            t = thresholds.for_feature(feature.name, categorical)
            if t is None:
                comparator.Clear()
            else:
                _set_comparator(comparator, categorical, t)
        if not feature.drift_comparator.ListFields():
            feature.ClearField("drift_comparator")
        if not feature.skew_comparator.ListFields():
            feature.ClearField("skew_comparator")
    return out


# ---------------------------------------------------------------------------
# Findings


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

    def message(self) -> str:
        """The gate's verdict as the run's error or warning text."""
        if self.decision == PASS:
            return "validation gate: passed (" + "; ".join(self.notes) + ")"
        head = (
            f"validation gate blocked the run: {len(self.blocking)} anomal"
            f"{'y' if len(self.blocking) == 1 else 'ies'}"
            if self.decision == BLOCK
            else f"validation gate: passed with {len(self.warnings)} warning(s)"
        )
        lines = [head, *("  " + f.line() for f in self.findings)]
        lines += ["  note: " + n for n in self.notes]
        if self.decision == BLOCK:
            kinds = sorted({f.kind for f in self.blocking})
            lines.append(
                "  Nothing downstream ran. Fix the data, or raise the threshold / add the kind to "
                "warn_only in the thresholds file (for one run: "
                + " ".join(f"`--warn-only {k}`" for k in kinds)
                + ") if the change is expected."
            )
        return "\n".join(lines)


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


def _measurements(anomalies: anomalies_pb2.Anomalies, kind: str) -> dict[str, list[Measurement]]:
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


def _findings(
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


def _measure_schema_finding(
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


def split_statistics(
    stats: statistics_pb2.DatasetFeatureStatisticsList, name: str
) -> statistics_pb2.DatasetFeatureStatisticsList:
    """The default slice of one dataset as a list (TFDV validates one dataset)."""
    out = statistics_pb2.DatasetFeatureStatisticsList()
    out.datasets.add().CopyFrom(stats.datasets[0])
    out.datasets[0].name = name
    return out


def _schema_findings(current, schema: schema_pb2.Schema, environment: str | None) -> list[Finding]:
    """1. Schema: every split of this span, one finding per feature and anomaly."""
    import tensorflow_data_validation as tfdv

    by_key: dict[tuple[str, str], Finding] = {}
    for split in sorted(current):
        anomalies = tfdv.validate_statistics(current[split], schema, environment=environment)
        for f in _findings(anomalies, SCHEMA, split, comparators_only=False):
            key = (f.feature, f.anomaly)
            if key in by_key:
                by_key[key].where += f", {split}"
            else:
                by_key[key] = f
    for f in by_key.values():
        _measure_schema_finding(f, schema, current)
    return list(by_key.values())


def _compared(compared, schema, environment, kind: str, where: str, **other):
    """Drift or skew: TFDV's comparator of `kind` against `other` statistics:
    (findings, measurements)."""
    import tensorflow_data_validation as tfdv

    anomalies = tfdv.validate_statistics(compared, schema, environment=environment, **other)
    measured = _measurements(anomalies, kind)
    findings = _findings(anomalies, kind, where, comparators_only=True, measured=measured)
    return findings, [m for ms in measured.values() for m in ms]


# A categorical (BYTES) cell longer than this is reported: a vocabulary entry of
# megabytes is a broken export (a whole file pasted into a cell, a lost quote),
# not a category, and it costs memory in every step that reads the examples.
LONG_CELL_CHARS = 64 * 1024
LONG_CELL = "STRING_CELL_TOO_LONG"


def long_cell_findings(
    longest: Mapping[str, int], where: str, limit: int = LONG_CELL_CHARS
) -> list[Finding]:
    """A warning per column whose longest cell (characters, from ExampleGen) exceeds `limit`."""
    return [
        Finding(
            SCHEMA,
            name,
            LONG_CELL,
            f"its longest cell has {n:,} characters; a categorical value that long is "
            "most likely a broken export (a missing quote, pasted content): check the file",
            measured=float(n),
            threshold=float(limit),
            measure="characters",
            where=where,
            severity=WARN,
        )
        for name, n in sorted(longest.items())
        if n > limit
    ]


def _declared_environments(schema: schema_pb2.Schema) -> tuple[str | None, str | None]:
    """(training, serving) environment names to validate in, None where undeclared."""
    # TFDV rejects an environment the schema does not declare; a schema without
    # environments validates every feature everywhere.
    environments = set(schema.default_environment)
    training = TRAINING if TRAINING in environments else None
    serving_env = SERVING if SERVING in environments else None
    return training, serving_env


def _drift(
    compared: statistics_pb2.DatasetFeatureStatisticsList,
    schema: schema_pb2.Schema,
    training: str | None,
    baseline: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList] | None,
    *,
    current_span: int | None,
    baseline_span: int | None,
) -> tuple[list[Finding], list[Measurement], str]:
    """Drift findings, measurements and the note saying what was compared (or why not)."""
    if not baseline:
        return (
            [],
            [],
            f"drift: no baseline: ML Metadata holds no statistics of a span before span "
            f"{current_span} (the first span, or earlier spans were only ingested); "
            "drift not checked",
        )
    previous = baseline.get(COMPARED_SPLIT) or next(iter(baseline.values()))
    # On Kubeflow the baseline is the previous run's statistics, span unknown.
    before = "the previous run's span" if baseline_span is None else f"span {baseline_span}"
    where = f"span {current_span} vs {before}, {COMPARED_SPLIT} split"
    found, measured = _compared(
        compared, schema, training, DRIFT, where, previous_statistics=previous
    )
    return found, measured, f"drift: span {current_span} compared with {before}"


def _skew(
    compared: statistics_pb2.DatasetFeatureStatisticsList,
    schema: schema_pb2.Schema,
    training: str | None,
    serving_env: str | None,
    serving: statistics_pb2.DatasetFeatureStatisticsList | None,
    *,
    serving_rows: int | None,
    serving_source: str,
    no_serving: str,
) -> tuple[list[Finding], list[Measurement], str]:
    """Skew findings (training vs serving, and serving vs the schema) and the note."""
    if serving is None:
        return [], [], f"skew: {no_serving}, skew not checked"
    where = f"{COMPARED_SPLIT} split vs {serving_source}"
    found, measured = _compared(compared, schema, training, SKEW, where, serving_statistics=serving)
    # The serving requests themselves against the schema, label excluded.
    import tensorflow_data_validation as tfdv

    anomalies = tfdv.validate_statistics(serving, schema, environment=serving_env)
    found = found + _findings(anomalies, SKEW, serving_source, comparators_only=False)
    return (
        found,
        measured,
        f"skew: training data compared with {serving_rows} serving requests, {serving_source}",
    )


def _downgrade_warn_only(findings: list[Finding], settings: ValidationSettings) -> None:
    """Turns the findings the config lists in warn_only (kind, anomaly or kind:feature) into warnings."""
    warn = set(settings.warn_only)
    for f in findings:
        if f.kind in warn or f.anomaly in warn or f"{f.kind}:{f.feature}" in warn:
            f.severity = WARN


def evaluate(
    current: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList],
    schema: schema_pb2.Schema,
    settings: ValidationSettings,
    *,
    baseline: Mapping[str, statistics_pb2.DatasetFeatureStatisticsList] | None = None,
    serving: statistics_pb2.DatasetFeatureStatisticsList | None = None,
    current_span: int | None = None,
    baseline_span: int | None = None,
    serving_rows: int | None = None,
    serving_source: str = "serving data",
    no_serving: str = "no serving data found",
    longest_cells: Mapping[str, int] | None = None,
    extra_findings: Sequence[Finding] = (),
) -> GateResult:
    """Runs the schema, drift and skew checks; returns every finding and the decision.

    `current` and `baseline` map split name -> statistics. Drift compares the
    `train` splits of this span and the previous one; skew compares this
    span's `train` split with the serving statistics (`no_serving` says why
    there are none, for the notes). `longest_cells` (BYTES column -> characters
    of its longest cell, recorded by ExampleGen) adds a warning per absurd cell.
    `extra_findings` (components/validation/table_checks.py) join the others.
    """
    schema = with_comparators(schema, settings)
    training, serving_env = _declared_environments(schema)
    findings = _schema_findings(current, schema, training)
    compared = current.get(COMPARED_SPLIT) or next(iter(current.values()))
    # 2. Drift: this span vs the previous one.
    found, measurements, note = _drift(
        compared, schema, training, baseline, current_span=current_span, baseline_span=baseline_span
    )
    findings += found
    notes = [note]
    # 3. Skew: training data vs serving requests (SERVING environment: no label).
    found, measured, note = _skew(
        compared,
        schema,
        training,
        serving_env,
        serving,
        serving_rows=serving_rows,
        serving_source=serving_source,
        no_serving=no_serving,
    )
    findings += found
    measurements += measured
    notes.append(note)
    findings += long_cell_findings(longest_cells or {}, f"span {current_span} raw CSV")
    findings += list(extra_findings)
    _downgrade_warn_only(findings, settings)
    decision = BLOCK if any(f.severity == BLOCK for f in findings) else (WARN if findings else PASS)
    return GateResult(
        decision,
        findings,
        sorted(measurements, key=lambda m: (m.kind, m.feature)),
        notes,
        current_span=current_span,
        baseline_span=baseline_span,
        serving_rows=serving_rows,
    )
