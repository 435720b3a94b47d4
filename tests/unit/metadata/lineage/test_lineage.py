"""Fast tests of the lineage queries' pure parts and of bad stores (no pipeline run)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from metadata import diff as D
from metadata import lineage as L
from metadata import store
from metadata.lineage import records
from metadata.store import (
    MetadataStoreError,
    StoreLocation,
    location_from,
    open_store,
)
from tfxp.cli import main as cli_main
from tfxp.cli import render as R
from tfxp.presentation import graph as G
from tfxp.presentation import lineage_report


def _facts(**changes):
    base = {
        "data": {"span": 1, "fingerprint": "a" * 64, "rows": 2000},
        "schema": {"content_sha256": "s" * 64},
        "code": {"trainer": "t1", "transform": "p1"},
        "hyperparameters": {"train_steps": 20},
        "metrics": {"auc": 0.81, "binary_accuracy": 0.77},
        "model": {"id": 8, "blessed": True},
    }
    for path, value in changes.items():
        section, key = path.split("__")
        base[section] = {**base[section], key: value}
    return base


def test_diff_finds_exactly_what_changed() -> None:
    a = _facts()
    b = _facts(data__span=2, data__fingerprint="b" * 64, metrics__auc=0.75, model__id=19)
    changes = D.diff_facts(a, b)
    assert [(c.section, c.key) for c in changes] == [
        ("data", "fingerprint"),
        ("data", "span"),
        ("metrics", "auc"),
        ("model", "id"),
    ]
    report = D.diff_report("A", "B", a, b)
    assert report["unchanged"] == ["schema", "code", "hyperparameters"]
    text = R.render_diff(report)
    assert "aaaaaaaaaaaa" in text and "a" * 13 not in text  # hashes shortened
    assert "(-0.0600)" in text
    assert "unchanged: schema, code, hyperparameters" in text


def test_diff_of_identical_runs_and_of_added_keys() -> None:
    assert D.diff_facts(_facts(), _facts()) == []
    assert "no differences" in R.render_diff(D.diff_report("A", "B", _facts(), _facts()))
    b = _facts(hyperparameters__learning_rate=0.01)
    (change,) = D.diff_facts(_facts(), b)
    assert (change.key, change.a, change.b) == ("learning_rate", None, 0.01)
    # Float noise is not a change.
    assert D.diff_facts(_facts(metrics__auc=0.1 + 0.2), _facts(metrics__auc=0.3)) == []


def _data(examples_id: int, span: int) -> records.DataVersion:
    return records.DataVersion(
        examples_id, span, None, f"{span}" * 64, 10, "/d", "span-1/*.csv", [], "r"
    )


def test_data_facts_one_span_plain_several_per_span() -> None:
    assert lineage_report.data_facts([_data(1, 1)])["span"] == 1
    many = lineage_report.data_facts([_data(1, 1), _data(5, 2)])
    assert many["spans"] == "1,2" and many["span 2 fingerprint"] == "2" * 64


def _run(run_id: str, *states: str, model: int | None = 8) -> records.RunInfo:
    comps = [records.ComponentRun(f"C{i}", s, 1.0, i) for i, s in enumerate(states)]
    return records.RunInfo(run_id, "2026-01-01T10:00:00", 12.5, "complete", comps, model, [1])


def test_runs_table_shows_executed_and_cached_per_component() -> None:
    text = R.render_runs(
        [_run("r1", "executed", "executed"), _run("r2", "cached", "resolved", model=None)],
        {8: (True, False)},
    )
    lines = text.splitlines()
    assert lines[0].split() == [
        "run",
        "started",
        "took",
        "status",
        "span",
        "model",
        "blessed",
        "pushed",
        "ran",
    ]
    assert "#8" in lines[1] and "yes" in lines[1] and "2 executed, 0 cached" in lines[1]
    assert "r2  cached: C0; resolved: C1" in text
    assert R.render_runs([], {}) == "no runs"


def _graph() -> G.Graph:
    g = G.Graph(title="Model #19 of pipeline 'taxi', trained on span 2")
    g.add("raw", "file", "raw data span 2", ["/d/span-2/*.csv"])
    g.add("gen", "execution", "CsvExampleGen", ["execution #10"])
    g.add("ex", "artifact", "Examples", ["#13 span 2 <&>"])
    g.add("m", "artifact", "Model", ["#19"], highlight=True)
    for a, b in (("raw", "gen"), ("gen", "ex"), ("ex", "m")):
        g.edge(a, b)
    return g


def test_layout_puts_each_node_right_of_its_inputs() -> None:
    boxes, width, height = G.layout(_graph())
    x = {b.node.key: b.x for b in boxes}
    assert x["raw"] < x["gen"] < x["ex"] < x["m"]
    assert width > x["m"] and height > 40


def test_graph_formats(tmp_path: Path) -> None:
    g = _graph()
    svg = G.to_svg(g)
    assert svg.startswith("<svg") and "Model #19" in svg and "span 2 &lt;&amp;&gt;" in svg
    assert "<html>" in G.to_html(g, "details") and "Model #19" in G.to_dot(g)
    for ext in ("svg", "html", "dot", "png"):
        path = G.write_graph(g, str(tmp_path / f"g.{ext}"))
        assert Path(path).stat().st_size > 200
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(store.LineageError, match="unknown format '.jpg'"):
        G.write_graph(g, str(tmp_path / "g.jpg"))
    with pytest.raises(store.LineageError, match="does not exist"):
        G.write_graph(g, str(tmp_path / "nope" / "g.svg"))


def test_dumps_is_sorted_and_stable() -> None:
    text = R.dumps({"b": 1, "a": {"d": 2, "c": [3]}})
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True)
    assert text.index('"a"') < text.index('"b"')


def test_the_image_example_gen_is_one_of_the_example_gens() -> None:
    # The node ids have one home (pipeline/node_ids.py), which the definition and
    # the lineage queries both import: nothing to compare between them.
    from pipeline import node_ids

    assert node_ids.IMAGE_EXAMPLE_GEN in node_ids.EXAMPLE_GENS


# ---------------------------------------------------------------------------
# Where the store is.


def test_location_defaults_to_sqlite_in_the_run_dir() -> None:
    loc = location_from(environ={}, default_run_dir="/r")
    assert loc.sqlite_path == "/r/metadata.sqlite" and not loc.is_mysql
    assert location_from(run_dir="/x", environ={}).sqlite_path == "/x/metadata.sqlite"


def test_location_mysql_from_flags_and_env() -> None:
    loc = location_from(
        mysql_host="db",
        mysql_database="mlmd",
        mysql_user="u",
        environ={"MLMD_MYSQL_PASSWORD": "pw"},
    )
    assert (loc.mysql_host, loc.mysql_port, loc.mysql_password) == ("db", 3306, "pw")
    cfg = loc.connection_config()
    assert cfg.mysql.database == "mlmd" and cfg.mysql.skip_db_creation
    assert not loc.connection_config(create=True).mysql.skip_db_creation
    assert "pw" not in loc.describe()
    env = {
        "MLMD_MYSQL_HOST": "h",
        "MLMD_MYSQL_PORT": "3307",
        "MLMD_MYSQL_DATABASE": "d",
        "MLMD_MYSQL_USER": "u",
    }
    assert location_from(environ=env).mysql_port == 3307
    # An explicit --run-dir wins over MLMD_MYSQL_* in the environment.
    assert not location_from(run_dir="/r", environ=env).is_mysql


@pytest.mark.parametrize(
    ("kwargs", "env", "words"),
    [
        ({"mysql_host": "h"}, {}, "--mysql-database and --mysql-user"),
        ({"mysql_host": "h", "mysql_database": "d"}, {}, "--mysql-user"),
        ({}, {"MLMD_MYSQL_HOST": "h", "MLMD_MYSQL_PORT": "x"}, "not a port number"),
        ({"mysql_host": "h", "run_dir": "/r"}, {}, "not both"),
    ],
)
def test_location_errors(kwargs, env, words) -> None:
    with pytest.raises(MetadataStoreError, match=words):
        location_from(environ=env, **kwargs)


def test_open_store_missing_empty_and_garbage(tmp_path: Path) -> None:
    with pytest.raises(MetadataStoreError, match="no ML Metadata store at .*run the pipeline"):
        open_store(StoreLocation(sqlite_path=str(tmp_path / "metadata.sqlite")))
    assert not (tmp_path / "metadata.sqlite").exists()  # a query never creates a store
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    with pytest.raises(MetadataStoreError, match="is empty"):
        open_store(StoreLocation(sqlite_path=str(empty)))
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(MetadataStoreError, match="unreadable"):
        open_store(StoreLocation(sqlite_path=str(garbage)))


def test_open_store_unreachable_mysql_is_quick_and_clear() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        loc = StoreLocation(mysql_host="127.0.0.1", mysql_port=port, mysql_database="d")
        with pytest.raises(MetadataStoreError, match=f"cannot reach MySQL at 127.0.0.1:{port}"):
            open_store(loc)


def _store_with_pipelines(path: Path, *names: str):
    from ml_metadata.proto import metadata_store_pb2 as pb

    store = open_store(StoreLocation(sqlite_path=str(path)), create=True)
    if names:
        type_id = store.put_context_type(pb.ContextType(name="pipeline"))
        store.put_contexts([pb.Context(type_id=type_id, name=n) for n in names])
    return store


def test_store_without_runs_or_of_another_pipeline(tmp_path: Path) -> None:
    with pytest.raises(store.LineageError, match="holds no pipeline runs yet"):
        L.Lineage(_store_with_pipelines(tmp_path / "a.sqlite"), "taxi")
    with pytest.raises(store.LineageError, match="records pipeline\\(s\\) 'penguin', not 'taxi'"):
        L.Lineage(_store_with_pipelines(tmp_path / "b.sqlite", "penguin"), "taxi")


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "list"],
        ["runs", "show", "x"],
        ["runs", "diff", "a", "b"],
        ["lineage", "model", "latest"],
        ["lineage", "data", "taxi", "1"],
    ],
)
def test_cli_errors_are_one_line_exit_1(argv, tmp_path: Path, capsys) -> None:
    assert cli_main([*argv, "--run-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("ERROR: no ML Metadata store at ")
    assert captured.err.count("\n") == 1


def test_cli_store_of_another_pipeline(tmp_path: Path, capsys) -> None:
    _store_with_pipelines(tmp_path / "metadata.sqlite", "penguin")
    assert cli_main(["runs", "list", "--run-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "'penguin', not 'taxi'" in err.splitlines()[-1]


def test_tfxp_has_the_commands() -> None:
    from tfxp.cli import build_parser

    args = build_parser().parse_args(["lineage", "model", "pushed", "--graph", "g.svg"])
    assert args.model == "pushed" and args.graph == "g.svg"
    args = build_parser().parse_args(["runs", "diff", "a", "b", "--mysql-host", "h"])
    assert (args.a, args.b, args.mysql_host) == ("a", "b", "h")
