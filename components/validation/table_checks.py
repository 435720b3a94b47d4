"""Gate findings about table treatments, from the statistics the gate already reads.

- A date or timestamp column (the dataset file's `format:`) whose most frequent
  values in this span no longer parse in that format: the export changed its
  date format (e.g. ISO to day/month/year) and the transform would read every
  value as missing. A schema finding: it blocks.
- A column that is an id in the training data (a different value in at least
  half of the rows) but one value in every serving request: the serving export
  fills it with a constant (a placeholder, a broken join). A skew warning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tensorflow_metadata.proto.v0 import statistics_pb2

from components.validation.findings import BLOCK, SCHEMA, SKEW, WARN, Finding

DATE_FORMAT_CHANGED = "DATE_FORMAT_CHANGED"
ID_CONSTANT_AT_SERVING = "ID_CONSTANT_AT_SERVING"
# Of the top values (by frequency), at least this share must parse.
FORMAT_SHARE = 0.95
ID_SHARE = 0.5
ID_MIN_ROWS = 20

_ISO = re.compile(
    r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.,][0-9]+)?)?)?"
    r"\s*(Z|[+-][0-9]{2}:?[0-9]{2})?\s*$"
)
_DAY_MONTH = re.compile(
    r"^\s*([0-9]{1,2})[/.-]([0-9]{1,2})[/.-][0-9]{4}(\s+[0-9]{1,2}:[0-9]{2}(:[0-9]{2})?)?\s*$"
)


def parses(value: str, fmt: str) -> bool:
    """Whether `value` is written in date format `fmt` (iso, dmy, mdy, unix_seconds)."""
    if fmt == "iso":
        return bool(_ISO.match(value))
    if fmt == "unix_seconds":
        return bool(re.match(r"^\s*[+-]?[0-9]+(\.[0-9]*)?\s*$", value))
    m = _DAY_MONTH.match(value)
    if not m:
        return False
    day, month = (int(m.group(1)), int(m.group(2)))
    if fmt == "mdy":
        day, month = month, day
    return 1 <= month <= 12 and 1 <= day <= 31


def _features(stats: statistics_pb2.DatasetFeatureStatisticsList):
    dataset = stats.datasets[0] if stats.datasets else statistics_pb2.DatasetFeatureStatistics()
    for feature in dataset.features:
        name = feature.path.step[-1] if feature.path.step else feature.name
        yield name, feature, dataset.num_examples


def date_format_findings(
    current: statistics_pb2.DatasetFeatureStatisticsList,
    formats: Mapping[str, str],
    where: str,
) -> list[Finding]:
    """A blocking finding per date column whose frequent values do not parse as its format."""
    found = []
    for name, feature, _ in _features(current):
        fmt = formats.get(name)
        if not fmt or not feature.HasField("string_stats"):
            continue
        top = [(v.value, v.frequency) for v in feature.string_stats.top_values]
        total = sum(freq for _, freq in top)
        if not total:
            continue
        bad = [(v, freq) for v, freq in top if not parses(v, fmt)]
        share = 1 - sum(freq for _, freq in bad) / total
        if share < FORMAT_SHARE:
            found.append(
                Finding(
                    SCHEMA,
                    name,
                    DATE_FORMAT_CHANGED,
                    f"the dataset file reads it as {fmt} dates, but {1 - share:.0%} of its most "
                    f"frequent values are not (e.g. {bad[0][0]!r}): the date format changed; "
                    "fix the export or the feature's `format:`",
                    measured=share,
                    threshold=FORMAT_SHARE,
                    measure="share parsed",
                    where=where,
                    severity=BLOCK,
                    op="<",
                )
            )
    return found


def _unique(feature) -> int | None:
    if feature.HasField("string_stats"):
        return feature.string_stats.unique
    return None


def constant_id_findings(
    training: statistics_pb2.DatasetFeatureStatisticsList,
    serving: statistics_pb2.DatasetFeatureStatisticsList,
    where: str,
) -> list[Finding]:
    """A warning per column that is an id in training and one value in every request."""
    at_serving = {name: (f, n) for name, f, n in _features(serving)}
    found = []
    for name, feature, rows in _features(training):
        unique = _unique(feature)
        if unique is None or rows < ID_MIN_ROWS or unique < ID_SHARE * rows:
            continue
        served, requests = at_serving.get(name, (None, 0))
        if served is not None and requests >= 2 and _unique(served) == 1:
            found.append(
                Finding(
                    SKEW,
                    name,
                    ID_CONSTANT_AT_SERVING,
                    f"an id in the training data ({unique} distinct values in {rows} rows) but "
                    f"one value in all {requests} serving requests: check the serving export",
                    where=where,
                    severity=WARN,
                )
            )
    return found
