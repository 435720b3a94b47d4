"""Live traffic per model version, counted from the request log (the console's serving page).

Requests per version, label and role (served or shadow) over recent windows
ending now, by each record's `__logged_at`. Only files opened within the
longest window (plus an hour: a file is opened before its last record) are read.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from components.validation import serving_log as sl
from tfxp.monitor.serving_series import LOGGED, Point, Swap

if TYPE_CHECKING:
    import pyarrow as pa

WINDOWS = (("5 min", 300), ("1 h", 3600), ("24 h", 86400))
# A log file is rotated by size and time; one opened this long before a window
# can still hold records inside it.
FILE_SLACK = dt.timedelta(hours=1)


# Published log files never change: each one's metadata is decoded once per
# process (the console reloads the page), the oldest entries dropped past the cap.
_CACHE: dict[tuple[str, int], pa.Table] = {}
CACHE_FILES = 512


def _metadata(files: list[sl.LogFile]) -> pa.Table:
    import pyarrow as pa

    columns = [sl.VERSION, sl.LABEL, sl.ROLE, sl.LOGGED_AT, sl.MODEL, sl.REQUEST_ID]
    tables = []
    for f in files:
        key = (f.path, f.size)
        if key not in _CACHE:
            _CACHE[key] = sl.read_metadata([f]).select(columns)
            while len(_CACHE) > CACHE_FILES:
                _CACHE.pop(next(iter(_CACHE)))
        tables.append(_CACHE[key])
    return pa.concat_tables(tables, promote=True)


@dataclass
class TrafficRow:
    version: int | None
    label: str | None
    role: str
    counts: list[int]  # per WINDOWS entry
    last_logged: dt.datetime | None


@dataclass
class Traffic:
    folder: str
    now: dt.datetime
    windows: tuple[str, ...]
    files_read: int
    files_published: int
    rows: list[TrafficRow] = field(default_factory=list)

    @property
    def total(self) -> list[int]:
        return [sum(r.counts[i] for r in self.rows) for i in range(len(self.windows))]


def traffic(folder: str, now: dt.datetime | None = None, windows: tuple = WINDOWS) -> Traffic:
    """Counts of logged records per (version, label, role) in each window ending `now`."""
    now = now or dt.datetime.now(dt.UTC)
    longest = dt.timedelta(seconds=max(s for _, s in windows))
    files = sl.published_files(folder)
    recent = [f for f in files if f.opened >= now - longest - FILE_SLACK and f.opened <= now]
    found = Traffic(folder, now, tuple(n for n, _ in windows), len(recent), len(files))
    if not recent:
        return found
    table = _metadata(recent)
    keys = zip(
        sl.first_values(table, sl.VERSION),
        sl.first_values(table, sl.LABEL),
        sl.first_values(table, sl.ROLE),
        sl.first_values(table, sl.LOGGED_AT),
        strict=True,
    )
    now_us = now.timestamp() * 1e6
    rows: dict[tuple, TrafficRow] = {}
    for version, label, role, at in keys:
        if at is None or at > now_us:
            continue
        key = (version, label or None, role or sl.SERVED)
        row = rows.setdefault(key, TrafficRow(*key, [0] * len(windows), None))
        age = (now_us - at) / 1e6
        for i, (_, seconds) in enumerate(windows):
            if age <= seconds:
                row.counts[i] += 1
        logged = dt.datetime.fromtimestamp(at / 1e6, tz=dt.UTC)
        if row.last_logged is None or logged > row.last_logged:
            row.last_logged = logged
    found.rows = sorted(
        (r for r in rows.values() if any(r.counts)),
        key=lambda r: (-(r.version or 0), r.role, r.label or ""),
    )
    return found


# The request log's history is counted in buckets this wide at least, and in no
# more than HISTORY_POINTS buckets over what it covers.
HISTORY_BUCKET_SECONDS = 60.0
HISTORY_POINTS = 240
HISTORY_SECONDS = float(max(s for _, s in WINDOWS))


def logged_history(
    folder: str, until: float | None = None, since: float | None = None
) -> tuple[list[Point], list[Swap]]:
    """Requests/s per model version from the served records of the request log with
    `since` <= `__logged_at` < `until` (Unix seconds; `since` defaults to a day
    before `until` or now), and the swaps they show: a
    version's first record, and a label whose version changed from one record to
    the next. One request with several examples counts once (its `__request_id`).
    The log has no latency or errors: those stay None."""
    files = sl.published_files(folder)
    if since is None:
        # The last day (the longest traffic window): older files are not read at all.
        since = (until or dt.datetime.now(dt.UTC).timestamp()) - HISTORY_SECONDS
    opened_after = dt.datetime.fromtimestamp(since, tz=dt.UTC) - FILE_SLACK
    files = [f for f in files if f.opened >= opened_after]
    if not files:
        return [], []
    table = _metadata(files)
    records = sorted(
        (at / 1e6, model or "", str(version), label or "", rid)
        for at, model, version, label, role, rid in zip(
            sl.first_values(table, sl.LOGGED_AT),
            sl.first_values(table, sl.MODEL),
            sl.first_values(table, sl.VERSION),
            sl.first_values(table, sl.LABEL),
            sl.first_values(table, sl.ROLE),
            sl.first_values(table, sl.REQUEST_ID),
            strict=True,
        )
        if at is not None
        and version is not None
        and (role or sl.SERVED) == sl.SERVED
        and (until is None or at / 1e6 < until)
        and (since is None or at / 1e6 >= since)
    )
    if not records:
        return [], []
    first, last = records[0][0], records[-1][0]
    width = max(HISTORY_BUCKET_SECONDS, (last - first) / HISTORY_POINTS)
    counted: dict[tuple[str, str, int], set] = {}
    swaps: list[Swap] = []
    seen: set[tuple[str, str]] = set()
    labelled: dict[tuple[str, str], str] = {}
    for at, model, version, label, rid in records:
        bucket = int((at - first) // width)
        counted.setdefault((model, version, bucket), set()).add(rid)
        if (model, version) not in seen:
            # The log's first version was already served: only later ones are swaps.
            if any(m == model for m, _ in seen):
                swaps.append(Swap(at, model, f"version {version} served", LOGGED))
            seen.add((model, version))
        if label and labelled.get((model, label), version) != version:
            moved = f"version {labelled[(model, label)]} -> {version}"
            swaps.append(Swap(at, model, f"label {label}: {moved}", LOGGED))
        if label:
            labelled[(model, label)] = version
    points = []
    for (model, version, bucket), ids in sorted(counted.items()):
        start = first + bucket * width
        n = float(len(ids))
        points.append(
            Point(start + width, start, model, version, n, n / width, None, None, None, LOGGED)
        )
    return points, swaps
