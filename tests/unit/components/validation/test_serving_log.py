"""The request-log window (components/validation/serving_log.py) and the gate's serving side on it."""

from __future__ import annotations

import datetime as dt
import gzip
import os
from collections import Counter

import pytest
from serving_log_files import T0, example, served_records, write_log

from components.validation import serving_log as sl
from components.validation.schema_importer import load_schema
from components.validation.serving_data import load_serving_data, serving_cache_key
from pipeline.config import PROJECT_ROOT, serving_log_dir
from pipeline.datasets import dataset_config

HOUR = dt.timedelta(hours=1)
ROWS = [
    {"trip_miles": 1.5 + i, "payment_type": "Cash", "trip_start_hour": i % 24} for i in range(5)
]


def test_published_files_newest_first_ignoring_hidden_and_foreign_names(tmp_path):
    write_log(tmp_path, served_records(ROWS), T0, seq=1)
    write_log(tmp_path, served_records(ROWS), T0 + HOUR, seq=2)
    write_log(tmp_path, served_records(ROWS), T0 + HOUR, seq=3)
    (tmp_path / ".requests-20261201T140000-1-000004.tfrecord.gz.tmp").write_bytes(b"half")
    (tmp_path / "notes.txt").write_text("not a log")
    (tmp_path / "requests-2026-12-01-1-000005.tfrecord.gz").write_bytes(b"bad name")
    files = sl.published_files(str(tmp_path))
    assert [f.seq for f in files] == [3, 2, 1]
    assert files[0].opened == T0 + HOUR and files[0].pid == 4242 and files[0].size > 0
    assert sl.published_files(str(tmp_path / "absent")) == []


def test_window_spans_hours_back_from_the_newest_file(tmp_path):
    for seq, hours in enumerate([0, 10, 30, 40], 1):
        write_log(tmp_path, served_records(ROWS), T0 + hours * HOUR, seq=seq)
    files = sl.published_files(str(tmp_path))
    assert [f.seq for f in sl.window_files(files, sl.WindowOptions(hours=24))] == [4, 3]
    assert [f.seq for f in sl.window_files(files, sl.WindowOptions(hours=40))] == [4, 3, 2, 1]
    assert sl.window_files([], sl.WindowOptions()) == []


def test_window_options_refuse_nonsense():
    with pytest.raises(ValueError, match="hours must be > 0"):
        sl.WindowOptions(hours=0)
    with pytest.raises(ValueError, match="max_examples must be >= 1"):
        sl.WindowOptions(max_examples=0)
    assert sl.WindowOptions.from_json(sl.WindowOptions(2.0, 7).to_json()) == sl.WindowOptions(
        2.0, 7
    )


def test_served_window_reads_served_records_newest_first_capped(tmp_path):
    old = write_log(tmp_path, served_records(ROWS, start=T0), T0, seq=1)
    shadow = served_records(ROWS, start=T0 + HOUR, role="shadow", label="challenger", version=2)
    served = served_records(ROWS[:3], start=T0 + HOUR)
    new = write_log(tmp_path, shadow + served, T0 + HOUR, seq=2)
    table, window = sl.served_window(str(tmp_path), sl.WindowOptions(max_examples=100))
    assert window.examples == 8 == table.num_rows  # 3 + 5: shadow records do not count
    assert window.files == (new.name, old.name)
    assert not [c for c in table.column_names if c.startswith("__")]
    assert window.first_logged == T0 and window.last_logged == T0 + HOUR + 2 * dt.timedelta(
        seconds=1
    )
    text = window.describe()
    assert "2 file(s)" in text and old.name in text and new.name in text
    assert "8 served requests" in text and "2026-12-01 12:00:00 to 2026-12-01 13:00:02 UTC" in text
    # The cap: the newest file's 3 served records, then 1 of the older file.
    table, window = sl.served_window(str(tmp_path), sl.WindowOptions(max_examples=4))
    assert window.examples == 4 and window.files == (new.name, old.name)
    # ... the older file's newest record: its last row.
    assert table.column("trip_miles").to_pylist() == [[1.5], [2.5], [3.5], [5.5]]
    table, window = sl.served_window(str(tmp_path), sl.WindowOptions(max_examples=3))
    assert window.files == (new.name,)
    assert table.column("trip_miles").to_pylist() == [[1.5], [2.5], [3.5]]


def test_served_window_is_none_without_served_records(tmp_path):
    assert sl.served_window(str(tmp_path), sl.WindowOptions()) is None
    write_log(tmp_path, served_records(ROWS, role="shadow"), T0)
    assert sl.served_window(str(tmp_path), sl.WindowOptions()) is None


def test_a_corrupt_published_file_is_named(tmp_path):
    write_log(tmp_path, served_records(ROWS), T0, seq=1)
    bad = tmp_path / sl.published_files(str(tmp_path))[0].name.replace("000001", "000002")
    bad.write_bytes(gzip.compress(b"\x01\x02 not a tfrecord"))
    with pytest.raises(sl.ServingLogError, match=f"{bad}: not a readable serving-log file"):
        sl.served_window(str(tmp_path), sl.WindowOptions())


def test_read_table_keeps_metadata_and_counts_by_version_label_role(tmp_path):
    records = served_records(ROWS[:2], version=3) + served_records(
        ROWS[:1], version=4, label="challenger", role="shadow"
    )
    records.append(example(ROWS[0], request_id="x", version=5, label="", role="served"))
    write_log(tmp_path, records, T0)
    table = sl.read_table(sl.published_files(str(tmp_path)))
    assert table.num_rows == 4
    assert sl.first_values(table, sl.REQUEST_ID) == ["r0", "r1", "r0", "x"]
    keys = (sl.first_values(table, c) for c in (sl.VERSION, sl.LABEL, sl.ROLE))
    counts = Counter(zip(*keys, strict=True))
    assert counts == {
        (3, "champion", "served"): 2,
        (4, "challenger", "shadow"): 1,
        (5, None, "served"): 1,
    }


def test_serving_log_dir_is_under_the_data_root(tmp_path):
    config = dataset_config("taxi").replace(data_root=str(tmp_path / "d") + "/")
    assert serving_log_dir(config) == str(tmp_path / "d" / "serving-log")


@pytest.fixture(scope="module")
def taxi_schema():
    return load_schema(dataset_config("taxi").schema_file)


def test_gate_serving_side_prefers_the_log_and_falls_back_to_the_csv(tmp_path, taxi_schema):
    csv_dir = tmp_path / "serving"
    csv_dir.mkdir()
    lines = (PROJECT_ROOT / "data" / "taxi" / "serving" / "requests.csv").read_text().splitlines()
    (csv_dir / "a.csv").write_text("\n".join(lines[:3]) + "\n")
    pattern, logs = str(csv_dir / "*.csv"), str(tmp_path / "serving-log")
    window = sl.WindowOptions(min_examples=5)
    fallback = load_serving_data(taxi_schema, pattern, logs, window)
    assert fallback.rows == 2 and fallback.window is None
    assert fallback.source == f"serving data {pattern}"
    key_csv = serving_cache_key(pattern, logs, window)
    write_log(tmp_path / "serving-log", served_records(ROWS), T0, seq=1)
    logged = load_serving_data(taxi_schema, pattern, logs, window)
    assert logged.rows == 5 and logged.source.startswith(f"serving log {logs} (1 file(s)")
    [dataset] = logged.statistics.datasets
    assert dataset.num_examples == 5
    names = {f.path.step[0] for f in dataset.features}
    assert names == {"trip_miles", "payment_type", "trip_start_hour"}
    key_one = serving_cache_key(pattern, logs, window)
    write_log(tmp_path / "serving-log", served_records(ROWS), T0 + HOUR, seq=2)
    key_two = serving_cache_key(pattern, logs, window)
    assert len({key_csv, key_one, key_two}) == 3
    none = load_serving_data(taxi_schema, "", "", window)
    assert none.statistics is None and none.missing == "no serving data for this dataset"
    # Fewer served requests than the window needs: the CSV, and the note says why.
    few = load_serving_data(taxi_schema, pattern, logs, sl.WindowOptions(min_examples=11))
    assert few.rows == 2 and few.window is None
    assert "holds 10 served request(s) in its window, fewer than the 11" in few.source


def test_read_metadata_reads_only_the_metadata_and_names_a_bad_file(tmp_path):
    records = served_records(ROWS[:2], version=3, outputs=[0.25, 0.75])
    records.append(example(ROWS[0], request_id="x", version=4, role="shadow", output=[0.1, 0.9]))
    write_log(tmp_path, records, T0, seq=1)
    table = sl.read_metadata(sl.published_files(str(tmp_path)))
    assert sorted(table.column_names) == sorted(sl.METADATA)  # no request feature
    assert sl.first_values(table, sl.VERSION) == [3, 3, 4]
    assert sl.first_values(table, sl.ROLE) == ["served", "served", "shadow"]
    assert table.column(sl.OUTPUT).to_pylist() == [[0.25], [0.75], pytest.approx([0.1, 0.9])]
    bad = tmp_path / "requests-20261201T130000-1-000002.tfrecord.gz"
    write_log(tmp_path, [example({}, version="not a number")], T0 + HOUR, seq=2)
    os.rename(sl.published_files(str(tmp_path))[0].path, bad)
    with pytest.raises(sl.ServingLogError, match=f"{bad}: not a readable serving-log file"):
        sl.read_metadata(sl.published_files(str(tmp_path)))
