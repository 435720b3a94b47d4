"""Gate checks for sequence datasets (SequenceExamples), from StatisticsGen's statistics.

TFDV computes statistics of a SequenceExample's feature lists under the STRUCT
feature `##SEQUENCE##`: each child (`##SEQUENCE##.amount`) holds the statistics of
every step's values, and its outer value counts are the sequences' lengths (steps
per sequence). The per-step values get TFDV's drift and skew comparators
like any feature (checks.with_comparators gives the children theirs); the length
is checked here, as a feature of its own named `sequence.length`:

- SEQUENCE_SHORTENED (blocks): the mean length fell below `shrink_ratio` (0.7 by
  default, the thresholds file's `sequences.shrink_ratio`) of the previous span's
  (drift), or of the served requests' (skew): a tracker that stopped sending late
  events, or a session cut early, leaves the model without what it learned from.
- SEQUENCE_LENGTHENED (warns): the mean length grew past 1 / shrink_ratio times.
  Longer sequences are cut to max_length, keeping their last events.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorflow_metadata.proto.v0 import statistics_pb2

from components.validation.findings import BLOCK, COMPARED_SPLIT, DRIFT, SKEW, WARN, Finding

SEQUENCE_STRUCT = "##SEQUENCE##"
LENGTH_FEATURE = "sequence.length"
SHORTENED = "SEQUENCE_SHORTENED"
LENGTHENED = "SEQUENCE_LENGTHENED"
SHRINK_RATIO = 0.7
RATIO = "mean length ratio"


@dataclass(frozen=True)
class LengthSummary:
    sequences: int
    mean: float
    min: int
    max: int

    def describe(self) -> str:
        return f"mean {self.mean:.1f} steps ({self.min} to {self.max}, {self.sequences} sequences)"


def _common(feature: statistics_pb2.FeatureNameStatistics):
    stats = getattr(feature, feature.WhichOneof("stats") or "num_stats")
    return stats.common_stats


def length_summary(stats: statistics_pb2.DatasetFeatureStatisticsList) -> LengthSummary | None:
    """The sequences' lengths in the first dataset of `stats`, or None without feature lists.

    A feature list's outer value counts are its steps per sequence; every feature list
    of a sequence has one step per event, so the longest-read one stands for all."""
    if not stats.datasets:
        return None
    lists = [
        _common(f)
        for f in stats.datasets[0].features
        if len(f.path.step) == 2 and f.path.step[0] == SEQUENCE_STRUCT
    ]
    lists = [c for c in lists if c.num_non_missing]
    if not lists:
        return None
    common = max(lists, key=lambda c: (c.num_non_missing, c.avg_num_values))
    return LengthSummary(
        int(common.num_non_missing),
        float(common.avg_num_values),
        int(common.min_num_values),
        int(common.max_num_values),
    )


def length_findings(
    current: LengthSummary | None,
    other: LengthSummary | None,
    kind: str,
    where: str,
    shrink_ratio: float = SHRINK_RATIO,
) -> list[Finding]:
    """SEQUENCE_SHORTENED / SEQUENCE_LENGTHENED of `current` against `other` (the previous
    span's for drift, the served requests' for skew)."""
    if current is None or other is None or other.mean <= 0:
        return []
    ratio = current.mean / other.mean
    said = f"this data {current.describe()}; the other {other.describe()}"
    if ratio < shrink_ratio:
        return [
            Finding(
                kind,
                LENGTH_FEATURE,
                SHORTENED,
                f"sequences shortened: {said}",
                ratio,
                shrink_ratio,
                RATIO,
                where,
                BLOCK,
                "<",
            )
        ]
    if ratio > 1 / shrink_ratio:
        return [
            Finding(
                kind,
                LENGTH_FEATURE,
                LENGTHENED,
                f"sequences lengthened: {said}",
                ratio,
                1 / shrink_ratio,
                RATIO,
                where,
                WARN,
            )
        ]
    return []


def gate_findings(
    current: dict[str, statistics_pb2.DatasetFeatureStatisticsList],
    baseline: dict[str, statistics_pb2.DatasetFeatureStatisticsList] | None,
    serving: statistics_pb2.DatasetFeatureStatisticsList | None,
    *,
    current_span: int | None,
    baseline_span: int | None,
    serving_source: str,
    shrink_ratio: float = SHRINK_RATIO,
) -> tuple[list[Finding], list[str]]:
    """(findings, notes) of the length checks; nothing for data without feature lists."""
    compared = current.get(COMPARED_SPLIT) or next(iter(current.values()), None)
    now = length_summary(compared) if compared is not None else None
    if now is None:
        return [], []
    notes = [f"sequence lengths (span {current_span}, {COMPARED_SPLIT}): {now.describe()}"]
    found: list[Finding] = []
    if baseline:
        before = baseline.get(COMPARED_SPLIT) or next(iter(baseline.values()))
        where = f"span {current_span} vs span {baseline_span}, {COMPARED_SPLIT} split"
        found += length_findings(now, length_summary(before), DRIFT, where, shrink_ratio)
    if serving is not None:
        served = length_summary(serving)
        where = f"{COMPARED_SPLIT} split vs {serving_source}"
        # Served requests vs training: shorter requests than the model learned from.
        found += length_findings(served, now, SKEW, where, shrink_ratio)
    return found, notes
