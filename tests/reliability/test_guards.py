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

import child  # tests/child.py (tests/ is on sys.path via its conftest)
import pytest

from pipeline.config import PROJECT_ROOT, PipelineConfig
from pipeline.run_guard import RunGuardError, check_locations, run_lock


def _config(tmp: Path) -> PipelineConfig:
    return PipelineConfig(data_root=str(tmp / "data"), run_dir=str(tmp / "run"))


def test_corrupt_metadata_store_fails_before_any_work(tmp_path):
    """Fault: metadata.sqlite holds garbage. Promise: clear error, nothing created."""
    config = _config(tmp_path)
    os.makedirs(config.run_dir)
    Path(config.metadata_path).write_bytes(os.urandom(4096))
    with pytest.raises(RunGuardError, match="unreadable.*move it aside"):
        check_locations(config)
    assert sorted(os.listdir(config.run_dir)) == ["metadata.sqlite"]


def test_empty_metadata_file_is_reported(tmp_path):
    config = _config(tmp_path)
    os.makedirs(config.run_dir)
    Path(config.metadata_path).write_bytes(b"")
    with pytest.raises(RunGuardError, match="empty"):
        check_locations(config)


def test_run_dir_that_cannot_be_created_is_reported(tmp_path):
    """Fault: the run directory's parent is a file. Promise: error names the path."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    config = PipelineConfig(run_dir=str(blocker / "run"))
    with pytest.raises(RunGuardError, match=r"run directory .*not-a-dir/run is not writable"):
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
                from pipeline.run_guard import run_lock
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
            "from pipeline.run_guard import run_lock\n"
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


def test_push_killed_mid_copy_leaves_only_complete_versions(tmp_path):
    """Fault: SIGKILL while a model is copied to serving. Promise: no partial version."""
    model = tmp_path / "model"
    (model / "variables").mkdir(parents=True)
    for i in range(400):
        (model / "variables" / f"shard-{i:04d}").write_bytes(os.urandom(256 * 1024))
    (model / "saved_model.pb").write_bytes(b"pb")
    serving = tmp_path / "serving"
    script = (
        "from components.atomic_pusher import publish_model\n"
        "import sys\n"
        "print('start', flush=True)\n"
        f"publish_model({str(model)!r}, {str(serving)!r})\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT
    )
    assert child.readline(proc, timeout=120).strip() == "start"
    # Wait until the copy is under way, then kill it.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if serving.exists() and any(p.name.startswith(".incoming-") for p in serving.iterdir()):
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    versions = [p for p in serving.iterdir() if p.name.isdigit()]
    for v in versions:  # whatever is visible to a model server is complete
        assert (v / "saved_model.pb").exists()
        assert len(list((v / "variables").iterdir())) == 400
    if not versions:  # the usual case: killed mid-copy, the partial copy stays hidden
        assert any(p.name.startswith(".incoming-") for p in serving.iterdir())


def test_publish_never_reuses_a_version(tmp_path):
    from components.atomic_pusher import publish_model

    model = tmp_path / "model"
    model.mkdir()
    (model / "saved_model.pb").write_bytes(b"pb")
    first, v1 = publish_model(str(model), str(tmp_path / "serving"))
    second, v2 = publish_model(str(model), str(tmp_path / "serving"))
    assert first != second and int(v2) > int(v1)
