"""The dataset file's table vocabulary: treatments for dates, free text and what to do
with rows without a label or with rare classes.

pipeline/datasets.py reads the dataset file; the keys and treatments below are
checked here, each message naming the file and the key:

  features:
    sold:  {treatment: date, format: iso}        # iso | dmy | mdy
    seen:  {treatment: timestamp, format: iso}   # iso | dmy | mdy | unix_seconds
    notes: {treatment: text, max_tokens: 32, top_k: 5000}
  unlabelled_rows: drop        # drop (default) | keep
  class_weights: {yes: 4.5, no: 0.56}
"""

from __future__ import annotations

from typing import Any

# Treatments beside zscore, bucketize and vocabulary (trainer/tabular/treatments.py).
TABLE_TREATMENTS = ("date", "timestamp", "text")
# Date formats: ISO 8601 (a date, or a date and time with or without a zone),
# day/month/year, month/day/year, and seconds since 1970 (timestamps only).
DATE_FORMATS = ("iso", "dmy", "mdy")
TIMESTAMP_FORMATS = (*DATE_FORMATS, "unix_seconds")
FEATURE_KEYS = {"format", "max_tokens"}
DEFAULT_MAX_TOKENS = 32
UNLABELLED_ROWS = ("drop", "keep")
TOP_KEYS = {"unlabelled_rows", "class_weights"}


class TableOptionError(ValueError):
    """A table key or treatment with a wrong value; the message names the key."""


def check_feature(name: str, spec: dict[str, Any], where: str) -> None:
    """The table-specific keys of one feature's spec (`format`, `max_tokens`)."""
    treatment = spec.get("treatment")
    fmt = spec.get("format")
    if treatment in ("date", "timestamp"):
        allowed = DATE_FORMATS if treatment == "date" else TIMESTAMP_FORMATS
        if fmt not in allowed:
            raise TableOptionError(
                f"{where}: features.{name}.format: a {treatment} needs one of {list(allowed)}, "
                f"not {fmt!r}"
            )
    elif fmt is not None:
        raise TableOptionError(
            f"{where}: features.{name}.format: only a date or timestamp has a format"
        )
    tokens = spec.get("max_tokens")
    if tokens is not None:
        if treatment != "text":
            raise TableOptionError(
                f"{where}: features.{name}.max_tokens: only a text feature has tokens"
            )
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= 1024:
            raise TableOptionError(
                f"{where}: features.{name}.max_tokens: a whole number from 1 to 1024, "
                f"not {tokens!r}"
            )
    for key in ("top_k", "oov_buckets", "buckets"):
        value = spec.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TableOptionError(f"{where}: features.{name}.{key}: a whole number, not {value!r}")


def unlabelled_rows(raw: dict[str, Any], where: str) -> str:
    value = raw.get("unlabelled_rows", "drop")
    if value not in UNLABELLED_ROWS:
        raise TableOptionError(
            f"{where}: unlabelled_rows must be one of {list(UNLABELLED_ROWS)}, not {value!r}"
        )
    return str(value)


def class_weights(
    raw: dict[str, Any], where: str, task: str, classes: tuple[str, ...]
) -> dict[str, float]:
    """`class_weights:` maps every class to a positive weight (a classifier only)."""
    weights = raw.get("class_weights")
    if weights is None:
        return {}
    if task == "regression":
        raise TableOptionError(f"{where}: class_weights: a regression label has no classes")
    if not isinstance(weights, dict):
        raise TableOptionError(f"{where}: class_weights: maps each class to its weight")
    parsed = {str(k): v for k, v in weights.items()}
    unknown = sorted(set(parsed) - set(classes))
    missing = sorted(set(classes) - set(parsed))
    if unknown or missing:
        raise TableOptionError(
            f"{where}: class_weights: name each class of {list(classes)} once "
            f"(unknown: {unknown}, missing: {missing})"
        )
    for cls, w in parsed.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0:
            raise TableOptionError(f"{where}: class_weights.{cls}: a positive number, not {w!r}")
    return {c: float(parsed[c]) for c in classes}
