"""Live traffic per model version from the request log (tfxp/monitor/traffic.py), at a fixed time."""

from __future__ import annotations

import datetime as dt

from serving_log_files import T0, served_records, write_log

from tfxp.monitor import traffic

MINUTE = dt.timedelta(minutes=1)
ROWS = [{"x": 1.0}] * 4


def test_counts_per_version_label_role_in_each_window(tmp_path):
    now = T0 + 30 * MINUTE
    write_log(
        tmp_path, served_records(ROWS, start=now - 2 * MINUTE, version=5), now - 2 * MINUTE, seq=1
    )
    shadow = served_records(
        ROWS[:2], start=now - 40 * MINUTE, version=6, label="challenger", role="shadow"
    )
    write_log(tmp_path, shadow, now - 40 * MINUTE, seq=2)
    by_version = served_records(ROWS[:1], start=now - 10 * 60 * MINUTE, version=4, label="")
    write_log(tmp_path, by_version, now - 10 * 60 * MINUTE, seq=3)
    write_log(
        tmp_path,
        served_records(ROWS, start=now - 3 * 24 * 60 * MINUTE, version=3),
        now - 3 * 24 * 60 * MINUTE,
        seq=4,
    )
    # Logged after `now` (a clock ahead): not counted.
    write_log(
        tmp_path, served_records(ROWS[:1], start=now + MINUTE, version=5), now + MINUTE, seq=5
    )
    found = traffic.traffic(str(tmp_path), now=now)
    rows = {(r.version, r.label, r.role): r.counts for r in found.rows}
    assert rows == {
        (6, "challenger", "shadow"): [0, 2, 2],
        (5, "champion", "served"): [4, 4, 4],
        (4, None, "served"): [0, 0, 1],
    }
    assert [r.version for r in found.rows] == [6, 5, 4]
    assert found.total == [4, 6, 7]
    assert (found.files_read, found.files_published) == (3, 5)
    newest = next(r for r in found.rows if r.version == 5).last_logged
    assert newest == now - 2 * MINUTE + 3 * dt.timedelta(seconds=1)
    # Published files are read once: a second look decodes nothing new.
    cached = len(traffic._CACHE)
    assert traffic.traffic(str(tmp_path), now=now).total == [4, 6, 7]
    assert len(traffic._CACHE) == cached


def test_no_folder_no_traffic(tmp_path):
    found = traffic.traffic(str(tmp_path / "serving-log"))
    assert found.rows == [] and found.files_published == 0 and found.total == [0, 0, 0]
