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
import time
from pathlib import Path

import child  # tests/support/child.py (tests/ is on sys.path via its conftest)
import pytest

from pipeline.config import PROJECT_ROOT, PipelineConfig
from pipeline.datasets import dataset_config
from tfxp.local.run_guard import run_lock
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
                import time
                from pipeline.config import PipelineConfig
                from tfxp.local.run_guard import run_lock
                with run_lock(PipelineConfig(run_dir={config.run_dir!r}), "first", print):
                    print("locked", flush=True)
                    time.sleep(3)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
    )
    assert child.readline(holder, timeout=120).strip() == "locked"
    messages: list[str] = []
    started = time.monotonic()
    with run_lock(config, "second", messages.append):
        waited = time.monotonic() - started
    holder.wait(timeout=30)
    assert messages and "waiting" in messages[0] and '"run_id": "first"' in messages[0]
    assert waited > 1.0


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


FILES = 1000  # ~128 MB in many files: the copy takes long enough to be caught mid-way


def _model_dir(tmp: Path) -> Path:
    model = tmp / "model"
    (model / "variables").mkdir(parents=True)
    for i in range(FILES):
        (model / "variables" / f"shard-{i:04d}").write_bytes(os.urandom(128 * 1024))
    (model / "saved_model.pb").write_bytes(b"pb")
    return model


def _files_copied(serving: Path) -> tuple[list[Path], int]:
    """The hidden copies under `serving`, and how many variable files the first one holds."""
    incoming = sorted(p for p in serving.iterdir() if p.name.startswith(".incoming-"))
    variables = incoming[0] / "variables" if incoming else None
    return incoming, len(list(variables.iterdir())) if variables and variables.is_dir() else 0


def test_push_killed_mid_copy_leaves_only_complete_versions(tmp_path, forkserver):
    """Fault: SIGKILL while a model is copied to serving. Promise: no partial version.

    The test fails, rather than passing vacuously, when the kill did not land
    mid-copy (the copy had finished, or never started).
    """
    model = _model_dir(tmp_path)
    serving = tmp_path / "serving"
    script = (
        "from components.release.atomic_pusher import publish_model\n"
        "print('start', flush=True)\n"
        f"publish_model({str(model)!r}, {str(serving)!r})\n"
    )
    proc = forkserver.popen(  # its own process, without ~10 s of imports before the copy
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT
    )
    assert child.readline(proc, timeout=120).strip() == "start"
    # Kill as soon as some, not all, of the variables are in the copy.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if serving.exists() and _files_copied(serving)[1] > 0:
            break
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "publish_model ended before the kill"

    incoming, copied = _files_copied(serving)
    assert incoming and 0 < copied < FILES, (
        f"the kill did not land mid-copy ({copied} of {FILES} files in a hidden copy): "
        "this run proves nothing; the machine may be too slow or too fast for the test"
    )
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
