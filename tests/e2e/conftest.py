"""Shared whole-pipeline runs: run once per session, asserted on by many tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from e2e_support import TaxiRuns, four_runs, small_config, write_sample


@pytest.fixture(scope="session")
def taxi_runs(tmp_path_factory: pytest.TempPathFactory) -> TaxiRuns:
    """Four runs on one store: fresh, unchanged (cached), trainer code edited, and
    a `--no-cache` retrain of the first (same data, code, hyperparameters)."""
    tmp = tmp_path_factory.mktemp("taxi")
    write_sample(tmp / "data")
    return four_runs(small_config(tmp))


@pytest.fixture()
def fresh_dir(tmp_path: Path) -> Path:
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)
