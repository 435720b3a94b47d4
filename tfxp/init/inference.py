"""What `tfxp init` reads from a table's values beyond numbers and categories.

- Rows without a usable label (blank, or text in a numeric label) are dropped
  and counted, the rule ExampleGen applies on every run
  (components/example_gen/labels.py).
- Dates and timestamps: ISO dates and date-times (with or without a zone),
  d/m/yyyy or m/d/yyyy when the values decide which, and Unix seconds in a
  column whose name says so (`unix`, `epoch`, `timestamp`, `..._ts`).
- Ids: strings with a different value in at least half the rows, or values that
  look like keys (UUIDs, e-mail addresses, letters-and-digits codes): excluded,
  with the reason.
- Free text: strings of many words, tokenized by the transform.
- Imbalance: the rarest class under 10% of the rows gets class weights.
Pure Python and pyarrow, on the column's values; nothing here writes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Of the values present, at least this share must parse as dates for a date column
# (the others become missing, with the indicator set).
DATE_SHARE = 0.95
# Distinct strings in at least this share of the rows (from 20 rows on): an id.
ID_DISTINCT_SHARE = 0.5
ID_MIN_ROWS = 20
# Values matching a key pattern in at least this share of the rows: an id.
KEY_SHARE = 0.9
# Free text: on average at least this many words per value, and many distinct values.
TEXT_MIN_WORDS = 5.0
# The rarest class below this share of the rows: imbalanced.
IMBALANCE_SHARE = 0.10
# Balanced accuracy (the mean of the classes' recall) a model of an imbalanced label
# must reach: predicting the majority class scores 1/classes however rare the others
# are, and a model must close at least this share of the gap from there to 1
# (binary: 0.55).
BALANCED_ACCURACY_MARGIN = 0.1
# A numeric label may hold a few values that are not numbers (dropped as unparseable).
LABEL_NUMBER_SHARE = 0.95

_ISO_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_ISO_TIME = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.,][0-9]+)?)?"
    r"\s*(Z|[+-][0-9]{2}:?[0-9]{2})?$"
)
_DAY_MONTH = re.compile(
    r"^([0-9]{1,2})[/.-]([0-9]{1,2})[/.-]([0-9]{4})(\s+[0-9]{1,2}:[0-9]{2}(:[0-9]{2})?)?$"
)
_UNIX_NAME = re.compile(r"(unix|epoch|timestamp|(^|_)ts$|_ts_|seconds_since)", re.IGNORECASE)
_KEYS = {
    "UUIDs": re.compile(
        r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
    ),
    "e-mail addresses": re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$"),
    "codes of letters and digits": re.compile(r"^[A-Za-z]{0,6}[-_#]?[0-9]{3,}[A-Za-z]{0,3}$"),
    "hexadecimal keys": re.compile(r"^(0x)?[0-9a-fA-F]{16,}$"),
}
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class DateFormat:
    treatment: str  # date or timestamp
    format: str  # iso, dmy, mdy, unix_seconds
    note: str


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def label_rows(values: Sequence[str | None]) -> tuple[list[bool], int, int]:
    """Which rows have a usable label: (mask, blank rows, unparseable rows).

    A label whose values are nearly all numbers is numeric: its few other values
    ("n/a", "?") do not parse and their rows go with the blank ones.
    """
    present = [v.strip() for v in values if v is not None and v.strip()]
    numbers = sum(_is_number(v) for v in present)
    numeric = bool(present) and numbers >= LABEL_NUMBER_SHARE * len(present)
    mask, blank, bad = [], 0, 0
    for v in values:
        if v is None or not v.strip():
            blank += 1
            mask.append(False)
        elif numeric and not _finite_number(v):
            bad += 1
            mask.append(False)
        else:
            mask.append(True)
    return mask, blank, bad


def _finite_number(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return value == value and abs(value) != float("inf")


def date_format(name: str, values: Sequence[str], kind: str) -> DateFormat | None:
    """The date or timestamp format of a column's present (trimmed) values, or None."""
    if not values:
        return None
    if kind in ("INT", "FLOAT"):
        numbers = [float(v) for v in values]
        # 1973 to 2103: small numbers in a "timestamp_hour" column are not Unix seconds.
        if _UNIX_NAME.search(name) and all(1e8 <= x < 4.2e9 for x in numbers):
            return DateFormat("timestamp", "unix_seconds", "Unix seconds (from its name)")
        return None
    need = DATE_SHARE * len(values)
    iso_dates = sum(bool(_ISO_DATE.match(v)) for v in values)
    iso_times = sum(bool(_ISO_TIME.match(v)) for v in values)
    if iso_dates >= need:
        return DateFormat("date", "iso", "ISO dates")
    if iso_dates + iso_times >= need and iso_times:
        return DateFormat("timestamp", "iso", "ISO date-times")
    return _day_month(values, need)


def _day_month(values: Sequence[str], need: float) -> DateFormat | None:
    found = [m for m in map(_DAY_MONTH.match, values) if m]
    if len(found) < need:
        return None
    first = [int(m.group(1)) for m in found]
    second = [int(m.group(2)) for m in found]
    timed = any(m.group(4) for m in found)
    treatment = "timestamp" if timed else "date"
    if max(first) > 12 and max(second) <= 12:
        return DateFormat(treatment, "dmy", "day/month/year (a first field above 12)")
    if max(second) > 12 and max(first) <= 12:
        return DateFormat(treatment, "mdy", "month/day/year (a second field above 12)")
    return None  # ambiguous (or neither): left as it is; the user may set the format


def ambiguous_day_month(values: Sequence[str]) -> bool:
    """Values that are all d/m/yyyy or m/d/yyyy with no field above 12: cannot tell."""
    found = [m for m in map(_DAY_MONTH.match, values) if m]
    return bool(found) and len(found) >= DATE_SHARE * len(values)


def key_reason(values: Sequence[str], distinct: int) -> str | None:
    """Why a string column's values look like keys (UUIDs, e-mail addresses, codes), or None."""
    for what, pattern in _KEYS.items():
        hits = sum(bool(pattern.match(v)) for v in values)
        if values and hits >= KEY_SHARE * len(values) and distinct > 1:
            return f"values look like {what} (an id)"
    return None


def id_reason(values: Sequence[str], distinct: int, rows: int) -> str | None:
    """Why a string column looks like an id (the model cannot generalise from it), or None."""
    if not values:
        return None
    reason = key_reason(values, distinct)
    if reason:
        return reason
    if rows >= ID_MIN_ROWS and distinct >= ID_DISTINCT_SHARE * rows:
        return f"{distinct} distinct values in {rows} rows ({distinct / rows:.0%}): an id?"
    return None


def is_text(values: Sequence[str], distinct: int) -> bool:
    """Free text: many words per value, and values that rarely repeat."""
    if not values or distinct < 0.2 * len(values):
        return False
    words = sum(len(_WORD.findall(v)) for v in values) / len(values)
    return words >= TEXT_MIN_WORDS


def class_weights(counts: dict[str, int]) -> dict[str, float] | None:
    """Balanced class weights (rows / (classes x class rows)) when the rarest class is
    under IMBALANCE_SHARE of the rows; None for a balanced enough label."""
    total = sum(counts.values())
    if not total or min(counts.values()) >= IMBALANCE_SHARE * total:
        return None
    k = len(counts)
    return {c: round(total / (k * n), 4) for c, n in counts.items()}


def table_treatment(col, rows: int) -> bool:
    """Sets a date, timestamp or text treatment on `col` (tfxp.init.profile.Column), or
    excludes an id; False if none applies."""
    found = date_format(col.name, col.values, col.kind)
    if found:
        col.treatment, col.format, col.note = found.treatment, found.format, found.note
        return True
    if col.kind != "BYTES":
        return False
    # Keys first: a UUID splits into five "words", free text it is not.
    reason = key_reason(col.values, col.distinct)
    if reason:
        col.treatment, col.note = "excluded", reason
        return True
    if is_text(col.values, col.distinct):
        col.treatment, col.note = "text", "free text: words -> ids, embedded and averaged"
        return True
    reason = id_reason(col.values, col.distinct, rows - col.missing)
    if reason:
        col.treatment, col.note = "excluded", reason
        return True
    if ambiguous_day_month(col.values):
        col.note = "d/m/yyyy or m/d/yyyy? set `treatment: date, format: dmy` (or mdy)"
    return False


def drop_unlabelled(table, source: str, keep: bool):
    """(the rows with a usable label, blank labels, unparseable labels); all rows if `keep`."""
    import pyarrow as pa

    if keep:
        return table, 0, 0
    mask, blank, bad = label_rows(table.column(source).to_pylist())
    return (table.filter(pa.array(mask)) if blank or bad else table), blank, bad


def table_option_lines(inferred, yaml_str) -> list[str]:
    """`unlabelled_rows:` and, for an imbalanced label, `class_weights:`."""
    dropped = inferred.unlabelled_blank + inferred.unlabelled_bad
    lines = [
        "",
        "# Rows whose label is blank or does not parse: drop (ExampleGen leaves them out and",
        f"# counts them; init dropped {dropped}) or keep.",
        f"unlabelled_rows: {'keep' if inferred.keep_unlabelled else 'drop'}",
    ]
    if inferred.class_weights:
        weights = ", ".join(f"{yaml_str(c)}: {w}" for c, w in inferred.class_weights.items())
        lines += [
            "# The rarest class is under 10% of the rows: each class's loss is weighted by",
            "# rows / (classes x its rows), so the model does not just predict the majority.",
        ]
        lines.append(f"class_weights: {{{weights}}}")
    return lines


def summary_lines(inferred) -> list[str]:
    """What init says about dropped rows and an imbalanced label."""
    lines: list[str] = []
    dropped = inferred.unlabelled_blank + inferred.unlabelled_bad
    if dropped:
        bad = f", not a number in {inferred.unlabelled_bad}" if inferred.unlabelled_bad else ""
        lines.append(
            f"dropped {dropped} row(s) without a usable label (blank in "
            f"{inferred.unlabelled_blank}{bad}); ExampleGen drops such rows on every run "
            "(unlabelled_rows: drop)",
        )
    if inferred.class_weights:
        lines.append(
            f"imbalanced label: the rarest class is under 10% of rows; class weights "
            f"{inferred.class_weights} written to dataset.yaml, blessed on balanced "
            "accuracy, each class's recall reported",
        )
    return lines


def balanced_accuracy_floor(classes: int) -> float:
    """The lower bound on balanced accuracy for a label of `classes` classes."""
    chance = 1 / classes
    return round(chance + BALANCED_ACCURACY_MARGIN * (1 - chance), 3)


def imbalanced_evaluation_lines(inferred, classes: int) -> list[str]:
    """The blessing of an imbalanced label: balanced accuracy, not accuracy (binary:
    TFMA's BalancedAccuracy; multiclass: Recall macro-averaged over the classes,
    pipeline/eval_config.py)."""
    extra = "[AUC]" if inferred.task == "binary" else "[SparseCategoricalAccuracy]"
    return [
        f"  # The most frequent class is {inferred.majority:.1%} of rows: accuracy would bless",
        "  # a model that never predicts a rare class. Balanced accuracy (the mean of the",
        f"  # {classes} classes' recall) of that model is {1 / classes:.3g}: a model must do better.",
        "  metric: BalancedAccuracy",
        f"  lower_bound: {balanced_accuracy_floor(classes)}",
        f"  extra_metrics: {extra}",
        "  per_class: true  # each class's recall and precision-recall AUC",
    ]


# Column names that say a value identifies a person (or an account of one).
_PERSONAL_NAME = re.compile(
    r"(^|_)(name|first_?name|last_?name|full_?name|surname|email|e_?mail|phone|mobile|ssn|"
    r"passport|address|street|customer|client|user|patient|account|iban|card_?number)(_|$)",
    re.IGNORECASE,
)


def personal_columns(columns) -> list[tuple[str, str]]:
    """(name, why) of the columns `tfxp init` proposes to hash in the request log:
    those it excluded as ids, and those whose name says they name a person."""
    found = []
    for col in columns:
        if col.treatment == "excluded" and "id" in (col.note or ""):
            found.append((col.name, "an id"))
        elif _PERSONAL_NAME.search(col.name):
            found.append((col.name, "its name says it identifies a person"))
    return found


def request_log_lines(columns, q) -> list[str]:
    """The dataset file's `request_log:` block when some columns look personal."""
    found = personal_columns(columns)
    if not found:
        return []
    return [
        "",
        "# What `tfxp serve` logs and `tfxp infer` echoes of these columns: keyed hashes",
        "# (HMAC-SHA256), never the values. The key comes from $TFXP_LOG_HASH_KEY (e.g.",
        "# `export TFXP_LOG_HASH_KEY=$(openssl rand -hex 32)`, kept out of the repository);",
        "# `tfxp serve` refuses to start without it. drop: [...] never logs a column.",
        "request_log:",
        "  hash:",
        *[f"    - {q(name)}  # {why}" for name, why in found],
    ]
