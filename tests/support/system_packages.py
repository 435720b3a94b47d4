"""System packages some tests need (MariaDB, Chromium), installed by the project's own scripts.

A fresh machine has neither; `make test` must still work there, so a test that
finds one missing installs it with its script (apt-get) when running as root,
and otherwise fails saying what to run.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def ensure_installed(installed: bool, script: str, what: str) -> None:
    """Runs `scripts/<script> install` unless `installed`; fails the test with the fix otherwise."""
    if installed:
        return
    if os.geteuid() != 0:
        pytest.fail(
            f"{what} is not installed and the tests do not run as root: install it with "
            f"`sudo scripts/{script} install`",
            pytrace=False,
        )
    done = subprocess.run(
        [str(SCRIPTS / script), "install"], capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        pytest.fail(f"scripts/{script} install failed:\n{done.stderr[-2000:]}", pytrace=False)
