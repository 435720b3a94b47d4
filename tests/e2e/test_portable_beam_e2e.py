"""The taxi pipeline with Beam's portable runner and SDK workers in separate processes.

As docs/beyond-one-machine.md has a user do it, on loopback:
- Beam's own Python job service (`local_job_service_main`) and a worker pool
  (`tfxp beam workers`) run as processes of their own;
- `tfxp run --beam portable` submits every Beam component (ExampleGen,
  StatisticsGen, Transform, Evaluator) to the job service, whose SDK workers
  share nothing with the driver but the bucket (data and pipeline root in
  SeaweedFS) and get the project only as the package `--setup_file` builds,
  staged through the job service and installed by each worker's boot;
- the outputs equal the in-process run of the same data (the session's
  `taxi_runs.first`): examples per split (counts and content), statistics,
  transformed examples and eval metrics.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import child
import pytest
from e2e_support import (
    SAMPLE_ROWS,
    split_examples,
    statistics_values,
    transformed_values,
    write_sample,
)

from pipeline.config import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

TFXP = str(Path(sys.executable).parent / "tfxp")
BUCKET = "tfxp-portable"
# As the session's in-process runs (e2e_support.small_config).
STEPS = ["--train-steps", "40", "--eval-steps", "2"]
SERVICE_START_S = 180


@dataclass
class PortableRun:
    tmp: Path
    driver_pid: int
    code: int
    stdout: str
    stderr: str
    worker_dir: Path
    local_root: Path  # the bucket's pipeline root, downloaded


def _start(forkserver, args: list[str], cwd: Path, env: dict[str, str], log: Path):
    """A service, forked from the session's fork server (tests/conftest.py): a process
    of its own without a fresh interpreter's ~10 s of imports. The SDK workers the
    pool starts are fresh interpreters on the staged package all the same."""
    with log.open("w") as out:
        return forkserver.popen(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)


def _wait_for_port(proc, port_file: Path, log: Path) -> int:
    """The port a service wrote once listening; fails naming the service if it never does."""
    deadline = time.monotonic() + SERVICE_START_S
    while time.monotonic() < deadline:
        if port_file.exists():
            return int(port_file.read_text())
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    proc.kill()
    pytest.fail(f"{proc.args[:3]} did not start:\n{log.read_text()[-3000:]}", pytrace=False)


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def _download(server, prefix: str, dest: Path) -> None:
    client = server.client()
    for key in server.keys(BUCKET, prefix):
        path = dest / key[len(prefix) :].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(BUCKET, key, str(path))


@pytest.fixture(scope="module")
def portable_run(seaweedfs, tmp_path_factory, forkserver) -> PortableRun:
    """Job service + worker pool + `tfxp run --beam portable` on a bucket, once."""
    tmp = tmp_path_factory.mktemp("portable")
    csv = write_sample(tmp / "local")
    seaweedfs.create_bucket(BUCKET)
    seaweedfs.client().upload_file(str(csv), BUCKET, "taxi/span-1/data.csv")
    env = seaweedfs.env()
    # Services run outside the checkout, as they would on other machines.
    services = tmp / "services"
    services.mkdir()
    job_service = _start(
        forkserver,
        [sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main"]
        + ["--port", "0", "--port_file", str(services / "job.port")],
        services,
        {k: v for k, v in env.items() if not k.startswith("AWS_")},  # it never reads data
        services / "job.log",
    )
    workers = _start(
        forkserver,
        [TFXP, "beam", "workers", "--port", "0", "--port-file", str(services / "pool.port")]
        + ["--work-dir", str(tmp / "workers")],
        services,
        env,
        services / "pool.log",
    )
    try:
        job_port = _wait_for_port(job_service, services / "job.port", services / "job.log")
        pool_port = _wait_for_port(workers, services / "pool.port", services / "pool.log")
        run = forkserver.popen(
            [TFXP, "run", "--data-root", f"s3://{BUCKET}/taxi", "--run-dir"]
            + [f"s3://{BUCKET}/runs/taxi", "--state-dir", str(tmp / "state"), "--json", *STEPS]
            + ["--beam", "portable", "--job-endpoint", f"localhost:{job_port}"]
            + ["--environment-config", f"127.0.0.1:{pool_port}"],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = child.finish(run, timeout=1500)
        (services / "run.out").write_text(out)  # kept for a look after a failure
        (services / "run.err").write_text(err)
    finally:
        _stop(workers)
        _stop(job_service)
    local_root = tmp / "bucket_root"
    _download(seaweedfs, "runs/taxi/pipeline_root/", local_root)
    return PortableRun(tmp, run.pid, run.returncode, out, err, tmp / "workers", local_root)


def _summary(run: PortableRun) -> dict:
    assert run.code == 0, run.stdout[-3000:] + run.stderr[-5000:]
    return json.loads(run.stdout[run.stdout.index("{") :])


def _worker_records(run: PortableRun) -> list[dict]:
    records = []
    for path in sorted(run.worker_dir.glob("workers/*/modules.json")):
        records.append({**json.loads(path.read_text()), "log": path.with_name("worker.log")})
    return records


def test_portable_run_completes_and_blesses(portable_run):
    summary = _summary(portable_run)
    assert summary["blessed"] is True, summary
    states = {c["node_id"]: c["state"] for c in summary["components"]}
    for node in ("CsvExampleGen", "StatisticsGen", "Transform", "Evaluator"):
        assert states[node] == "COMPLETE", states


def test_beam_work_ran_in_separate_workers_on_the_staged_package(portable_run):
    _summary(portable_run)
    records = _worker_records(portable_run)
    # One SDK worker per Beam job at least: ExampleGen, StatisticsGen, Transform, Evaluator.
    assert len(records) >= 4, records
    pids = {r["pid"] for r in records}
    assert portable_run.driver_pid not in pids and os.getpid() not in pids
    ran = Counter(m for r in records for m in r["work_modules"])
    for module in (
        "tensorflow_data_validation",
        "tensorflow_transform",
        "tensorflow_model_analysis",
    ):
        assert ran[module] >= 1, ran
    # ExampleGen's own DoFns came from the package the job staged, not the checkout.
    packages = str(portable_run.worker_dir / "packages")
    project_files = [f for r in records for f in r["modules"].values() if f]
    assert any("/components/example_gen/" in f for f in project_files), records
    assert all(f.startswith(packages) for f in project_files), project_files
    for r in records:
        assert str(PROJECT_ROOT) not in r["sys_path"], r["sys_path"]
        assert not r["cwd"].startswith(str(PROJECT_ROOT))
        assert "installed ['workflow.tar.gz']" in r["log"].read_text()


def test_examples_equal_the_in_process_run_split_by_split(portable_run, taxi_runs):
    _summary(portable_run)
    ours = split_examples(str(portable_run.local_root))
    theirs = split_examples(taxi_runs.config.pipeline_root)  # its runs write the same
    assert set(ours) == set(theirs) == {"Split-train", "Split-eval"}
    assert sum(sum(c.values()) for c in ours.values()) == SAMPLE_ROWS
    for split in ours:
        assert sum(ours[split].values()) == sum(theirs[split].values())
        assert ours[split] == theirs[split], split  # the same examples, byte for byte


def test_statistics_equal_the_in_process_run(portable_run, taxi_runs):
    _summary(portable_run)
    ours = statistics_values(portable_run.local_root)
    theirs = statistics_values(Path(taxi_runs.config.pipeline_root))
    assert ours.keys() == theirs.keys()
    # Means and deviations combine in another order across workers: floats within 1e-6.
    assert ours == pytest.approx(theirs, rel=1e-6)


def test_transform_output_equals_the_in_process_run(portable_run, taxi_runs):
    import numpy as np

    _summary(portable_run)
    ours = transformed_values(portable_run.local_root)
    theirs = transformed_values(Path(taxi_runs.config.pipeline_root))
    assert ours.keys() == theirs.keys() and ours
    for key in ours:
        # The analyzers' sums combine in another order across workers: floats within 1e-6.
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-6, atol=1e-6, err_msg=str(key))


def test_eval_metrics_equal_the_in_process_run_within_noise(portable_run, taxi_runs):
    ours = _summary(portable_run)["metrics"]
    theirs = taxi_runs.first.metrics
    for name in ("binary_accuracy", "auc", "example_count"):
        assert ours[name] == pytest.approx(theirs[name], abs=0.01), (name, ours, theirs)
