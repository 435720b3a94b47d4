"""Every command that reads or writes ML Metadata, on MariaDB, by flags or by MLMD_MYSQL_*.

`tfxp run` writes the store chosen by the same --mysql-* flags and MLMD_MYSQL_*
variables that `runs`, `lineage`, `data list`, `verify`, `report` and
`schema propose` read it with; no SQLite file appears in the run directory.
The server is this module's own (its own database), so counts are exact.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest
from e2e_support import small_config, write_span

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mariadb_server import MariaDB, running_mariadb

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> MariaDB:
    with running_mariadb(tmp_path_factory.mktemp("mariadb-commands"), "mlmd_commands") as s:
        yield s


def _env(server: MariaDB) -> dict[str, str]:
    return {
        "MLMD_MYSQL_HOST": server.host,
        "MLMD_MYSQL_PORT": str(server.port),
        "MLMD_MYSQL_DATABASE": server.database,
        "MLMD_MYSQL_USER": server.user,
        "MLMD_MYSQL_PASSWORD": server.password,
    }


def tfxp(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    from tfxp.cli import main

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        for k in _env_names():
            mp.delenv(k, raising=False)
        for k, v in env.items():
            mp.setenv(k, v)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _env_names() -> list[str]:
    return [f"MLMD_MYSQL_{n}" for n in ("HOST", "PORT", "DATABASE", "USER", "PASSWORD")]


@pytest.fixture(scope="module")
def run(server, tmp_path_factory):
    """One `tfxp run` with the store given by the environment only."""
    tmp = tmp_path_factory.mktemp("mariadb-run")
    write_span(tmp / "data", 1, rows=1500)
    config = small_config(tmp, train_steps=20, eval_steps=1)
    where = ["--data-root", config.data_root, "--run-dir", config.run_dir]
    code, out, err = tfxp(["run", *where, "--train-steps", "20", "--json"], _env(server))
    assert code == 0, err[-3000:]
    return config, where, json.loads(out[out.index("\n{") + 1 :])  # after the progress lines


def test_run_writes_the_environments_store(run) -> None:
    config, _, summary = run
    assert summary["blessed"] and summary["pushed"]
    assert not Path(config.metadata_path).exists()  # MariaDB, not SQLite in the run dir


@pytest.mark.parametrize("by", ["env", "flags"])
def test_every_reader_uses_the_same_store(server, run, by) -> None:
    config, where, summary = run
    flags = server.cli_flags() if by == "flags" else []
    env = {"MLMD_MYSQL_PASSWORD": server.password} if by == "flags" else _env(server)
    store_where = ["--dataset", "taxi", *flags]

    code, out, err = tfxp(["runs", "list", *store_where, "--json"], env)
    assert code == 0, err
    assert [r["run_id"] for r in json.loads(out)["runs"]] == [summary["run_id"]]

    code, out, err = tfxp(["lineage", "data", "taxi", "1", *flags, "--json"], env)
    assert code == 0, err
    (use,) = json.loads(out)["models"]
    assert use["trained_in_run"] == summary["run_id"] and use["pushed"]

    code, out, err = tfxp(["data", "list", *where, "--dataset", "taxi", *flags, "--json"], env)
    assert code == 0, err
    (span,) = json.loads(out)["taxi"]["spans"]
    (ingestion,) = span["ingestions"]
    assert ingestion["runs"] == [summary["run_id"]] and ingestion["models"][0]["pushed"]

    code, out, err = tfxp(["verify", *where, *flags, "--json"], env)
    assert code == 0, err
    assert json.loads(out) and all(r["ok"] for r in json.loads(out))

    code, out, err = tfxp(["report", *where, *flags], env)
    assert code == 0, err
    assert out.strip().endswith(f"{summary['run_id']}.html")

    out_file = Path(config.run_dir) / f"proposed-{by}.pbtxt"
    code, out, err = tfxp(["schema", "propose", *where, *flags, "-o", str(out_file)], env)
    assert code == 0, err
    assert out_file.is_file()


def test_incomplete_settings_fail_in_one_line(server, run) -> None:
    _, where, _ = run
    env = {"MLMD_MYSQL_HOST": server.host, "MLMD_MYSQL_PORT": str(server.port)}
    for argv in (["verify", *where], ["data", "list", *where], ["schema", "propose", *where]):
        code, _, err = tfxp(argv, env)
        assert code == 1 and err.count("\n") == 1 and "--mysql-database" in err, (argv, err)


def test_console_reads_the_mariadb_store(server, run) -> None:
    """`tfxp ui` over the MariaDB store the run wrote: the run, its pages, its lineage."""
    from console_check import check_console

    shown = check_console(server.location())
    assert list(shown.values()) == ["complete"], shown
