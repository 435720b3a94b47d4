"""Bad raw data stops the run at ExampleGen with file, line and column, publishing nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from e2e_support import failed_executions, small_config, write_sample
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from tfxp.local.runner import PipelineRunError, run_local

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _run_expecting_failure(tmp: Path, *, failed_in: str | None = None) -> str:
    """Runs, expects PipelineRunError; with `failed_in`, that node's execution must be FAILED."""
    config = small_config(tmp)
    with pytest.raises(PipelineRunError) as info:
        run_local(config, printer=lambda _: None)
    message = str(info.value)
    if Path(config.metadata_path).exists():
        cfg = metadata_store_pb2.ConnectionConfig()
        cfg.sqlite.filename_uri = config.metadata_path
        store = metadata_store.MetadataStore(cfg)
        live = [
            a
            for a in store.get_artifacts_by_type("Examples")
            if a.state == metadata_store_pb2.Artifact.LIVE
        ]
        assert live == [], "a failed ExampleGen must not publish Examples"
        states = {e.last_known_state for e in store.get_executions()}
        assert metadata_store_pb2.Execution.COMPLETE not in states
    if failed_in:
        assert Path(config.metadata_path).exists(), "the failure left no ML Metadata record"
        assert failed_executions(config.metadata_path, failed_in) == ["FAILED"]
    return message


def _edit(csv_path: Path, line_no: int, fn) -> None:
    lines = csv_path.read_text().splitlines(keepends=True)
    lines[line_no - 1] = fn(lines[line_no - 1])
    csv_path.write_text("".join(lines))


def test_malformed_row_names_file_and_line(tmp_path):
    csv_path = write_sample(tmp_path / "data", rows=200)
    _edit(csv_path, 57, lambda line: line.rsplit(",", 3)[0] + "\n")  # drop 3 fields
    message = _run_expecting_failure(tmp_path, failed_in="CsvExampleGen")
    assert f"{csv_path}:57" in message
    assert "fields" in message and "CsvExampleGen" in message


def test_missing_label_column_names_the_column(tmp_path):
    csv_path = write_sample(tmp_path / "data", rows=200)
    lines = csv_path.read_text().splitlines()
    header = lines[0].split(",")
    idx = header.index("tips")
    cut = [",".join(f for i, f in enumerate(line.split(",")) if i != idx) for line in lines]
    csv_path.write_text("\n".join(cut) + "\n")
    message = _run_expecting_failure(tmp_path)
    assert "'tips'" in message and "missing" in message and str(csv_path) in message


def test_text_in_numeric_column_names_line_and_column(tmp_path):
    csv_path = write_sample(tmp_path / "data", rows=200)
    header = csv_path.read_text().splitlines()[0].split(",")
    fare = header.index("fare")

    def put_text(line: str) -> str:
        fields = line.rstrip("\n").split(",")
        fields[fare] = "twelve"
        return ",".join(fields) + "\n"

    _edit(csv_path, 10, put_text)
    message = _run_expecting_failure(tmp_path, failed_in="CsvExampleGen")
    assert f"{csv_path}:10 column 'fare'" in message and "'twelve'" in message


def test_empty_data_folder_is_reported_before_running(tmp_path):
    (tmp_path / "data").mkdir()
    message = _run_expecting_failure(tmp_path)
    assert "no span folders" in message and str(tmp_path / "data") in message


def test_empty_csv_file_is_reported(tmp_path):
    span = tmp_path / "data" / "span-1"
    span.mkdir(parents=True)
    (span / "data.csv").write_text("")
    message = _run_expecting_failure(tmp_path)
    assert "data.csv" in message and "empty" in message


def test_failed_run_then_fixed_data_completes(tmp_path):
    """The failure leaves nothing behind that a later run would pick up."""
    csv_path = write_sample(tmp_path / "data", rows=300)
    good = csv_path.read_text()
    _edit(csv_path, 5, lambda line: line.rsplit(",", 2)[0] + "\n")
    _run_expecting_failure(tmp_path)
    csv_path.write_text(good)
    summary = run_local(
        small_config(tmp_path).replace(train_steps=5),
        to_nodes=["Transform"],
        printer=lambda _: None,
    )
    states = {c.node_id: c.state for c in summary.components}
    assert states["CsvExampleGen"] == "COMPLETE"
    shutil.rmtree(tmp_path, ignore_errors=True)
