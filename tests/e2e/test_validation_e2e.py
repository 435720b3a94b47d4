"""The validation gate end to end: clean spans pass, drift/skew/bad values block, downgrades warn.

One data folder, spans made by the generator (data/generate.py), runs shared
by every test in this module. Runs stop at the gate except the downgraded one,
which goes on through Transform to show that the gate let it through.
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from e2e_support import finding_row, small_config
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from data.generate import Drift, generate
from metadata.summary import RunSummary
from pipeline import node_ids
from pipeline.config import PipelineConfig

# The first test of a module also pays for its module fixture's whole runs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
ROWS = 2000
QUIET = {"printer": lambda _: None}
TO_GATE = {"to_nodes": [node_ids.VALIDATION_GATE], **QUIET}


def write_generated(folder: Path, rows: int, seed: int, drift: Drift | None = None, *, label=True):
    """`rows` generated rows as folder/data.csv (without the label column for serving data)."""
    tmp = folder.parent / f".gen-{folder.name}"
    [part] = generate(tmp, rows, seed=seed, drift=drift)
    table = list(csv.reader(part.open(newline="")))
    if not label:
        i = table[0].index("tips")
        table = [r[:i] + r[i + 1 :] for r in table]
    folder.mkdir(parents=True)
    with (folder / "data.csv").open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(table)
    return folder / "data.csv"


def set_cells(path: Path, column: str, value: str, rows: int) -> None:
    """Overwrites `column` in the first `rows` data rows (values the CSV checks still accept)."""
    table = list(csv.reader(path.open(newline="")))
    i = table[0].index(column)
    for row in table[1 : rows + 1]:
        row[i] = value
    with path.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(table)


@dataclass
class ValidationRuns:
    config: PipelineConfig
    first: RunSummary  # span 1: no baseline
    clean: RunSummary  # span 2 vs span 1
    again: RunSummary  # span 2 unchanged: the gate is cached
    drifted: Exception  # span 3: fare shifted, Cash reweighted
    downgraded: RunSummary  # span 3, drift and skew downgraded to warnings, through Transform
    skewed: Exception  # span 2 against a skewed serving set
    bad_values: Exception  # span 4: unseen payment types, out-of-range hours
    printed: list[str] = field(default_factory=list)


def _blocked(run, config, run_id):
    from tfxp.local.runner import ValidationBlockedError

    with pytest.raises(ValidationBlockedError) as e:
        run(config, run_id=run_id, **TO_GATE)
    return e.value


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> ValidationRuns:
    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("validation")
    data = tmp / "data"
    write_generated(data / "span-1", ROWS, seed=1)
    write_generated(data / "serving", 1000, seed=9, label=False)
    config = small_config(tmp, train_steps=10)
    first = run_local(config.replace(span=1), run_id="span1", **TO_GATE)
    write_generated(data / "span-2", ROWS, seed=2)
    clean = run_local(config.replace(span=2), run_id="span2", **TO_GATE)
    again = run_local(config.replace(span=2), run_id="span2-again", **TO_GATE)
    drift = Drift(shift={"fare": 10.0}, reweight={"payment_type": {"Cash": 3.0}})
    write_generated(data / "span-3", ROWS, seed=3, drift=drift)
    drifted = _blocked(run_local, config.replace(span=3), "span3-drifted")
    printed: list[str] = []
    downgraded = run_local(
        # The drifted span also differs from the serving requests: skew too.
        config.replace(span=3, warn_only=("drift", "skew")),
        run_id="span3-downgraded",
        to_nodes=[node_ids.TRANSFORM],
        printer=printed.append,
    )
    skewed_dir = tmp / "skewed"
    write_generated(skewed_dir, 1000, seed=10, drift=Drift(scale={"trip_miles": 3.0}), label=False)
    skewed = _blocked(
        run_local,
        config.replace(span=2, serving_data=str(skewed_dir / "*.csv")),
        "span2-skewed",
    )
    bad = write_generated(data / "span-4", ROWS, seed=4, drift=Drift(unseen={"payment_type": 0.05}))
    set_cells(bad, "trip_start_hour", "30", rows=20)  # the schema's domain is 0..23
    bad_values = _blocked(run_local, config.replace(span=4), "span4-bad")
    return ValidationRuns(
        config, first, clean, again, drifted, downgraded, skewed, bad_values, printed
    )


def _store(config) -> metadata_store.MetadataStore:
    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = config.metadata_path
    return metadata_store.MetadataStore(cfg)


def _findings(config, run_id: str) -> dict:
    return json.loads((Path(config.report_dir) / f"{run_id}.json").read_text())


def _states(summary: RunSummary) -> dict[str, str]:
    return {c.node_id: c.state for c in summary.components}


def test_first_span_passes_and_records_no_baseline(runs):
    assert _states(runs.first)[node_ids.VALIDATION_GATE] == "COMPLETE"
    assert runs.first.validation == "PASS"
    found = _findings(runs.config, "span1")
    assert found["baseline_span"] is None and found["findings"] == []
    assert any("no baseline" in n for n in found["notes"])
    assert not [m for m in found["measurements"] if m["kind"] == "drift"]
    assert any("1000 serving requests" in n for n in found["notes"])


def test_clean_span_passes_with_drift_measured_against_previous_span(runs):
    assert runs.clean.validation == "PASS"
    found = _findings(runs.config, "span2")
    assert found["baseline_span"] == 1 and found["current_span"] == 2
    drift = {m["feature"]: m for m in found["measurements"] if m["kind"] == "drift"}
    assert drift["payment_type"]["measure"] == "L-infinity"
    assert drift["fare"]["measure"] == "Jensen-Shannon"
    assert all(m["value"] <= m["threshold"] for m in drift.values())
    assert "trip_start_timestamp" not in drift  # `off` in validation.yaml
    assert Path(runs.clean.report_path).is_file()


def test_cached_gate_still_gives_the_run_its_report(runs):
    assert _states(runs.again)[node_ids.VALIDATION_GATE] == "CACHED"
    assert runs.again.validation == "PASS"
    report = Path(runs.again.report_path)
    assert report.name == "span2-again.html"
    assert report.read_text() == (Path(runs.config.report_dir) / "span2.html").read_text()
    assert _findings(runs.config, "span2-again") == _findings(runs.config, "span2")


def test_drifted_span_is_blocked_naming_features_and_thresholds(runs):
    message = str(runs.drifted)
    assert message.startswith("validation gate blocked the run")
    # The terminal's table: a row per finding, the compared spans named once above.
    assert " Jensen-Shannon " in finding_row(message, "fare", "drift")
    assert " > 0.15 blocks" in finding_row(message, "fare", "drift")
    assert " L-infinity " in finding_row(message, "payment_type", "drift")
    assert " > 0.1 blocks" in finding_row(message, "payment_type", "drift")
    assert message.count("span 3 vs span 2") == 1
    assert "report: " in message
    # The record ML Metadata keeps and alerts send: a line per finding.
    assert "drift fare: Jensen-Shannon" in runs.drifted.record
    assert "> threshold 0.15" in runs.drifted.record
    found = _findings(runs.config, "span3-drifted")
    assert found["decision"] == "BLOCK"
    blocked = {f["feature"] for f in found["findings"] if f["kind"] == "drift"}
    assert blocked == {"fare", "payment_type"}


def test_block_stops_transform_and_is_recorded_in_metadata(runs):
    store = _store(runs.config)
    ctx = store.get_context_by_type_and_name("pipeline_run", "span3-drifted")
    executions = store.get_executions_by_context(ctx.id)
    by_node = {}
    for ex in executions:
        for c in store.get_contexts_by_execution(ex.id):
            if c.name.startswith("taxi."):
                by_node[c.name.removeprefix("taxi.")] = ex
    gate = by_node[node_ids.VALIDATION_GATE]
    assert gate.last_known_state == metadata_store_pb2.Execution.FAILED
    assert gate.custom_properties["gate_decision"].string_value == "BLOCK"
    assert "drift fare" in gate.custom_properties["gate_findings"].string_value
    assert node_ids.TRANSFORM not in by_node and node_ids.TRAINER not in by_node


def test_downgraded_drift_lets_the_run_through_with_a_warning(runs):
    states = _states(runs.downgraded)
    assert states[node_ids.VALIDATION_GATE] == "COMPLETE"
    assert states[node_ids.TRANSFORM] == "COMPLETE"
    assert runs.downgraded.validation == "WARN"
    warned = "\n".join(runs.printed)
    # The same table as a block's (tfxp/presentation/gate_table.py), every row a warning.
    assert "validation gate: passed with 4 warning(s)" in warned, warned  # drift and skew
    assert " warning" in finding_row(warned, "fare", "drift")
    assert " warning" in finding_row(warned, "payment_type", "drift")
    assert " blocks" not in warned


def test_skewed_serving_set_is_reported(runs):
    message = str(runs.skewed)
    assert " Jensen-Shannon " in finding_row(message, "trip_miles", "skew")
    assert "serving data" in message
    found = _findings(runs.config, "span2-skewed")
    skew = {f["feature"] for f in found["findings"] if f["kind"] == "skew"}
    assert "trip_miles" in skew
    assert not [f for f in found["findings"] if f["kind"] == "drift"]  # span 2 itself is clean


def test_unseen_category_and_out_of_range_value_are_blocked(runs):
    found = _findings(runs.config, "span4-bad")
    schema = {(f["feature"], f["anomaly"]) for f in found["findings"] if f["kind"] == "schema"}
    assert ("payment_type", "ENUM_TYPE_UNEXPECTED_STRING_VALUES") in schema
    assert ("trip_start_hour", "INT_TYPE_BIG_INT") in schema
    message = str(runs.bad_values)
    assert finding_row(message, "payment_type", "schema")
    assert " max 30 > 23 blocks" in finding_row(message, "trip_start_hour", "schema")
    # TFDV's descriptions (cut to the terminal's width in the table) stay whole in the record.
    assert "unseen-payment_type" in runs.bad_values.record
    assert "schema trip_start_hour: max 30 > threshold 23" in runs.bad_values.record


def _tfxp(*argv: str) -> tuple[int, str, str]:
    import contextlib
    import io

    from tfxp.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_report_command_prints_the_path(runs):
    flags = ["--data-root", runs.config.data_root, "--run-dir", runs.config.run_dir]
    code, out, _ = _tfxp("report", "--run-id", "span3-drifted", *flags)
    assert code == 0
    path = Path(out.strip())
    assert path == Path(runs.config.report_dir) / "span3-drifted.html"
    page = path.read_text()
    assert page.count("anomaly-row") >= 2 and ">BLOCK<" in page
    code, _, err = _tfxp("report", "--run-id", "no-such-run", *flags)
    assert code == 1 and "no validation report for run no-such-run" in err


def test_schema_proposal_shows_the_difference_and_keeps_the_curated_schema(runs, tmp_path):
    flags = ["--data-root", runs.config.data_root, "--run-dir", runs.config.run_dir]
    curated = Path(runs.config.schema_file).read_bytes()
    out_file = tmp_path / "proposal.pbtxt"
    code, out, err = _tfxp("schema", "propose", "-o", str(out_file), *flags)
    assert code == 0, err
    assert "(span 4)" in out  # the latest statistics
    added = [
        line for line in out.splitlines() if line.startswith("+") and "unseen-payment_type" in line
    ]
    assert added, out
    assert "was not changed" in out
    assert Path(runs.config.schema_file).read_bytes() == curated
    assert "unseen-payment_type" in out_file.read_text()


def test_report_renders_in_chromium(runs):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from browser import open_report

    page = open_report(Path(runs.config.report_dir) / "span3-drifted.html")
    assert page.errors == [], page.errors
    assert page.decision == "BLOCK"
    assert page.chart_svgs >= 10  # one plotly chart per compared feature
    rows = {(r[1], r[2]) for r in page.anomaly_rows}
    assert ("drift", "fare") in rows and ("drift", "payment_type") in rows
