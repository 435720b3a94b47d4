"""`tfxp run --beam multi-process`: what `--beam auto` picks from 64 MB of input on.

One run of the 3,000-row sample with two SDK worker subprocesses per Beam
component, as a user's terminal sees it (the CLI in a process of its own):
- it completes and blesses;
- the workers' own logging (their start-up INFO lines, Beam's and TensorFlow's
  warnings: ~400 lines on a 1M-row run) goes to the run's log, not the terminal;
- the Arrow CSV ingest and the Evaluator's fast path ran in the driver's
  process: only StatisticsGen and Transform's analysis started workers;
- every worker was forked from the run's one zygote (tfxp/local/warm_workers.py).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from e2e_support import write_sample

from pipeline.config import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

WORKERS = 2
# Logged once by every SDK worker that starts (apache_beam/runners/worker/sdk_worker.py).
WORKER_STARTED = "Control channel established"
# Beam components that keep their workers (CsvExampleGen's Arrow ingest, the
# Evaluator's fast path and, for examples with the ingest's layout, StatisticsGen
# run in the driver's process; Transform's analysis uses the workers).
WITH_WORKERS = ("Transform",)
# What each worker's stand-in logs (tfxp/local/warm_workers.py main).
FORKED = "Beam SDK worker: forked from the zygote"


@pytest.fixture(scope="module")
def multi_process_run(forkserver, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multi")
    write_sample(tmp / "data")
    args = ["--data-root", str(tmp / "data"), "--run-dir", str(tmp / "run")]
    args += ["--beam", "multi-process", "--beam-workers", str(WORKERS)]
    done = forkserver.run(
        [sys.executable, "-m", "tfxp.cli", "run", *args, "--train-steps", "40", "--eval-steps", "2"]
        + ["--json"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    summary = json.loads(done.stdout[done.stdout.index("\n{") :])
    return done, summary, Path(summary["log_path"]).read_text()


def test_multi_process_run_completes_and_blesses(multi_process_run):
    _, summary, _ = multi_process_run
    assert summary["blessed"] and summary["pushed"]
    assert summary["metrics"]["binary_accuracy"] > 0.6  # the dataset's floor


def test_worker_output_goes_to_the_log_not_the_terminal(multi_process_run):
    done, _, log = multi_process_run
    for stream in (done.stdout, done.stderr):
        assert WORKER_STARTED not in stream
        assert "INFO:" not in stream and "WARNING:" not in stream, stream[-2000:]
    assert WORKER_STARTED in log  # the workers logged, and the log has it
    assert re.search(r"\[\d+/\d+\] Pusher done", done.stdout)  # progress still reaches the terminal


def test_the_arrow_ingest_and_the_fast_evaluator_started_no_workers(multi_process_run):
    _, _, log = multi_process_run
    assert log.count(WORKER_STARTED) == WORKERS * len(WITH_WORKERS), log.count(WORKER_STARTED)
    assert "Evaluator: fast path" in log
    assert "StatisticsGen: in-process pass (the layout's decoder)" in log


def test_every_worker_forked_from_the_runs_zygote(multi_process_run):
    _, _, log = multi_process_run
    assert log.count(FORKED) == WORKERS * len(WITH_WORKERS), log.count(FORKED)
    zygotes = {line.split(FORKED, 1)[1].strip() for line in log.splitlines() if FORKED in line}
    assert len(zygotes) == 1, zygotes  # one zygote for the whole run
    assert "starts fresh" not in log
