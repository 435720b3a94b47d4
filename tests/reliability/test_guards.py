"""Faults around a run: unusable locations, concurrent runs, a model push killed mid-copy.

Each test injects the fault with real files, processes and signals and checks
the promise on the file system and in ML Metadata.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import child  # tests/support/child.py (tests/ is on sys.path via its conftest)
import pytest

from pipeline.config import PROJECT_ROOT, PipelineConfig
from pipeline.datasets import dataset_config
from tfxp.local.run_guard import StoreRefused, run_lock
from tfxp.local.runner import _check_locations
from tfxp.preflight import PreflightError, check_locations


def _config(tmp: Path) -> PipelineConfig:
    return dataset_config("taxi").replace(data_root=str(tmp / "data"), run_dir=str(tmp / "run"))


def test_corrupt_metadata_store_fails_before_any_work(tmp_path):
    """Fault: metadata.sqlite holds garbage. Promise: clear error, nothing created."""
    config = _config(tmp_path)
    os.makedirs(config.run_dir)
    Path(config.metadata_path).write_bytes(os.urandom(4096))
    with pytest.raises(PreflightError, match="unreadable.*move it aside"):
        check_locations(config)
    assert sorted(os.listdir(config.run_dir)) == ["metadata.sqlite"]


def test_empty_metadata_file_is_reported(tmp_path):
    config = _config(tmp_path)
    os.makedirs(config.run_dir)
    Path(config.metadata_path).write_bytes(b"")
    with pytest.raises(PreflightError, match="empty"):
        check_locations(config)


def test_run_dir_that_cannot_be_created_is_reported(tmp_path):
    """Fault: the run directory's parent is a file. Promise: error names the path."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    config = PipelineConfig(run_dir=str(blocker / "run"))
    with pytest.raises(PreflightError, match=r"run directory .*not-a-dir/run is not writable"):
        check_locations(config)


def test_second_run_waits_for_the_lock_holder(tmp_path):
    """Fault: two runs on one store at once. Promise: the second waits, then proceeds."""
    config = _config(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys
                from pipeline.config import PipelineConfig
                from tfxp.local.run_guard import run_lock
                with run_lock(PipelineConfig(run_dir={config.run_dir!r}), "first", print):
                    print("locked", flush=True)
                    sys.stdin.readline()  # holds the lock until told
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
    )
    assert child.readline(holder, timeout=120).strip() == "locked"
    messages: list[str] = []
    acquired = threading.Event()

    def second() -> None:
        with run_lock(config, "second", messages.append):
            acquired.set()

    waiter = threading.Thread(target=second, daemon=True)
    waiter.start()
    deadline = time.monotonic() + 60
    while not messages and time.monotonic() < deadline:
        time.sleep(0.05)
    assert messages and "waiting" in messages[0] and '"run_id": "first"' in messages[0]
    assert not acquired.is_set()  # still waiting while the first holds it
    holder.communicate("release\n", timeout=60)
    waiter.join(60)
    assert acquired.is_set()


def test_lock_of_a_killed_run_is_released(tmp_path):
    """Fault: the lock holder is SIGKILLed. Promise: the next run is not blocked."""
    config = _config(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nfrom pipeline.config import PipelineConfig\n"
            "from tfxp.local.run_guard import run_lock\n"
            f"with run_lock(PipelineConfig(run_dir={config.run_dir!r}), 'doomed', print):\n"
            "    print('locked', flush=True)\n    time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
    )
    assert child.readline(holder, timeout=120).strip() == "locked"
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    messages: list[str] = []
    with run_lock(config, "next", messages.append):
        pass
    assert messages == []


def _creating_holder(config: PipelineConfig) -> subprocess.Popen:
    """A run holding the lock with its store at 0 bytes, as MLMD leaves it for a moment
    while creating it; a line on stdin makes it create the store and end (or `empty`:
    end leaving it empty, as an interrupted creation does)."""
    script = f"""
        import sys
        from pathlib import Path
        from ml_metadata.metadata_store import metadata_store
        from ml_metadata.proto import metadata_store_pb2
        from pipeline.config import PipelineConfig
        from tfxp.local.run_guard import run_lock
        config = PipelineConfig(run_dir={config.run_dir!r})
        with run_lock(config, "creating", print):
            Path(config.metadata_path).write_bytes(b"")
            print("locked", flush=True)
            if sys.stdin.readline().strip() != "empty":
                cfg = metadata_store_pb2.ConnectionConfig()
                cfg.sqlite.filename_uri = config.metadata_path
                metadata_store.MetadataStore(cfg).get_context_types()
    """
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
    )


def test_store_a_running_run_is_creating_is_judged_under_the_lock(tmp_path):
    """Fault: a second run starts while the first is creating the store (0 bytes).
    Promise: its pre-run check leaves the store to the lock; once the lock is free, the
    store is judged: a finished store is used, an empty one refused (CI saw the second
    run refuse a store the first was creating)."""
    config = _config(tmp_path)
    holder = _creating_holder(config)
    assert child.readline(holder, timeout=120).strip() == "locked"
    _check_locations(config, sqlite_store=True)  # refused "empty" before the fix
    holder.communicate("create\n", timeout=120)
    with run_lock(config, "second", print):
        assert Path(config.metadata_path).stat().st_size > 0

    holder = _creating_holder(config)
    assert child.readline(holder, timeout=120).strip() == "locked"
    _check_locations(config, sqlite_store=True)
    holder.communicate("empty\n", timeout=120)
    with pytest.raises(StoreRefused, match="is empty"), run_lock(config, "third", print):
        pass
    with pytest.raises(PreflightError, match="is empty"):
        _check_locations(config, sqlite_store=True)  # no run holds it: judged at once


FILES = 40
STOP_AFTER = 10  # the copier stops itself after this many files: mid-copy, whatever the speed


def _model_dir(tmp: Path) -> Path:
    model = tmp / "model"
    (model / "variables").mkdir(parents=True)
    for i in range(FILES):
        (model / "variables" / f"shard-{i:04d}").write_bytes(os.urandom(64 * 1024))
    (model / "saved_model.pb").write_bytes(b"pb")
    return model


def _files_copied(serving: Path) -> tuple[list[Path], int]:
    """The hidden copies under `serving`, and how many variable files the first one holds."""
    incoming = sorted(p for p in serving.iterdir() if p.name.startswith(".incoming-"))
    variables = incoming[0] / "variables" if incoming else None
    return incoming, len(list(variables.iterdir())) if variables and variables.is_dir() else 0


def _stopped(pid: int) -> bool:
    """Whether `pid` is stopped by a signal (state T in /proc/PID/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


# Runs publish_model as shipped; only the per-file copy TFX's copy_dir calls is
# wrapped, so that the process stops itself (SIGSTOP) after STOP_AFTER files. The
# kill then lands mid-copy on any machine: racing a fast copy from outside made
# the test fail whenever the copy finished between two polls.
_COPIER = """
import os, signal
from tfx.dsl.io import fileio
from components.release.atomic_pusher import publish_model

_copy, done = fileio.copy, [0]

def copy(src, dst, overwrite=False):
    _copy(src, dst, overwrite)
    done[0] += 1
    if done[0] == {stop}:
        os.kill(os.getpid(), signal.SIGSTOP)

fileio.copy = copy
print("start", flush=True)
publish_model({model!r}, {serving!r})
"""


def test_push_killed_mid_copy_leaves_only_complete_versions(tmp_path, forkserver):
    """Fault: SIGKILL while a model is copied to serving. Promise: no partial version."""
    model = _model_dir(tmp_path)
    serving = tmp_path / "serving"
    script = _COPIER.format(stop=STOP_AFTER, model=str(model), serving=str(serving))
    proc = forkserver.popen(  # its own process, without ~10 s of imports before the copy
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT
    )
    assert child.readline(proc, timeout=120).strip() == "start"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not _stopped(proc.pid):
        time.sleep(0.01)
    assert proc.poll() is None, f"publish_model ended (exit {proc.returncode}) before the kill"
    assert _stopped(proc.pid), "the copier did not reach its stop within 120 s"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    incoming, copied = _files_copied(serving)
    assert incoming and 0 < copied < FILES, f"{copied} of {FILES} files in a hidden copy"
    # Whatever a model server can see is complete; here, that is nothing at all.
    versions = [p.name for p in serving.iterdir() if not p.name.startswith(".")]
    assert versions == [], f"a version is visible although the copy was cut: {versions}"


def test_publish_never_reuses_a_version(tmp_path):
    from components.release.atomic_pusher import publish_model

    model = tmp_path / "model"
    model.mkdir()
    (model / "saved_model.pb").write_bytes(b"pb")
    first, v1 = publish_model(str(model), str(tmp_path / "serving"))
    second, v2 = publish_model(str(model), str(tmp_path / "serving"))
    assert first != second and int(v2) > int(v1)
