"""Lineage questions answered from ML Metadata on a real MariaDB server.

Three runs: span 1, span 2 (the same rows with fares changed) and an unchanged
rerun (everything cached). Every question goes through the `tfxp` command line,
in-process.

Only MariaDB: the queries are the same ML Metadata calls on either store, and
SQLite's side is covered elsewhere without three more runs: the same commands
on real SQLite runs (tests/e2e/test_image_e2e.py: `lineage data` per span and
`runs list` over two spans; tests/e2e/test_reproducible_retrain.py: `runs diff`),
and opening a SQLite store that is missing, empty, garbage or of another
pipeline (tests/unit/metadata/lineage/test_lineage.py). The SQLite variant of this module cost ~64
CPU-s of the suite (three runs).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import small_config, write_scaled_fares, write_span

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mariadb_server import mariadb_server  # noqa: F401

from metadata.summary import RunSummary
from pipeline.config import PipelineConfig

# The first test of a module also pays for its module fixture's whole runs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
ROWS = 2000


@dataclass
class LineageRuns:
    config: PipelineConfig
    flags: list[str]
    env: dict[str, str]
    span1: RunSummary
    span2: RunSummary
    cached: RunSummary

    @property
    def run_ids(self) -> list[str]:
        return [self.span1.run_id, self.span2.run_id, self.cached.run_id]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, mariadb_server) -> LineageRuns:  # noqa: F811
    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("lineage")
    span1 = write_span(tmp / "data", 1, rows=ROWS)
    config = small_config(tmp, train_steps=20, eval_steps=1)
    server = mariadb_server
    connection = server.location().connection_config(create=True, read_only=False)
    flags, env = server.cli_flags(), {"MLMD_MYSQL_PASSWORD": server.password}
    quiet = {"printer": lambda _: None, "metadata_connection_config": connection}
    first = run_local(config, **quiet)
    write_scaled_fares(tmp / "data", 2, span1, 1.5)  # new content, same shape
    second = run_local(config, **quiet)
    cached = run_local(config, **quiet)
    return LineageRuns(config, flags, env, first, second, cached)


def tfxp(runs: LineageRuns, *argv: str) -> tuple[int, str, str]:
    """Runs `tfxp ARGV --<store flags>` in-process: (exit code, stdout, stderr)."""
    import contextlib
    import io

    from tfxp.cli import main

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        for k, v in runs.env.items():
            mp.setenv(k, v)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*argv, *runs.flags])
    return code, out.getvalue(), err.getvalue()


def tfxp_json(runs: LineageRuns, *argv: str):
    code, out, err = tfxp(runs, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def _sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_the_runs_themselves(runs: LineageRuns) -> None:
    assert runs.span1.blessed and runs.span1.pushed
    assert runs.span2.executed and not runs.cached.executed


def test_runs_list(runs: LineageRuns) -> None:
    listing = tfxp_json(runs, "runs", "list")
    got = listing["runs"]
    assert [r["run_id"] for r in got] == runs.run_ids
    assert [r["status"] for r in got] == ["complete"] * 3
    assert [r["spans"] for r in got] == [[1], [2], [2]]
    assert "Trainer" in got[0]["executed"] and not got[0]["cached"]
    assert got[2]["executed"] == [] and "Trainer" in got[2]["cached"]
    assert got[1]["model_id"] == got[2]["model_id"] != got[0]["model_id"]
    assert all(r["blessed"] and r["pushed"] for r in got)
    assert all(r["seconds"] >= 0 and r["started"] for r in got)
    code, text, _ = tfxp(runs, "runs", "list")
    assert code == 0 and runs.cached.run_id in text and "cached: CsvExampleGen" in text


def test_runs_show(runs: LineageRuns) -> None:
    shown = tfxp_json(runs, "runs", "show", runs.span2.run_id)
    states = {c["node_id"]: c["state"] for c in shown["components"]}
    assert states["Trainer"] == "executed" and states["CuratedSchemaImporter"] == "cached"
    assert shown["facts"]["data"]["span"] == 2
    code, text, _ = tfxp(runs, "runs", "show", "latest")
    assert code == 0 and runs.cached.run_id in text and "cached" in text


def test_lineage_of_the_latest_model_reaches_the_raw_files(runs: LineageRuns) -> None:
    from components.validation.schema_importer import file_sha256
    from pipeline.fingerprint import code_fingerprint

    m = tfxp_json(runs, "lineage", "model", "latest")
    assert m["trained_in_run"] == runs.span2.run_id
    assert m["reused_by_runs"] == [runs.cached.run_id]
    assert m["spans"] == [2]
    (data,) = m["data"]
    span2_file = os.path.join(runs.config.data_root, "span-2", "data.csv")
    assert data["files"] == [span2_file]
    assert data["pattern"] == "span-2/*.csv" and data["rows"] == ROWS
    assert len(data["fingerprint"]) == 64
    assert m["schema"]["content_sha256"] == file_sha256(runs.config.schema_file)
    assert m["trainer"]["code_fingerprint"] == code_fingerprint(runs.config.run_fn)
    assert m["transform"]["code_fingerprint"] == code_fingerprint(runs.config.preprocessing_fn)
    assert m["trainer"]["hyperparameters"] == {"eval_steps": 1, "train_steps": 20}
    first = tfxp_json(runs, "lineage", "model", runs.span1.run_id)
    assert m["blessed"] and m["blessing"]["baseline_model_id"] == first["model_id"]
    assert m["metrics"]["binary_accuracy"] == pytest.approx(runs.span2.metrics["binary_accuracy"])
    (push,) = m["pushes"]
    assert push["pushed"] and push["destination"] == runs.span2.pushed_model
    assert first["spans"] == [1] and first["blessing"]["baseline_model_id"] is None
    assert first["data"][0]["fingerprint"] != data["fingerprint"]


def test_pushed_model_and_ids(runs: LineageRuns) -> None:
    pushed = tfxp_json(runs, "lineage", "model", "pushed")
    latest = tfxp_json(runs, "lineage", "model", "latest")
    assert pushed["model_id"] == latest["model_id"]
    by_id = tfxp_json(runs, "lineage", "model", str(latest["model_id"]))
    assert by_id == latest
    code, text, _ = tfxp(runs, "lineage", "model", "latest")
    assert code == 0
    assert "trained on span 2" in text and "against baseline model" in text
    assert os.path.join(runs.config.data_root, "span-2", "data.csv") in text


def test_models_trained_on_each_span(runs: LineageRuns) -> None:
    models = {}
    for span in (1, 2):
        result = tfxp_json(runs, "lineage", "data", "taxi", str(span))
        assert [d["span"] for d in result["data"]] == [span]
        (use,) = result["models"]
        assert use["spans"] == [span] and use["blessed"] and use["pushed"]
        models[span] = use
    assert models[1]["model_id"] != models[2]["model_id"]
    assert models[2]["baseline_model_id"] == models[1]["model_id"]
    assert models[1]["trained_in_run"] == runs.span1.run_id
    code, _, err = tfxp(runs, "lineage", "data", "taxi", "7")
    assert code == 1 and "span 7 was never ingested" in err and "ingested spans: 1, 2" in err


def test_diff_between_spans(runs: LineageRuns) -> None:
    report = tfxp_json(runs, "runs", "diff", runs.span1.run_id, runs.span2.run_id)
    changed = report["changed"]
    assert changed["data"]["span"] == {"a": 1, "b": 2}
    assert changed["data"]["fingerprint"]["a"] != changed["data"]["fingerprint"]["b"]
    assert {"schema", "code", "hyperparameters"} <= set(report["unchanged"])
    assert "model" in changed and "id" in changed["model"]
    assert set(report["facts"]["a"]["metrics"]) >= {"auc", "binary_accuracy", "example_count"}
    code, text, _ = tfxp(runs, "runs", "diff", runs.span1.run_id, runs.span2.run_id)
    assert (
        code == 0 and "fingerprint" in text and "unchanged: schema, code, hyperparameters" in text
    )


def test_cached_rerun_changes_nothing(runs: LineageRuns) -> None:
    report = tfxp_json(runs, "runs", "diff", runs.span2.run_id, runs.cached.run_id)
    assert report["changed"] == {}
    assert report["unchanged"] == ["data", "schema", "code", "hyperparameters", "metrics", "model"]


def test_json_is_stable(runs: LineageRuns) -> None:
    for argv in (
        ("runs", "list"),
        ("lineage", "model", "latest"),
        ("runs", "diff", runs.span1.run_id, runs.span2.run_id),
    ):
        code, once, _ = tfxp(runs, *argv, "--json")
        _, twice, _ = tfxp(runs, *argv, "--json")
        assert code == 0 and once == twice
        assert once == json.dumps(json.loads(once), indent=2, sort_keys=True) + "\n"


def test_graphs_name_model_and_span(runs: LineageRuns, tmp_path: Path) -> None:
    model_id = tfxp_json(runs, "lineage", "model", "latest")["model_id"]
    for ext in ("svg", "html", "dot", "png"):
        path = tmp_path / f"lineage.{ext}"
        code, text, err = tfxp(runs, "lineage", "model", "latest", "--graph", str(path))
        assert code == 0, err
        assert f"graph: {path}" in text and path.stat().st_size > 500
        if ext == "png":
            from PIL import Image

            with Image.open(path) as img:
                assert img.format == "PNG" and img.width > 400
        else:
            content = path.read_text()
            assert f"Model #{model_id}" in content and "span 2" in content
            assert "span-2/*.csv" in content
    path = tmp_path / "span1.svg"
    code, _, err = tfxp(runs, "lineage", "data", "taxi", "1", "--graph", str(path))
    assert code == 0, err
    assert "span 1" in path.read_text()


def test_unknown_ids_fail_in_one_line(runs: LineageRuns) -> None:
    for argv, words in (
        (("runs", "show", "no-such-run"), "no run 'no-such-run'"),
        (("lineage", "model", "99999"), "no Model artifact 99999"),
        (("runs", "diff", runs.span1.run_id, "nope-nope"), "`tfxp runs list`"),
    ):
        code, out, err = tfxp(runs, *argv)
        assert code == 1 and out == ""
        assert err.startswith("ERROR: ") and err.count("\n") == 1 and words in err


def test_unreachable_mysql_fails_in_one_line(runs: LineageRuns) -> None:
    from trainer.ports import free_port

    flags = list(runs.flags)
    flags[flags.index("--mysql-port") + 1] = str(free_port())
    code, _, err = tfxp(LineageRuns(**{**runs.__dict__, "flags": flags}), "runs", "list")
    assert code == 1 and err.count("\n") == 1 and "cannot reach MySQL" in err
    flags = list(runs.flags)
    flags[flags.index("--mysql-database") + 1] = "no_such_db"
    code, _, err = tfxp(LineageRuns(**{**runs.__dict__, "flags": flags}), "runs", "list")
    assert code == 1 and err.count("\n") == 1 and "no_such_db" in err
