"""The benchmarks as their smoke tests run them (tests/unit/benchmarks/): a script run as
`python SCRIPT ARGS`, or loaded as a module to call its report and helpers."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from pipeline.config import PROJECT_ROOT

BENCHMARKS = PROJECT_ROOT / "benchmarks"


def run_benchmark(server, script: str, *args: str, cwd: Path | None = None, timeout: float = 240):
    """The benchmark as `python SCRIPT ARGS`: with `server` (the session's fork server),
    forked from the process that imported the pipeline once, so the script's own imports
    are free (its children, which it starts itself, are fresh interpreters still); with
    None, a fresh interpreter."""
    start = server.run if server is not None else subprocess.run
    done = start(
        [sys.executable, str(BENCHMARKS / script), *args],
        cwd=str(cwd or PROJECT_ROOT),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def load_benchmark(script: str):
    """benchmarks/SCRIPT imported as a module of its own name."""
    spec = importlib.util.spec_from_file_location(script.removesuffix(".py"), BENCHMARKS / script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
