"""The checks behind the validation gate: schema, drift between spans, training/serving skew.

Pure functions over TFDV statistics and a schema, so each is testable without
a pipeline. TFDV does the measuring (`validate_statistics` with drift and skew
comparators); this module decides which comparator each feature gets, runs the
three checks separately (TFDV reports drift and skew with the same anomaly
types, so one combined call could not tell them apart), and decides the gate's
verdict. The findings and how TFDV's anomalies become findings are in
findings.py (import them from there), the thresholds file in settings.py.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias

from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from components.validation.findings import (
    BLOCK,
    COMPARED_SPLIT,
    DRIFT,
    PASS,
    SCHEMA,
    SERVING,
    SKEW,
    TRAINING,
    WARN,
    Finding,
    GateResult,
    Measurement,
    findings_of,
    measure_schema_finding,
    measurements_of,
)
from components.validation.settings import ValidationSettings

Stats: TypeAlias = statistics_pb2.DatasetFeatureStatisticsList

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
        if feature.type == schema_pb2.STRUCT:
            # A SequenceExample's feature lists: each step's values are compared like a
            # feature's (the thresholds file names them by their column name).
            for child in feature.struct_domain.feature:
                _set_comparators(child, settings)
        else:
            _set_comparators(feature, settings)
    return out


def _set_comparators(feature: schema_pb2.Feature, settings: ValidationSettings) -> None:
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
        for f in findings_of(anomalies, SCHEMA, split, comparators_only=False):
            key = (f.feature, f.anomaly)
            if key in by_key:
                by_key[key].where += f", {split}"
            else:
                by_key[key] = f
    for f in by_key.values():
        measure_schema_finding(f, schema, current)
    return list(by_key.values())


def _compared(compared, schema, environment, kind: str, where: str, **other):
    """Drift or skew: TFDV's comparator of `kind` against `other` statistics:
    (findings, measurements)."""
    import tensorflow_data_validation as tfdv

    anomalies = tfdv.validate_statistics(compared, schema, environment=environment, **other)
    measured = measurements_of(anomalies, kind)
    findings = findings_of(anomalies, kind, where, comparators_only=True, measured=measured)
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
    found = found + findings_of(anomalies, SKEW, serving_source, comparators_only=False)
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
    skew_view: Callable[[Stats, schema_pb2.Schema], tuple[Stats, schema_pb2.Schema]] | None = None,
) -> GateResult:
    """Runs the schema, drift and skew checks; returns every finding and the decision.

    `current` and `baseline` map split name -> statistics. Drift compares the
    `train` splits of this span and the previous one; skew compares this
    span's `train` split with the serving statistics (`no_serving` says why
    there are none, for the notes). `longest_cells` (BYTES column -> characters
    of its longest cell, recorded by ExampleGen) adds a warning per absurd cell.
    `extra_findings` (components/validation/table_checks.py) join the others.
    `skew_view` shows training statistics and schema as a request log written
    under a `request_log:` policy holds them (components/validation/hashed_columns.py).
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
    skew_compared, skew_schema = (
        skew_view(compared, schema) if skew_view and serving is not None else (compared, schema)
    )
    found, measured, note = _skew(
        skew_compared,
        skew_schema,
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
