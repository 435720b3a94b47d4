"""Killing or interrupting a run costs time, never data or a wrong model.

Faults are real signals sent to a real runner process (`local_runner.py`),
while the named component is executing. Promises are checked in ML Metadata
and on disk.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import child  # tests/child.py (tests/ is on sys.path via its conftest)
import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from reliability_support import write_sample

from pipeline.config import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _cmd(tmp: Path) -> list[str]:
    return [
        sys.executable,
        "local_runner.py",
        "--data-root",
        str(tmp / "data"),
        "--run-dir",
        str(tmp / "run"),
        "--train-steps",
        "20",
        "--eval-steps",
        "1",
        "--json",
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}


def _start_and_signal(tmp: Path, component: str, sig: int, delay: float) -> subprocess.Popen:
    """Starts a run and sends `sig` `delay` seconds after `component` starts."""
    proc = subprocess.Popen(
        _cmd(tmp),
        cwd=PROJECT_ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in child.lines(proc, timeout=600):
        if line.rstrip().endswith(f"] {component} ..."):
            time.sleep(delay)
            proc.send_signal(sig)
            break
    else:
        _, err = child.finish(proc, timeout=60)
        pytest.fail(f"{component} never started: {err[-2000:]}")
    return proc


def _store(tmp: Path) -> metadata_store.MetadataStore:
    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = str(tmp / "run" / "metadata.sqlite")
    return metadata_store.MetadataStore(cfg)


def _executions_of(store, type_suffix: str):
    return [
        e
        for t in store.get_execution_types()
        if t.name.endswith(type_suffix)
        for e in store.get_executions_by_type(t.name)
    ]


def _resume(tmp: Path) -> dict:
    done = subprocess.run(
        _cmd(tmp), cwd=PROJECT_ROOT, env=_env(), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    return json.loads(out[out.index("\n{") + 1 :])


@pytest.mark.parametrize("component", ["Transform", "Trainer"])
def test_sigkill_then_rerun_resumes_without_using_partial_output(tmp_path, component):
    write_sample(tmp_path)
    proc = _start_and_signal(tmp_path, component, signal.SIGKILL, delay=2.0)
    proc.wait(timeout=120)
    assert proc.returncode == -signal.SIGKILL

    store = _store(tmp_path)
    killed = _executions_of(store, f".{component}")
    assert len(killed) == 1
    assert killed[0].last_known_state != metadata_store_pb2.Execution.COMPLETE

    summary = _resume(tmp_path)
    states = {c["node_id"]: c["state"] for c in summary["components"]}
    upstream = ["CsvExampleGen", "CuratedSchemaImporter", "StatisticsGen"]
    if component == "Trainer":
        upstream.append("Transform")
    for node in upstream:
        assert states[node] == "CACHED", (node, states)
    for node in [component, "Evaluator", "Pusher"]:
        assert states[node] == "COMPLETE", (node, states)
    assert summary["blessed"] is True and summary["pushed"] is True

    # ML Metadata stays consistent: the killed execution never turned complete,
    # and no live artifact points into its output folders.
    store = _store(tmp_path)
    old = [e for e in _executions_of(store, f".{component}") if e.id == killed[0].id][0]
    assert old.last_known_state != metadata_store_pb2.Execution.COMPLETE
    live = [a for a in store.get_artifacts() if a.state == metadata_store_pb2.Artifact.LIVE]
    assert live
    for artifact in live:
        parts = Path(artifact.uri).parts
        assert not (component in parts and str(killed[0].id) in parts), artifact.uri


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path):
    write_sample(tmp_path)
    proc = _start_and_signal(tmp_path, "Transform", signal.SIGINT, delay=1.0)
    _, err = child.finish(proc, timeout=120)
    assert proc.returncode == 1
    assert "interrupted during Transform" in err
    assert "rerunning the same command resumes" in err
    summary = _resume(tmp_path)
    states = {c["node_id"]: c["state"] for c in summary["components"]}
    assert states["CsvExampleGen"] == "CACHED" and states["Transform"] == "COMPLETE"


def test_two_runs_started_at_once_on_one_sqlite_store_both_complete(tmp_path):
    """Fault: two runners on one store at once. Promise: both complete, store intact."""
    write_sample(tmp_path)
    cmd = [*_cmd(tmp_path), "--to-node", "StatisticsGen"]
    procs = [
        subprocess.Popen(
            cmd,
            cwd=PROJECT_ROOT,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outputs]
    assert any("waiting for it to finish" in out for out, _ in outputs)

    store = _store(tmp_path)
    runs = store.get_contexts_by_type("pipeline_run")
    assert len(runs) == 2
    states = {e.last_known_state for e in store.get_executions()}
    assert states <= {metadata_store_pb2.Execution.COMPLETE, metadata_store_pb2.Execution.CACHED}
    # One run ingested; the other reused it from cache, so one Examples artifact.
    assert len(store.get_artifacts_by_type("Examples")) == 1
