"""How a local run's execution reports a store its lock-time check refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.datasets import dataset_config
from tfxp.local.progress import ProgressHandler
from tfxp.local.run_guard import LOCK_FILE
from tfxp.local.runner import PipelineRunError, _execute


def test_an_empty_store_found_under_the_lock_fails_the_pre_run_check_and_runs_nothing(
    tmp_path, monkeypatch
) -> None:
    """The store is judged once the run holds the lock (a run that held it may have
    been creating it): an empty one is refused as the pre-run check, before TFX runs."""
    from tfx.orchestration.local import local_dag_runner

    ran = []
    monkeypatch.setattr(local_dag_runner, "LocalDagRunner", lambda: ran.append(1))
    config = dataset_config("taxi").replace(run_dir=str(tmp_path / "run"))
    Path(config.run_dir).mkdir()
    Path(config.metadata_path).write_bytes(b"")  # left by an interrupted creation
    progress = ProgressHandler(3, lambda _: None)
    with pytest.raises(PipelineRunError, match="is empty") as e:
        _execute(config, "R", None, None, (progress, print), "run.log", connection_config=None)
    assert e.value.component == "the pre-run check"
    assert ran == []
    # The lock was released with the refusal: the holder's record is gone.
    assert (Path(config.local_dir) / LOCK_FILE).read_text() == ""
