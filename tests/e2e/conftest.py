"""Shared whole-pipeline runs: run once per session, asserted on by many tests."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import small_config, write_sample

from pipeline.config import PipelineConfig
from tfxp.metadata.summary import RunSummary


@dataclass
class TaxiRuns:
    config: PipelineConfig
    first: RunSummary
    cached: RunSummary
    trainer_code_changed: RunSummary
    retrained: RunSummary  # `--no-cache` on the first run's data, code and config


@pytest.fixture(scope="session")
def taxi_runs(tmp_path_factory: pytest.TempPathFactory) -> TaxiRuns:
    """Four runs on one store: fresh, unchanged (cached), trainer code edited, and
    a `--no-cache` retrain of the first (same data, code, hyperparameters)."""
    import pipeline.definition as definition
    from tfxp.local.runner import run_local

    tmp = tmp_path_factory.mktemp("taxi")
    write_sample(tmp / "data")
    config = small_config(tmp)
    first = run_local(config, printer=lambda _: None)
    cached = run_local(config, printer=lambda _: None)

    real = definition.code_fingerprint

    def edited(path: str, *args, **kwargs) -> str:
        # Same effect as editing trainer/taxi/model.py: the run_fn's code hash changes.
        value = real(path, *args, **kwargs)
        return value[::-1] if path == config.run_fn else value

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(definition, "code_fingerprint", edited)
        changed = run_local(config, printer=lambda _: None)
    retrained = run_local(config.replace(enable_cache=False), printer=lambda _: None)
    return TaxiRuns(config, first, cached, changed, retrained)


@pytest.fixture()
def fresh_dir(tmp_path: Path) -> Path:
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)
