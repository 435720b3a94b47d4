"""Two runs at once on one ML Metadata store served by MariaDB: both complete.

Fault: two runner processes (forked from the session's fork server, see
tests/conftest.py) started together against the same MySQL-protocol store and
pipeline root. Promise: both complete, and the store stays
consistent (every execution complete or cached, one run context each).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mariadb_server import mariadb_server  # noqa: F401
from reliability_support import write_sample

from pipeline.config import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def test_two_concurrent_runs_on_mariadb_both_complete(tmp_path, mariadb_server, forkserver):  # noqa: F811
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    # A database of its own: the lineage tests' runs on the same server must not count here.
    server = mariadb_server.new_database("mlmd_concurrency")
    write_sample(tmp_path)
    cmd = [
        sys.executable,
        "local_runner.py",
        "--data-root",
        str(tmp_path / "data"),
        "--run-dir",
        str(tmp_path / "run"),
        "--to-node",
        "Transform",
        *server.cli_flags(),
    ]
    env = {
        **os.environ,
        "MLMD_MYSQL_PASSWORD": server.password,
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    procs = [
        forkserver.popen(
            cmd,
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outputs]
    # No run waited on a lock: the server serializes writes itself.
    assert not any("waiting for it to finish" in out for out, _ in outputs)
    # Nothing was written to a SQLite store beside the run directory.
    assert not (tmp_path / "run" / "metadata.sqlite").exists()

    store = metadata_store.MetadataStore(
        server.location().connection_config(create=False, read_only=True)
    )
    runs = store.get_contexts_by_type("pipeline_run")
    assert len(runs) == 2, [r.name for r in runs]  # exactly these two runs, nobody else's
    states = {e.last_known_state for e in store.get_executions()}
    ok = {metadata_store_pb2.Execution.COMPLETE, metadata_store_pb2.Execution.CACHED}
    assert states <= ok, states
    type_names = {t.id: t.name.rsplit(".", 1)[-1] for t in store.get_execution_types()}
    for ctx in runs:
        nodes = {type_names[e.type_id] for e in store.get_executions_by_context(ctx.id)}
        # Transform and what it needs, in every run.
        assert {"CheckedCsvExampleGen", "CuratedSchemaImporter", "Transform"} <= nodes, nodes
