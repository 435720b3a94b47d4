"""Killing or interrupting a run costs time, never data or a wrong model.

Faults are real signals sent to a real runner process (`local_runner.py`),
while the named component is executing. Promises are checked in ML Metadata
and on disk. The runner processes are forked from the session's fork server
(tests/conftest.py): processes of their own, without a fresh interpreter's
~10 s of imports each.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import child  # tests/support/child.py (tests/ is on sys.path via its conftest)
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


@dataclass
class Interrupted:
    """A run stopped by a signal: its exit code, what it printed, and the
    execution of the component it was stopped in."""

    returncode: int
    out: str
    err: str
    execution: metadata_store_pb2.Execution | None


@dataclass
class Chain:
    """One store, four runs of the same command, each picking up the last:
    Ctrl-C in Transform; SIGKILL in Transform; SIGKILL in Trainer; to the end."""

    tmp: Path
    ctrl_c: Interrupted
    killed_transform: Interrupted
    killed_trainer: Interrupted
    resumed: dict  # the last run's --json summary


def _executor_dirs(tmp: Path, component: str) -> set[Path]:
    """The component's per-execution folders: TFX makes one as it hands over to the executor."""
    return set(
        (tmp / "run" / "pipeline_root" / component / ".system" / "executor_execution").glob("*")
    )


def _wait_for_new_execution(tmp: Path, component: str, before: set[Path]) -> None:
    """Until the component's new execution is registered and its executor is starting.

    A fixed delay after the progress line is not enough: on a small sample Transform's
    fast path can finish within a second or two."""
    deadline = time.monotonic() + 120
    while not _executor_dirs(tmp, component) - before:
        if time.monotonic() > deadline:
            pytest.fail(f"{component}'s executor never started")
        time.sleep(0.01)


def _start_and_signal(forkserver, tmp: Path, component: str, sig: int, delay: float) -> Interrupted:
    """Starts a run, sends `sig` `delay` seconds after `component`'s executor starts, waits."""
    before = _executor_dirs(tmp, component)
    proc = forkserver.popen(
        _cmd(tmp),
        cwd=PROJECT_ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    said = []
    for line in child.lines(proc, timeout=600):
        said.append(line)
        if line.rstrip().endswith(f"] {component} ..."):
            _wait_for_new_execution(tmp, component, before)
            time.sleep(delay)
            proc.send_signal(sig)
            break
    else:
        _, err = child.finish(proc, timeout=60)
        pytest.fail(f"{component} never started: {err[-2000:]}")
    out, err = child.finish(proc, timeout=120)
    executions = _executions_of(_store(tmp), f".{component}")
    return Interrupted(
        proc.returncode, "".join(said) + out, err, max(executions, key=lambda e: e.id, default=None)
    )


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


def _resume(forkserver, tmp: Path) -> dict:
    done = forkserver.run(
        _cmd(tmp), cwd=PROJECT_ROOT, env=_env(), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    return json.loads(out[out.index("\n{") + 1 :])


@pytest.fixture(scope="module")
def chain(tmp_path_factory, forkserver) -> Chain:
    """Each fault as a user would meet it, on the store the previous one left: a
    chain pays for ingest, statistics and each component once instead of per fault."""
    tmp = tmp_path_factory.mktemp("crash")
    write_sample(tmp)
    # Transform on the sample takes about a second (its analysis is most of it).
    ctrl_c = _start_and_signal(forkserver, tmp, "Transform", signal.SIGINT, delay=0.2)
    killed_transform = _start_and_signal(forkserver, tmp, "Transform", signal.SIGKILL, delay=0.2)
    killed_trainer = _start_and_signal(forkserver, tmp, "Trainer", signal.SIGKILL, delay=1.0)
    return Chain(tmp, ctrl_c, killed_transform, killed_trainer, _resume(forkserver, tmp))


def _progress(out: str, component: str) -> str:
    """How a run's progress line reported `component` ("cached", "done in ...", "...")."""
    found = re.findall(rf"\] {component} (cached|done in|\.\.\.)", out)
    assert found, (component, out[-2000:])
    return found[-1]


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(chain):
    run = chain.ctrl_c
    assert run.returncode == 130, run.err[-2000:]
    assert "interrupted during Transform" in run.err
    assert "rerunning the same command resumes" in run.err
    assert run.execution is not None
    assert run.execution.last_known_state != metadata_store_pb2.Execution.COMPLETE
    # The next run of the same command resumed: finished components came from cache.
    after = chain.killed_transform.out
    assert _progress(after, "CsvExampleGen") == "cached"
    assert _progress(after, "StatisticsGen") == "cached"


@pytest.mark.parametrize("component", ["Transform", "Trainer"])
def test_sigkill_then_rerun_resumes_without_using_partial_output(chain, component):
    killed = chain.killed_transform if component == "Transform" else chain.killed_trainer
    assert killed.returncode == -signal.SIGKILL
    assert killed.execution is not None
    store = _store(chain.tmp)
    [now] = [e for e in _executions_of(store, f".{component}") if e.id == killed.execution.id]
    # The killed execution never turned complete, then or later.
    assert now.last_known_state != metadata_store_pb2.Execution.COMPLETE

    if component == "Transform":  # the next run re-executed it from the start
        assert _progress(chain.killed_trainer.out, "CsvExampleGen") == "cached"
        assert _progress(chain.killed_trainer.out, "Transform") == "done in"
    states = {c["node_id"]: c["state"] for c in chain.resumed["components"]}
    for node in ["CsvExampleGen", "CuratedSchemaImporter", "StatisticsGen", "Transform"]:
        assert states[node] == "CACHED", (node, states)
    for node in ["Trainer", "Evaluator", "Pusher"]:
        assert states[node] == "COMPLETE", (node, states)
    assert chain.resumed["blessed"] is True and chain.resumed["pushed"] is True

    # No live artifact points into the killed execution's output folders.
    live = [a for a in store.get_artifacts() if a.state == metadata_store_pb2.Artifact.LIVE]
    assert live
    for artifact in live:
        parts = Path(artifact.uri).parts
        assert not (component in parts and str(killed.execution.id) in parts), artifact.uri


def test_two_runs_started_at_once_on_one_sqlite_store_both_complete(tmp_path, forkserver):
    """Fault: two runners on one store at once. Promise: both complete, store intact."""
    write_sample(tmp_path)
    cmd = [*_cmd(tmp_path), "--to-node", "StatisticsGen"]
    procs = [
        forkserver.popen(
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
