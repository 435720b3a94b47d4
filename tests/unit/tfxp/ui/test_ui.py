"""The console (`tfxp ui`) over a small synthetic store: pages, security, escaping, bad stores.

Starlette's TestClient calls the app in process; the browser tests
(test_ui_browser.py) have uvicorn serve it on a loopback port.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import ui_store
from mariadb_server import mariadb_server  # noqa: F401
from ml_metadata.proto import metadata_store_pb2 as pb
from starlette.testclient import TestClient

from metadata.store import location_from
from runtime import access as security
from tfxp.ui.app import create_app
from tfxp.ui.browse import StoreBrowser
from tfxp.ui.files import resolve_file

LOCAL = "http://127.0.0.1"


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    """Four runs (the third a cached rerun), one still running, an XSS category in the data."""
    root = tmp_path_factory.mktemp("ui")
    writer = ui_store.write_runs(root / "metadata.sqlite", 4, category=ui_store.XSS)
    writer.run("run-going", span=9, stop_after="Trainer", state=pb.Execution.RUNNING)
    return root


def client(run_dir: Path, **kwargs) -> TestClient:
    browser = StoreBrowser(location_from(run_dir=str(run_dir)))
    return TestClient(create_app(browser, **kwargs), base_url=LOCAL)


@pytest.fixture(scope="module")
def ui(store_dir: Path) -> TestClient:
    return client(store_dir)


def links(html: str, pattern: str) -> list[str]:
    return [h.replace("&amp;", "&") for h in re.findall(r'href="(' + pattern + r'[^"]*)"', html)]


def test_runs_page_lists_every_run_newest_first_with_status(ui):
    page = ui.get("/")
    assert page.status_code == 200
    runs = re.findall(r'data-run="([^"]+)"', page.text)
    assert runs == ["run-going", "run-00003", "run-00002", "run-00001", "run-00000"]
    assert 'class="run-row status-running"' in page.text
    assert page.text.count("status-complete") == 4


def test_runs_page_filters_and_pages(ui, store_dir, monkeypatch):
    assert "run-00000" not in ui.get("/?dataset=no-such-dataset").text
    assert 'data-run="run-00000"' in ui.get("/?pipeline=taxi").text
    import tfxp.ui.browse as browse

    monkeypatch.setattr(browse, "PAGE_SIZE", 2)
    first, last = ui.get("/"), ui.get("/?page=3")
    assert re.findall(r'data-run="([^"]+)"', first.text) == ["run-going", "run-00003"]
    assert re.findall(r'data-run="([^"]+)"', last.text) == ["run-00000"]
    assert 'id="older"' in first.text and 'id="newer"' in last.text


def test_run_page_graph_states_and_links(ui):
    page = ui.get("/run?pipeline=taxi&id=run-00002").text
    assert page.count("state-cached") == 7  # every node of the cached rerun
    executions = links(page, "/execution/")
    assert executions and all(ui.get(e).status_code == 200 for e in set(executions))
    assert 'id="gate-decision">PASS' in page
    report = links(page, r"/artifact/\d+/file/report.html")[0]
    served = ui.get(report)
    assert served.status_code == 200 and "sandbox" in served.headers["content-security-policy"]
    running = ui.get("/run?pipeline=taxi&id=run-going").text
    assert 'id="running-note"' in running and "state-running" in running


def test_every_artifact_page_answers(ui):
    for aid in range(1, 40):
        page = ui.get(f"/artifact/{aid}")
        assert page.status_code in (200, 404), (aid, page.text[:300])
        assert "Traceback" not in page.text


def test_model_lineage_reaches_the_span(ui):
    run = ui.get("/run?pipeline=taxi&id=run-00000").text
    lineage = ui.get(links(run, "/lineage/model/")[0]).text
    span = links(lineage, "/lineage/span")[0]
    assert ui.get(span).status_code == 200
    assert "Models trained on it" in ui.get(span).text


def test_compare_and_datasets(ui):
    page = ui.get("/compare?pipeline=taxi&a=run-00000&b=run-00001").text
    assert 'class="changed" data-section="code"' in page  # the trainer's code changed
    assert 'class="changed" data-section="data"' not in page  # both trained on span 1
    other = ui.get("/compare?pipeline=taxi&a=run-00000&b=run-00003").text
    assert 'class="changed" data-section="data"' in other  # span 1 against span 2
    datasets = ui.get("/datasets").text
    assert 'data-pipeline="taxi"' in datasets
    spans = re.findall(r"/lineage/span\?pipeline=taxi&amp;span=(\d+)", datasets)
    assert {"1", "2", "9"} <= set(spans)  # the running run ingested span 9
    assert links(datasets, "/lineage/model/")  # span 1 and 2 trained models


def test_datasets_page_shows_a_spans_dvc_origin(tmp_path):
    writer = ui_store.write_runs(tmp_path / "metadata.sqlite", 4)
    ui_store.record_dvc_origin(writer.store, tmp_path, 1, repo="<b>repo</b>")
    page = client(tmp_path).get("/datasets").text
    rows = {
        span: row
        for row in re.findall(r"<tr>.*?</tr>", page, re.S)
        for span in re.findall(r"span=(\d+)\">", row)[:1]
    }
    origin = "dvc &lt;b&gt;repo&lt;/b&gt; data/trips.csv@v1 (commit 0123456789ab, dvc md5 "
    assert 'class="origin origin-dvc"' in rows["1"] and origin in rows["1"]
    assert "origin-dvc" not in rows["2"]  # span 2 came from elsewhere
    assert "<b>repo</b>" not in page


def test_data_values_are_escaped_everywhere(ui, store_dir):
    pages = ["/", "/datasets", "/run?pipeline=taxi&id=run-00000"]
    pages += [f"/artifact/{i}" for i in range(1, 12)]
    for url in pages:
        text = ui.get(url).text
        assert "<img src=x" not in text, url
    stats = next(
        ui.get(f"/artifact/{i}").text
        for i in range(1, 12)
        if "ExampleStatistics" in ui.get(f"/artifact/{i}").text
    )
    assert "&lt;img src=x onerror=alert(1)&gt;" in stats  # shown, as text
    # In the chart's JSON the markup is escaped too (|tojson turns < into \u003c).
    assert "\\u003cimg src=x" in stats


def test_files_only_from_known_artifacts(ui, store_dir, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    schema = ui_store.open_sqlite(store_dir / "metadata.sqlite").get_artifacts_by_type("Schema")[0]
    os.symlink(secret, Path(schema.uri) / "link.txt")
    schema_id = schema.id
    assert ui.get(f"/artifact/{schema_id}/file/schema.pbtxt").status_code == 200
    for bad in (
        f"/artifact/{schema_id}/file/../../../../../etc/passwd",
        f"/artifact/{schema_id}/file/%2e%2e/%2e%2e/x",
        f"/artifact/{schema_id}/file//etc/passwd",
        f"/artifact/{schema_id}/file/link.txt",
        f"/artifact/{schema_id}/file/missing",
        "/artifact/99999/file/schema.pbtxt",
        "/artifact/abc/file/x",
        "/execution/99999",
        "/execution/1/gate-report",
    ):
        answer = ui.get(bad)
        assert answer.status_code == 404, bad
        assert "secret" not in answer.text and "root:" not in answer.text


def test_resolve_file_refuses_escapes(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("x")
    (tmp_path / "outside").write_text("x")
    os.symlink(tmp_path / "outside", tmp_path / "a" / "link")
    assert resolve_file(str(tmp_path / "a"), "f") == str(tmp_path / "a" / "f")
    for bad in ("../outside", "/etc/passwd", "link", "", "a/../f", "f\x00"):
        assert resolve_file(str(tmp_path / "a"), bad) is None, bad


def test_token_required_off_loopback(store_dir, monkeypatch):
    compared = []
    real = security.hmac.compare_digest  # runtime/access.py: the console's and tfxp serve's
    monkeypatch.setattr(
        security.hmac, "compare_digest", lambda a, b: compared.append(1) or real(a, b)
    )
    c = client(store_dir, token="s3cret-token", loopback=False)
    assert c.get("/").status_code == 401
    assert c.get("/?token=wrong").status_code == 401
    assert c.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert c.get("/static/console.css").status_code == 401
    assert compared, "the token must be compared with hmac.compare_digest"
    assert c.get("/", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
    c2 = client(store_dir, token="s3cret-token", loopback=False)
    first = c2.get("/?token=s3cret-token", follow_redirects=False)
    assert first.status_code == 303 and "token" not in first.headers["location"]
    assert c2.get("/").status_code == 200  # the cookie carries it now


def test_loopback_refuses_other_hosts_and_writes(ui):
    assert ui.get("/", headers={"Host": "evil.example"}).status_code == 400
    assert ui.post("/").status_code == 405
    headers = ui.get("/").headers
    assert "script-src 'self'" in headers["content-security-policy"]


def test_assets_are_served_by_the_app(ui):
    assert ui.get("/static-vendor/plotly.min.js").status_code == 200
    assert ui.get("/static/graph.js").status_code == 200
    page = ui.get("/compare?pipeline=taxi").text
    assert not re.search(r'src="(https?:)?//', page)


@pytest.mark.parametrize("kind", ["missing", "empty", "not-mlmd", "no-runs"])
def test_bad_stores_get_a_clear_page(tmp_path, kind):
    path = tmp_path / "metadata.sqlite"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "not-mlmd":
        path.write_text("this is not a database " * 100)
    elif kind == "no-runs":
        ui_store.open_sqlite(path)
    c = client(tmp_path)
    for url in ("/", "/datasets", "/artifact/1", "/run?pipeline=taxi&id=x"):
        page = c.get(url)
        assert "Traceback" not in page.text
        assert page.status_code in (200, 404, 503), (kind, url, page.status_code)
        if kind != "no-runs":
            assert page.status_code == 503 and 'id="error-message"' in page.text
    if kind == "no-runs":
        assert 'id="no-runs"' in c.get("/").text


def test_new_runs_show_on_reload(tmp_path):
    writer = ui_store.write_runs(tmp_path / "metadata.sqlite", 1)
    c = client(tmp_path)
    assert len(re.findall(r'data-run="', c.get("/").text)) == 1
    writer.run("run-new", span=2)
    assert 'data-run="run-new"' in c.get("/").text


def test_cli_registers_ui():
    from tfxp.cli import build_parser

    args = build_parser().parse_args(["ui", "--run-dir", "x", "--port", "9"])
    assert args.port == 9 and args.host == "127.0.0.1"


@pytest.mark.slow  # a real MariaDB server
@pytest.mark.timeout(300)
def test_console_over_mariadb(mariadb_server, tmp_path):  # noqa: F811 - the fixture
    from ml_metadata.metadata_store import metadata_store

    db = mariadb_server.new_database("ui")
    location = db.location()
    store = metadata_store.MetadataStore(location.connection_config(create=True, read_only=False))
    writer = ui_store.Writer(store, tmp_path)
    first = writer.run("run-a")
    writer.run("run-b", reuse=first)
    c = TestClient(create_app(StoreBrowser(location)), base_url=LOCAL)
    runs = c.get("/").text
    assert re.findall(r'data-run="([^"]+)"', runs) == ["run-b", "run-a"]
    run = c.get("/run?pipeline=taxi&id=run-b").text
    assert "state-cached" in run and "MySQL database" in run
    assert "(not on this machine)" not in run  # no log path claimed for a MySQL store
    model = links(c.get("/run?pipeline=taxi&id=run-a").text, "/lineage/model/")[0]
    assert c.get(model).status_code == 200


def test_refresh_reads_only_what_changed_and_matches_a_fresh_read(tmp_path):
    """A run going on while the console is open: its new components and state changes
    show on reload, and the cached view equals a Lineage read from scratch."""
    from metadata.lineage import Lineage

    writer = ui_store.write_runs(tmp_path / "metadata.sqlite", 2)
    browser = StoreBrowser(location_from(run_dir=str(tmp_path)))
    browser.refresh()
    assert [r.info.run_id for r in browser.run_rows().rows] == ["run-00001", "run-00000"]
    first = browser.lineage("taxi")
    out = writer.run("run-live", span=5, stop_after="Trainer", state=pb.Execution.RUNNING)
    del out
    browser.refresh()
    live = browser.run_row("taxi", "run-live")
    assert live.status == "running" and live.info.components[-1].state == "running"
    trainer = next(
        e
        for e in writer.store.get_executions_by_context(
            writer.store.get_context_by_type_and_name("pipeline_run", "run-live").id
        )
        if e.last_known_state == pb.Execution.RUNNING
    )
    trainer.last_known_state = pb.Execution.COMPLETE
    writer.store.put_executions([trainer])
    writer.run("run-after", span=6)
    browser.refresh()
    assert browser.run_row("taxi", "run-live").status == "complete"
    cached, fresh = browser.lineage("taxi"), Lineage(writer.store, "taxi")
    assert cached is first  # updated in place, not read again
    assert list(cached.runs) == list(fresh.runs)
    for run in fresh.runs:
        assert browser.run_row("taxi", run).info == fresh.run_info(run)


def test_a_failed_run_shows_what_it_skipped(tmp_path):
    writer = ui_store.write_runs(tmp_path / "metadata.sqlite", 1)
    writer.run("run-failed", span=2, stop_after="ValidationGate", state=pb.Execution.FAILED)
    c = client(tmp_path)
    assert 'class="run-row status-failed" data-run="run-failed"' in c.get("/").text
    page = c.get("/run?pipeline=taxi&id=run-failed").text
    skipped = re.findall(r'class="node state-skipped" data-key="skipped-(\w+)"', page)
    assert sorted(skipped) == ["Evaluator", "Pusher", "Trainer"]
    assert "state-failed" in page


def test_artifact_pages_show_what_matters_per_type(ui, store_dir):
    store = ui_store.open_sqlite(store_dir / "metadata.sqlite")

    def page(type_name: str) -> str:
        return ui.get(f"/artifact/{store.get_artifacts_by_type(type_name)[0].id}").text

    examples = page("Examples")
    assert "01" + "cd" * 31 in examples and "3000" in examples and "Split-train" in examples
    assert 'id="span-link"' in examples
    model = page("Model")
    assert "learning_rate" in model and "hidden_units" in model and "code1" in model
    pushed = page("PushedModel")
    assert 'id="pushed-version">1001<' in pushed and 'id="model-lineage-link"' in pushed
    assert 'id="gate-decision">PASS<' in page("tfxp.ValidationResult")
    assert "payment_type" in page("Schema")
    assert "blessed" in page("ModelBlessing")
    generic = (
        page("TransformGraph")
        if store.get_artifacts_by_type("TransformGraph")
        else page("ModelRun")
    )
    assert 'id="events"' in generic and 'id="properties"' in generic and 'id="files"' in generic


def test_legacy_launcher_runs_show_and_update(tmp_path):
    """Runs as TFX's legacy launcher (Airflow) records them: listed, drawn, updated."""
    writer = ui_store.Writer(ui_store.open_sqlite(tmp_path / "metadata.sqlite"), tmp_path)
    writer.legacy = True
    writer.run("manual__2026-01-01T00:00:00+00:00")
    c = client(tmp_path)
    runs = c.get("/").text
    assert 'status-complete" data-run="manual__2026-01-01T00:00:00+00:00"' in runs
    page = c.get("/run?pipeline=taxi&id=manual__2026-01-01T00:00:00%2B00:00").text
    assert page.count("state-executed") == 7
    assert c.get("/lineage/span?pipeline=taxi&span=1").status_code == 200
    writer.run(
        "manual__2026-01-02T00:00:00+00:00",
        span=2,
        stop_after="Trainer",
        state=pb.Execution.RUNNING,
    )
    assert 'status-running" data-run="manual__2026-01-02T00:00:00+00:00"' in c.get("/").text


def test_serving_page_shows_live_traffic_per_version_and_the_last_skew_check(tmp_path):
    from serving_log_files import live_traffic, skew_record

    ui_store.write_runs(tmp_path / "metadata.sqlite", 1)
    page = client(tmp_path).get("/serving").text
    assert 'id="skew-none"' in page and "No request logged" in page
    live_traffic(tmp_path / "data", label=ui_store.XSS)
    skew_record(tmp_path)
    page = client(tmp_path).get("/serving").text
    assert 'id="skew-state">skew</span>' in page and "span 3" in page
    assert "skew trip_miles: Jensen-Shannon 0.4 &gt; threshold 0.15" in page
    rows = re.findall(
        r'<tr class="traffic-row" data-version="(\d+)" data-role="(\w+)">(.*?)</tr>', page
    )
    counts = {
        f"v{v} {role}": tuple(int(n) for n in re.findall(r'class="num">(\d+)<', cells))
        for v, role, cells in rows
    }
    assert counts == {"v7 served": (3, 4, 4), "v8 shadow": (2, 2, 2)}  # v6: three days old
    assert ui_store.XSS not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "3 of 4 published log file(s) read" in page


def test_a_blocked_runs_findings_show_as_a_table(tmp_path):
    """The gate's findings: one row each (feature, check, measure, measured, threshold,
    verdict), the compared data named once above them, each feature linked to its chart
    in the validation report."""
    import json

    from components.validation.findings import BLOCK, WARN, Finding, GateResult

    writer = ui_store.write_runs(tmp_path / "metadata.sqlite", 1)
    writer.run("run-blocked", span=2, stop_after="ValidationGate", state=pb.Execution.FAILED)
    where = "span 2 train split vs span 1 train split"
    result = GateResult(
        "BLOCK",
        [
            Finding(
                "drift", "fare", "COMPARATOR_L_INFTY_HIGH", "moved", 0.31, 0.2, "L-infinity", where
            ),
            Finding(
                "drift",
                "tips",
                "COMPARATOR_L_INFTY_HIGH",
                "moved",
                0.12,
                0.1,
                "L-infinity",
                where,
                WARN,
            ),
            Finding(
                "schema",
                "company",
                "ENUM_TYPE_UNEXPECTED_STRING_VALUES",
                "new",
                where=where,
                severity=BLOCK,
            ),
        ],
        [],
        [],
        current_span=2,
        baseline_span=1,
    )
    report = tmp_path / "reports" / "run-blocked.html"
    report.parent.mkdir()
    report.write_text("<html></html>")
    (tmp_path / "reports" / "run-blocked.json").write_text(json.dumps(result.to_dict()))
    store = ui_store.open_sqlite(tmp_path / "metadata.sqlite")
    (gate,) = [e for e in store.get_executions() if e.last_known_state == pb.Execution.FAILED]
    gate.custom_properties["gate_decision"].string_value = "BLOCK"
    gate.custom_properties["gate_findings"].string_value = result.message()
    gate.custom_properties["gate_report"].string_value = str(report)
    store.put_executions([gate])
    page = client(tmp_path).get("/run?pipeline=taxi&id=run-blocked").text
    table = page[
        page.index('id="gate-findings"') : page.index("</table>", page.index('id="gate-findings"'))
    ]
    rows = re.findall(r'<tr class="finding verdict-(\w+)"', table)
    assert rows == ["blocks", "warning", "blocks"]
    assert "<td>drift: COMPARATOR_L_INFTY_HIGH</td><td>L-infinity</td>" in table
    assert '<td class="num">0.31</td><td class="num">&gt; 0.2</td><td>blocks</td>' in table
    assert f'href="/execution/{gate.id}/gate-report#feature-fare"' in table
    # The compared data once, above the table, not in every row.
    shown = re.sub(r"<details>.*?</details>", "", page, flags=re.S)  # the text, folded
    assert shown.count(where) == 1 and where not in table
    assert "span 2 against span 1" in page
