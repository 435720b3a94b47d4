"""The loop closed: the gate's skew check on the request log `tfxp serve` writes.

One data folder and one store shared by the module: a span run to the gate with
only the static serving CSV (the fallback), then with clean logged requests
(passes, naming the window), then with shifted ones (blocks, naming the
window). `tfxp watch --skew-every` then checks the same span against the log
with no new span, alerting a loopback webhook when skew appears and clears.
Log files are written here the way the server writes them (tests/support/serving_log_files.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import finding_row, small_config
from serving_log_files import T0, served_records, typed_rows, write_log

from components.validation.schema_importer import load_schema, schema_column_types
from data.generate import generate
from metadata.summary import RunSummary
from pipeline import node_ids
from pipeline.config import PipelineConfig, serving_log_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
ROWS = 1500
LOGGED = 400
QUIET = {"printer": lambda _: None}
TO_GATE = {"to_nodes": [node_ids.VALIDATION_GATE], **QUIET}


def generated_rows(tmp: Path, rows: int, seed: int) -> Path:
    [part] = generate(tmp / f".gen-{seed}", rows, seed=seed)
    return part


def logged_rows(config: PipelineConfig, source: Path) -> list[dict]:
    types = schema_column_types(load_schema(config.schema_file))
    return typed_rows(source, types, drop=[config.label_key])


def shifted(rows: list[dict]) -> list[dict]:
    """What a client that changed units and relabelled a category would send."""
    out = []
    for row in rows:
        row = dict(row)
        if "trip_miles" in row:
            row["trip_miles"] *= 3.0
        if row.get("payment_type") == "Cash":
            row["payment_type"] = "Credit Card"
        elif row.get("payment_type") == "Credit Card":
            row["payment_type"] = "Cash"
        out.append(row)
    return out


def hide(path: Path) -> None:
    """Takes a published log file out of the window (readers skip hidden names)."""
    os.rename(path, path.parent / f".retired-{path.name}")


@dataclass
class LoopRuns:
    config: PipelineConfig
    clean_rows: list[dict]
    static: RunSummary
    logged: RunSummary
    clean_log: Path
    blocked: Exception
    shifted_log: Path


def _findings(config, run_id: str) -> dict:
    return json.loads((Path(config.report_dir) / f"{run_id}.json").read_text())


@pytest.fixture(scope="module")
def loop(tmp_path_factory) -> LoopRuns:
    from tfxp.local.runner import ValidationBlockedError, run_local

    tmp = tmp_path_factory.mktemp("loop")
    data = tmp / "data"
    (data / "span-1").mkdir(parents=True)
    os.rename(generated_rows(tmp, ROWS, seed=1), data / "span-1" / "data.csv")
    config = small_config(tmp, train_steps=10)
    requests = generated_rows(tmp, LOGGED, seed=9)
    # The static fallback: the same requests as a CSV without the label.
    (data / "serving").mkdir()
    lines = requests.read_text().splitlines()
    label = lines[0].split(",").index(config.label_key)
    (data / "serving" / "requests.csv").write_text(
        "\n".join(",".join(c for i, c in enumerate(r.split(",")) if i != label) for r in lines)
        + "\n"
    )
    static = run_local(config, run_id="static", **TO_GATE)
    rows = logged_rows(config, requests)
    logs = Path(serving_log_dir(config))
    clean_log = write_log(logs, served_records(rows, start=T0), T0, seq=1)
    logged = run_local(config, run_id="logged", **TO_GATE)
    hide(clean_log)
    later = T0.replace(hour=14)
    shifted_log = write_log(logs, served_records(shifted(rows), start=later), later, seq=2)
    with pytest.raises(ValidationBlockedError) as e:
        run_local(config, run_id="shifted", **TO_GATE)
    return LoopRuns(config, rows, static, logged, clean_log, e.value, shifted_log)


def test_without_logs_the_gate_checks_skew_on_the_static_csv(loop):
    assert loop.static.validation == "PASS"
    notes = _findings(loop.config, "static")["notes"]
    assert any(
        f"compared with {LOGGED} serving requests, serving data {loop.config.serving_pattern}" in n
        for n in notes
    ), notes


def test_clean_logged_requests_pass_and_the_window_is_named(loop):
    states = {c.node_id: c.state for c in loop.logged.components}
    # A published log file changed the gate's cache key: it ran again.
    assert states[node_ids.VALIDATION_GATE] == "COMPLETE"
    assert loop.logged.validation == "PASS"
    [note] = [n for n in _findings(loop.config, "logged")["notes"] if n.startswith("skew:")]
    assert f"compared with {LOGGED} serving requests" in note
    assert f"serving log {serving_log_dir(loop.config)} (1 file(s) {loop.clean_log.name}" in note
    assert "logged 2026-12-01 12:00:00 to" in note


def test_shifted_logged_requests_block_naming_the_window(loop):
    message = str(loop.blocked)
    assert message.startswith("validation gate blocked the run")
    assert finding_row(message, "trip_miles", "skew") and finding_row(
        message, "payment_type", "skew"
    )
    # The window (folder, files, count, time range) is named above the table, wrapped
    # to the terminal's width, and in no row.
    flat = " ".join(message.split())
    assert f"serving log {serving_log_dir(loop.config)}" in flat
    assert loop.shifted_log.name in flat
    assert loop.shifted_log.name not in finding_row(message, "trip_miles", "skew")
    found = _findings(loop.config, "shifted")
    skewed = {f["feature"] for f in found["findings"] if f["kind"] == "skew"}
    assert {"trip_miles", "payment_type"} <= skewed


def _watch_skew(loop, capsys) -> str:
    from runtime import alerts
    from tfxp.cli import main

    code = main(
        [
            "watch",
            "--data-root",
            str(Path(loop.config.data_root)),
            "--run-dir",
            loop.config.run_dir,
            "--skew-every",
            "1h",
            "--skew-window",
            "1h",
            "--skew-only",
            "--once",
        ]
    )
    alerts.wait_for_deliveries(30)
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def _console(config):
    from starlette.testclient import TestClient

    from metadata.store import location_from
    from tfxp.ui.app import create_app
    from tfxp.ui.browse import StoreBrowser

    browser = StoreBrowser(location_from(run_dir=config.run_dir))
    return TestClient(create_app(browser), base_url="http://127.0.0.1")


def test_watch_skew_every_alerts_when_skew_appears_and_when_it_clears(loop, capsys, monkeypatch):
    from webhook_server import WebhookServer

    from tfxp.monitor import skew

    hook = WebhookServer()
    monkeypatch.setenv("TFXP_ALERT_WEBHOOKS", hook.url)
    try:
        # The log window holds the shifted requests (the module fixture's last file).
        out = _watch_skew(loop, capsys)
        assert "skewed feature(s)" in out and loop.shifted_log.name in out
        [appeared] = hook.texts()
        assert "serving skew:" in appeared and "differ from span 1" in appeared
        assert "skew trip_miles" in appeared and "skew payment_type" in appeared
        assert loop.shifted_log.name in appeared
        recorded = skew.last_result(loop.config)
        assert recorded.state == skew.SKEWED and recorded.span == 1
        assert recorded.window["files"] == [loop.shifted_log.name]
        # Still skewed: recorded again, not alerted again.
        _watch_skew(loop, capsys)
        assert len(hook.texts()) == 1
        # Clean traffic logged 2 h after the shifted file: the window (--skew-window
        # 1h back from the newest file) holds only it, and the watcher says the skew cleared.
        later = T0.replace(hour=16)
        clean = write_log(
            Path(serving_log_dir(loop.config)),
            served_records(loop.clean_rows, start=later),
            later,
            seq=3,
        )
        out = _watch_skew(loop, capsys)
        assert "skew check: no skew" in out
        assert len(hook.texts()) == 2
        cleared = hook.texts()[1]
        assert "serving skew cleared" in cleared and clean.name in cleared
        assert loop.shifted_log.name not in cleared
        assert skew.last_result(loop.config).state == skew.CLEAR
        # The console shows that last check, and finds the log through the
        # data folder the run's ExampleGen recorded.
        page = _console(loop.config).get("/serving").text
        assert 'id="skew-state">no skew</span>' in page and "span 1" in page
        assert clean.name in page and f"<code>{serving_log_dir(loop.config)}</code>" in page
    finally:
        hook.close()
