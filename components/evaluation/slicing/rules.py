"""Per-slice blessing rules: pure functions over the metrics TFMA wrote.

TFMA computes every metric for every slice of the eval split, for the
candidate and (when one exists) the baseline model. Its thresholds cannot say
"only slices with at least N examples", and its failure records carry one
number (the value, or for a change threshold the difference), so the rules
are checked here on its output: each failure names the slice, its size, the
candidate's value and the number it was held against.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from components.evaluation.slice_buckets import bucket_feature

OVERALL = "overall"
EXAMPLE_COUNT = "example_count"
CANDIDATE = "candidate"
BASELINE = "baseline"


# Numeric feature -> bucket boundaries of the evaluation running in this process.
# Here, not in components/evaluation/extractors.py: TFX reloads that module (its
# `module_path`) before calling its extractors, which would reset it.
_active_buckets: dict[str, tuple[float, ...]] = {}


@contextlib.contextmanager
def bucketed(buckets: dict[str, tuple[float, ...]]) -> Iterator[None]:
    """Evaluations started inside slice these numeric features by bucket."""
    previous = dict(_active_buckets)
    _active_buckets.clear()
    _active_buckets.update({k: tuple(v) for k, v in buckets.items()})
    try:
        yield
    finally:
        _active_buckets.clear()
        _active_buckets.update(previous)


def active_buckets() -> dict[str, tuple[float, ...]]:
    return dict(_active_buckets)


def metric_name(class_name: str) -> str:
    """TFMA's metric key name of a metric class: BinaryAccuracy -> binary_accuracy, AUC -> auc."""
    return re.sub(r"(?<!^)(?=[A-Z][a-z])", "_", class_name).lower()


@dataclass(frozen=True)
class SliceRules:
    """What the Evaluator's blessing asks of each slice (from the dataset file's `slicing:`)."""

    metric: str = "binary_accuracy"
    # The metric's direction: accuracy-like (True) or error-like (False).
    higher_is_better: bool = True
    # Slicing: feature names per slicing (several = crossed); bucketed features by boundaries.
    by: tuple[tuple[str, ...], ...] = ()
    buckets: dict[str, tuple[float, ...]] = field(default_factory=dict)
    min_examples: int = 1
    lower_bound: float | None = None
    upper_bound: float | None = None
    max_drop: float | None = None

    def to_json(self) -> str:
        data = asdict(self)
        data["by"] = [list(s) for s in self.by]
        data["buckets"] = {k: list(v) for k, v in self.buckets.items()}
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> SliceRules:
        if not text:
            return cls()
        data = json.loads(text)
        data["by"] = tuple(tuple(s) for s in data.get("by", ()))
        data["buckets"] = {k: tuple(v) for k, v in data.get("buckets", {}).items()}
        return cls(**data)

    def slice_features(self, names: tuple[str, ...]) -> list[str]:
        """The features a slicing reads from each example (bucketed ones by their bucket)."""
        return [bucket_feature(n) if n in self.buckets else n for n in names]

    @property
    def judges_slices(self) -> bool:
        return any(b is not None for b in (self.lower_bound, self.upper_bound, self.max_drop))


@dataclass(frozen=True)
class SliceFailure:
    """One slice that keeps a model from being blessed."""

    slice: str
    examples: int
    metric: str
    value: float
    # "floor", "ceiling" or "baseline"
    rule: str
    against: float
    allowed_drop: float | None = None

    def message(self) -> str:
        where = f"slice {self.slice} ({self.examples} examples)"
        if self.rule == "floor":
            return (
                f"{where}: {self.metric} {self.value:.4f} is below the slice floor {self.against:g}"
            )
        if self.rule == "ceiling":
            return f"{where}: {self.metric} {self.value:.4f} is above the slice ceiling {self.against:g}"
        drop = abs(self.value - self.against)
        return (
            f"{where}: {self.metric} {self.value:.4f} against the baseline's {self.against:.4f}, "
            f"worse by {drop:.4f} (allowed: {self.allowed_drop:g})"
        )


def slice_name(slice_key: tuple[tuple[str, Any], ...]) -> str:
    """ "payment_type=Cash, trip_miles_bucket=1-3", or "overall" for the whole split."""
    if not slice_key:
        return OVERALL
    parts = []
    for column, value in slice_key:
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        parts.append(f"{column}={value}")
    return ", ".join(parts)


# slice name -> model name ("candidate", "baseline", or "" alone) -> metric -> value
SliceMetrics = dict[str, dict[str, dict[str, float]]]


def _candidate(models: dict[str, dict[str, float]]) -> dict[str, float]:
    return models.get(CANDIDATE) or models.get("") or {}


def check_slices(
    metrics: SliceMetrics, rules: SliceRules, *, has_baseline: bool
) -> list[SliceFailure]:
    """Failures of every slice (not the whole split) with at least `min_examples` examples."""
    failures: list[SliceFailure] = []
    if not rules.judges_slices:
        return failures
    for name in sorted(metrics):
        if name == OVERALL:
            continue
        candidate = _candidate(metrics[name])
        examples = int(candidate.get(EXAMPLE_COUNT, 0))
        value = candidate.get(rules.metric)
        if examples < rules.min_examples or value is None or math.isnan(value):
            continue
        common: dict[str, Any] = dict(
            slice=name, examples=examples, metric=rules.metric, value=value
        )
        if rules.lower_bound is not None and value < rules.lower_bound:
            failures.append(SliceFailure(**common, rule="floor", against=rules.lower_bound))
        if rules.upper_bound is not None and value > rules.upper_bound:
            failures.append(SliceFailure(**common, rule="ceiling", against=rules.upper_bound))
        baseline = metrics[name].get(BASELINE, {}).get(rules.metric)
        if has_baseline and rules.max_drop is not None and baseline is not None:
            drop = baseline - value if rules.higher_is_better else value - baseline
            if drop > rules.max_drop:
                failures.append(
                    SliceFailure(
                        **common, rule="baseline", against=baseline, allowed_drop=rules.max_drop
                    )
                )
    return failures
