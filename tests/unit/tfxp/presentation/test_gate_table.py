"""The gate's findings as a terminal table: the compared data once, aligned rows cut
to the width, from the same model the console's run page draws."""

from __future__ import annotations

import datetime as dt
import json
import re

from components.validation.findings import BLOCK, DRIFT, SCHEMA, SKEW, WARN, Finding, GateResult
from components.validation.serving_log import Window
from tfxp.presentation.gate_table import (
    ELLIPSIS,
    MIN_CELL,
    cut,
    findings_table,
    fit_widths,
    read_result,
    render_text,
)

DRIFT_WHERE = "span 3 vs span 2, train split"
WINDOW = Window(
    folder="/srv/taxi/request-log",
    files=("requests-0003.tfrecord.gz", "requests-0002.tfrecord.gz", "requests-0001.tfrecord.gz"),
    examples=1200,
    first_logged=dt.datetime(2026, 12, 1, 10, 0, 0),
    last_logged=dt.datetime(2026, 12, 1, 11, 30, 0),
)
SKEW_WHERE = f"train split vs {WINDOW.describe()}"
LONG_FEATURE = "pickup_community_area_with_a_very_long_engineered_name"


def _result() -> GateResult:
    """17 findings: drift against the previous span, skew against a serving-log window,
    schema anomalies on the train split; one warning."""
    found = [
        Finding(DRIFT, f"f{i:02d}", "COMPARATOR_L_INFTY_HIGH", "moved", 0.2 + i / 100, 0.1,
                "L-infinity", DRIFT_WHERE)
        for i in range(8)
    ]  # fmt: skip
    found += [
        Finding(SKEW, f"s{i}", "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH", "differs",
                0.3 + i / 100, 0.15, "Jensen-Shannon", SKEW_WHERE)
        for i in range(6)
    ]  # fmt: skip
    found += [
        Finding(SCHEMA, "trip_start_hour", "INT_TYPE_BIG_INT", "Unexpectedly large value: 30.",
                30.0, 23.0, "max", "train"),
        Finding(SCHEMA, LONG_FEATURE, "ENUM_TYPE_UNEXPECTED_STRING_VALUES",
                "Examples contain values missing from the schema: unseen-1 (~5%),\nunseen-2.",
                where="train"),
        Finding(DRIFT, "tips", "COMPARATOR_L_INFTY_HIGH", "moved", 0.12, 0.1, "L-infinity",
                DRIFT_WHERE, WARN),
    ]  # fmt: skip
    return GateResult(
        BLOCK,
        found,
        [],
        ["hashed columns not compared: none"],
        current_span=3,
        baseline_span=2,
        serving_rows=WINDOW.examples,
    )


def test_the_rows_are_the_consoles_model():
    result = _result()
    table = findings_table(result)
    assert table is not None and len(table["rows"]) == 17
    # Each compared data once, in the order first met.
    assert table["compared"] == [DRIFT_WHERE, SKEW_WHERE, "train"]
    assert table["rows"][0] == {
        "feature": "f00",
        "check": "drift: COMPARATOR_L_INFTY_HIGH",
        "measure": "L-infinity",
        "measured": "0.2",
        "threshold": "> 0.1",
        "verdict": "blocks",
        "description": "moved",
    }
    assert findings_table(GateResult("PASS", [], [], [])) is None


def test_terminal_table_names_the_compared_data_once_and_aligns_the_rows(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_result().to_dict()))
    result = read_result(str(path))
    assert result is not None
    text = render_text(result, width=100)
    lines = text.splitlines()
    assert lines[0] == "validation gate blocked the run: 16 anomalies"
    assert "  data: span 3 against baseline span 2; 1200 serving rows" in lines
    # The serving-log window (folder, files, count, time range) appears once, in full.
    flat = " ".join(line.strip() for line in lines)
    for part in ("/srv/taxi/request-log", "3 file(s)", "requests-0001.tfrecord.gz ..",
                 "requests-0003.tfrecord.gz", "1200 served requests",
                 "logged 2026-12-01 10:00:00 to 2026-12-01 11:30:00 UTC"):  # fmt: skip
        assert flat.count(part) == 1, part
    assert flat.count(DRIFT_WHERE) == 1
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["feature", "check"])
    rows = lines[header + 1 : header + 18]
    assert len(rows) == 17
    assert all(len(line) <= 100 for line in lines[header:])
    # Aligned: every column starts where its header does.
    starts = [lines[header].index(c) for c in ("check", "measure", "measured", "threshold")]
    for row in rows:
        assert row[starts[0] - 2 : starts[0]] == "  " and row[starts[0]] != " "
        assert row[starts[3] - 2 : starts[3]] == "  "
    f00 = rows[0].split()
    assert f00[0] == "f00" and f00[3:7] == ["L-infinity", "0.2", ">", "0.1"]
    assert f00[7] == "blocks"
    hour = next(r for r in rows if r.lstrip().startswith("trip_start_hour"))
    assert re.search(r"max\s+30\s+> 23\s+blocks", hour)
    assert rows[-1].split()[0] == "tips" and rows[-1].endswith(" warning")
    # The long feature and check are cut with an ellipsis, not wrapped.
    long_row = next(r for r in rows if r.lstrip().startswith(LONG_FEATURE[:5]))
    assert ELLIPSIS in long_row.split()[0] and LONG_FEATURE not in text
    # Too narrow for a useful part of TFDV's description: the detail column is left out.
    assert "detail" not in lines[header] and "Examples contain" not in text
    # The rows do not repeat where the data came from.
    assert not any("request-log" in r or "span 2" in r for r in rows)
    assert lines[header + 18].strip().startswith("note: hashed columns")
    assert "`--warn-only drift` `--warn-only schema` `--warn-only skew`" in text


def test_the_detail_gives_way_before_the_other_columns():
    lines = render_text(_result(), width=190).splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["feature", "check"])
    assert lines[header].rstrip().endswith("detail")
    # The long description is cut; the other columns keep their whole values.
    long_row = next(line for line in lines if line.lstrip().startswith(LONG_FEATURE))
    assert "schema: ENUM_TYPE_UNEXPECTED_STRING_VALUES" in long_row
    assert long_row.endswith(ELLIPSIS) and "Examples contain" in long_row
    assert all(len(line) <= 190 for line in lines[header:])


def test_a_wide_terminal_shows_every_value_whole():
    text = render_text(_result(), width=400)
    assert LONG_FEATURE in text and ELLIPSIS not in text
    assert "skew: COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH" in text
    # TFDV's multi-line description stays on its row.
    (row,) = [line for line in text.splitlines() if LONG_FEATURE in line]
    assert row.endswith("missing from the schema: unseen-1 (~5%), unseen-2.")


def test_cutting_keeps_a_floor_per_column():
    assert cut("abcdef", 6) == "abcdef" and cut("abcdefg", 6) == "abcde" + ELLIPSIS
    # The detail (last) gives way first, then the widest.
    assert fit_widths([30, 4, 50], 60) == [30, 4, 20]
    assert fit_widths([30, 4, 50], 40) == [24, 4, MIN_CELL]
    assert fit_widths([30, 4, 50], 200) == [30, 4, 50]
    # Too narrow for anything: every cut column stops at its floor.
    assert fit_widths([30, 4, 50], 10) == [MIN_CELL, 4, MIN_CELL]


def test_unreadable_findings_file_gives_none(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert read_result(str(bad)) is None
    assert read_result(str(tmp_path / "missing.json")) is None
    assert read_result("gs://bucket/run.json") is None


def test_the_runner_prints_the_table_and_keeps_the_record(tmp_path):
    """`tfxp run`'s blocked summary: the table from the JSON the gate wrote beside its
    report; the gate's own text when there is none."""
    from types import SimpleNamespace

    from tfxp.local.runner import blocked_summary

    result = _result()
    (tmp_path / "r1.json").write_text(json.dumps(result.to_dict()))
    (tmp_path / "r1.html").write_text("<html></html>")
    config = SimpleNamespace(report_dir=str(tmp_path))
    shown = blocked_summary(config, "r1", result.message(), width=90)  # type: ignore[arg-type]
    assert shown == render_text(result, 90) + f"\n  report: {tmp_path / 'r1.html'}"
    assert shown.count(WINDOW.folder) == 1 and result.message().count(WINDOW.folder) == 6
    assert blocked_summary(config, "r2", "the cause", width=90) == "the cause"  # type: ignore[arg-type]


def test_a_passed_run_with_warnings_prints_them_as_the_same_table(monkeypatch):
    """`tfxp run` after a gate that warned: the table's headline, compared data and rows
    (every verdict a warning), without a block's advice."""
    from types import SimpleNamespace

    import metadata.gate_report as gate_report
    from metadata.gate_report import GateOutcome
    from tfxp.local import runner

    warned = [
        Finding(DRIFT, "fare", "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH", "moved", 0.2, 0.15,
                "Jensen-Shannon", DRIFT_WHERE, WARN),
        Finding(DRIFT, "tips", "COMPARATOR_L_INFTY_HIGH", "moved", 0.12, 0.1, "L-infinity",
                DRIFT_WHERE, WARN),
    ]  # fmt: skip
    result = GateResult(WARN, warned, [], [], current_span=3, baseline_span=2)
    outcome = GateOutcome(WARN, None, [f.line() for f in warned], result)
    monkeypatch.setattr(gate_report, "finish_report", lambda *_: outcome)
    printed: list[str] = []
    summary = SimpleNamespace(run_id="r1", validation=None, report_path=None)
    runner._gate_outcome(None, None, summary, printed.append)  # type: ignore[arg-type]
    shown = "\n".join(printed)
    assert shown.splitlines()[0] == "validation gate: passed with 2 warning(s)"
    assert shown.count(DRIFT_WHERE) == 1 and "Nothing downstream ran" not in shown
    rows = [line.split() for line in shown.splitlines() if line.split()[:1] in (["fare"], ["tips"])]
    assert [r[0] for r in rows] == ["fare", "tips"] and all("warning" in r for r in rows)
    assert summary.validation == WARN
