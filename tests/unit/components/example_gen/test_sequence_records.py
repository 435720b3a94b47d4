"""Event rows to SequenceExamples (components/example_gen/sequence_records.py), the
dataset file's `sequence:` section, and `tfxp init`'s refusals for event tables."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import pytest

from components.example_gen.sequence_example_gen import bucket_of, split_of
from components.example_gen.sequence_records import (
    Layout,
    SequenceInputError,
    examples_of_files,
    parse_order,
)
from pipeline.dataset_sections import DatasetFileError
from pipeline.dataset_sequence import read_sequence

KINDS = {"k": "BYTES", "t": "FLOAT", "y": "BYTES", "c": "FLOAT", "x": "FLOAT", "a": "BYTES"}
OPTIONS = {
    "key": "k",
    "order_by": "t",
    "label": "y",
    "context": {"c": "zscore"},
    "features": {"x": "zscore", "a": "vocabulary"},
    "max_length": 3,
}


def _write(path: Path, rows: list[list]) -> str:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["k", "t", "y", "c", "x", "a"])
        writer.writerows(rows)
    return str(path)


def test_rows_over_files_out_of_order_become_one_ordered_example_per_key(tmp_path):
    one = _write(tmp_path / "1.csv", [["s1", 3, "no", 1.5, 30, "c"], ["s2", 1, "yes", 2, 7, "v"]])
    two = _write(tmp_path / "2.csv", [["s1", 1, "no", 1.5, 10, "a"], ["s1", 2, "no", 1.5, "", "b"]])
    built = dict(examples_of_files([one, two], Layout.of(OPTIONS, KINDS)))
    s1 = built["s1"]
    steps = s1.feature_lists.feature_list
    assert [f.bytes_list.value[0] for f in steps["a"].feature] == [b"a", b"b", b"c"]
    # The blank cell is a step without a value: steps stay aligned.
    assert [list(f.float_list.value) for f in steps["x"].feature] == [[10.0], [], [30.0]]
    assert s1.context.feature["y"].bytes_list.value == [b"no"]
    assert s1.context.feature["c"].float_list.value == [1.5]
    assert len(built["s2"].feature_lists.feature_list["x"].feature) == 1


def test_longer_sequences_keep_their_last_steps(tmp_path):
    rows = [["s", t, "no", 1, t * 10, "v"] for t in range(5)]
    built = dict(examples_of_files([_write(tmp_path / "e.csv", rows)], Layout.of(OPTIONS, KINDS)))
    values = [f.float_list.value[0] for f in built["s"].feature_lists.feature_list["x"].feature]
    assert values == [20.0, 30.0, 40.0]
    first = Layout.of({**OPTIONS, "truncate": "keep_first"}, KINDS)
    kept = dict(examples_of_files([str(tmp_path / "e.csv")], first))
    assert [f.float_list.value[0] for f in kept["s"].feature_lists.feature_list["x"].feature] == [
        0.0,
        10.0,
        20.0,
    ]


def test_a_label_varying_within_a_key_is_refused_naming_the_rows(tmp_path):
    path = _write(tmp_path / "e.csv", [["s", 1, "no", 1, 1, "v"], ["s", 2, "yes", 1, 1, "v"]])
    with pytest.raises(SequenceInputError, match=r"label column 'y' varies.*e\.csv:2.*e\.csv:3"):
        examples_of_files([path], Layout.of(OPTIONS, KINDS))


def test_repeated_order_values_within_a_key_are_refused_naming_both_rows(tmp_path):
    path = _write(tmp_path / "e.csv", [["s", 1, "no", 1, 1, "v"], ["s", 1, "no", 1, 2, "v"]])
    with pytest.raises(SequenceInputError, match=r"rows .*e\.csv:2 and .*e\.csv:3 have the same"):
        examples_of_files([path], Layout.of(OPTIONS, KINDS))


def test_order_values_parse_timestamps_and_name_a_bad_one():
    assert parse_order("2026-03-01 00:00:01", "timestamp", "f:2") - parse_order(
        "2026-03-01T00:00:00Z", "timestamp", "f:3"
    ) == pytest.approx(1.0)
    with pytest.raises(SequenceInputError, match="f:9: order value 'soon' is not an ISO"):
        parse_order("soon", "timestamp", "f:9")
    with pytest.raises(SequenceInputError, match="blank"):
        parse_order(" ", "number", "f:4")


def test_a_missing_column_is_named(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("k,t,y\ns,1,no\n")
    with pytest.raises(SequenceInputError, match=r"header lacks column\(s\) \['c', 'x', 'a'\]"):
        examples_of_files([str(path)], Layout.of(OPTIONS, KINDS))


def test_a_key_always_lands_in_the_same_split():
    assert bucket_of("s0001", 3) == bucket_of("s0001", 3)
    splits = [split_of(f"s{i}", [2, 3]) for i in range(3000)]
    assert 0.6 < splits.count(0) / len(splits) < 0.73  # 2 of 3 buckets: train


def _file(sequence: dict, **top) -> dict:
    return {"label": "y", "task": "binary", "classes": ["no", "yes"], "sequence": sequence, **top}


def test_the_sequence_section_is_read_and_checked():
    options = read_sequence(
        _file(
            {"key": "k", "order_by": "t", "context": {"c": "zscore"}, "features": {"x": "zscore"}}
        ),
        "d.yaml",
    )
    assert (options.max_length, options.truncate, options.model) == (64, "keep_last", "gru")
    bad = [
        ({"order_by": "t", "features": {"x": "zscore"}}, "sequence.key is required"),
        ({"key": "k", "order_by": "t", "features": {}}, "at least one per-event column"),
        ({"key": "k", "order_by": "t", "features": {"x": "bucketize"}}, "treatment must be one of"),
        ({"key": "k", "order_by": "t", "features": {"y": "zscore"}}, "'y' is both label"),
        (
            {"key": "k", "order_by": "t", "features": {"x": "zscore"}, "max_length": 0},
            "max_length is a whole number",
        ),
        ({"key": "k", "order_by": "t", "features": {"x": "zscore"}, "model": "lstm"}, "gru"),
    ]
    for section, message in bad:
        with pytest.raises(DatasetFileError, match=message):
            read_sequence(_file(section), "d.yaml")


def _init_args(files: list[str], **changes) -> argparse.Namespace:
    values = dict(
        name="ev", csv=files, label="y", task=None, exclude=None, sequence_key="k", order_by="t",
        max_length=None, sequence_model=None, link=False, data_root=None, force=False,
    )  # fmt: skip
    values.update(changes)
    return argparse.Namespace(**values)


def _events(tmp_path: Path, rows: list[list]) -> str:
    return _write(tmp_path / "events.csv", rows)


def test_init_refuses_a_label_that_varies_within_a_key_naming_rows(tmp_path):
    from tfxp.init.profile import InitError
    from tfxp.init.sequence import infer_sequences

    rows = [[f"s{i % 6}", i, "yes" if i % 6 < 3 else "no", i % 6, i * 0.5, "v"] for i in range(30)]
    rows[7][2] = "yes" if rows[7][2] == "no" else "no"
    path = _events(tmp_path, rows)
    with pytest.raises(
        InitError, match=r"label 'y' varies within the sequence 's1'.*events\.csv:3"
    ):
        infer_sequences(_init_args([path]), "ev")


def test_init_refuses_repeated_order_values_naming_rows(tmp_path):
    from tfxp.init.profile import InitError
    from tfxp.init.sequence import infer_sequences

    rows = [
        [f"s{i % 6}", i // 6, "yes" if i % 6 < 3 else "no", i % 6, i * 0.5, "v"] for i in range(30)
    ]
    rows[8][1] = rows[2][1]  # s2: a second event at the same time
    path = _events(tmp_path, rows)
    with pytest.raises(InitError, match=r"repeats within key k='s2': rows .*events\.csv:4"):
        infer_sequences(_init_args([path]), "ev")


def test_init_tells_context_from_per_event_columns(tmp_path):
    from tfxp.init.sequence import infer_sequences

    rows = [
        [f"s{i % 6}", i // 6, "yes" if i % 6 < 3 else "no", i % 6 * 1.5, i * 0.5, "abc"[i // 6 % 3]]
        for i in range(60)
    ]
    seq, _, _ = infer_sequences(_init_args([_events(tmp_path, rows)]), "ev")
    assert [c.name for c in seq.context] == ["c"]
    assert [c.name for c in seq.features] == ["x", "a"]
    assert seq.order_format == "number" and seq.sequences == 6
    assert [c.treatment for c in seq.features] == ["zscore", "vocabulary"]


def test_the_generator_spreads_a_sessions_rows_over_files_and_labels_by_late_events(tmp_path):
    from data.sequences import KEY, converts, write_events

    done = write_events(tmp_path, 200, seed=4, files=3)
    files = sorted(tmp_path.glob("*.csv"))
    keys_by_file = [{row[KEY] for row in csv.DictReader(f.open())} for f in files]
    assert len(files) == 3 and done["keys"] == 200
    assert keys_by_file[0] & keys_by_file[1] & keys_by_file[2]  # sessions straddle the files
    # Order matters: the same events, a cart late or early, give different labels.
    amounts = [10.0, 10.0, 10.0, 10.0, 20.0, 20.0, 20.0]
    late = ["view", "view", "view", "view", "view", "cart", "view"]
    assert converts(late, amounts) and not converts(late[::-1], amounts)
    assert not converts(["view", "cart", "remove", "view"], [1.0, 1.0, 5.0, 5.0, 5.0])
