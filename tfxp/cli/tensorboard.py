"""`tfxp tensorboard`: TensorBoard (installed with TensorFlow) on one run's training curves.

    tfxp tensorboard [--run-id ID|latest] [--dataset NAME] [--port N] [--run-dir DIR ...]

The Trainer writes TensorBoard's event files into its model-run artifact
(`<model_run>/tensorboard`: loss and metrics per epoch, train and validation, and the
learning rate); with a Tuner, its trials' folders are in its TunerResults artifact
(`tensorboard/trial-<n>/`), shown beside them. This finds them in ML Metadata,
starts TensorBoard on them on 127.0.0.1 (a free port unless --port), prints the
address, and runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from pipeline.datasets import dataset_names
from tfxp.cli.common import add_store_flags, open_lineage

HOST = "127.0.0.1"
START_SECONDS = 120  # TensorBoard imports TensorFlow: tens of seconds on a busy machine
STOP_SECONDS = 30


def run_log_dir(lin, ref: str) -> tuple[str, str]:
    """(run id, its TensorBoard log folder) for `ref` (a run id, its prefix, or latest)."""
    from metadata.store import LineageError
    from pipeline.node_ids import TRAINER
    from trainer.curves import TENSORBOARD_DIR

    run_id = lin.resolve_run(ref)
    trainer = lin.run_execution(run_id, TRAINER)
    if trainer is None:
        raise LineageError(f"run {run_id} has no Trainer execution: nothing was trained")
    model_runs = lin.outputs(trainer.id, "ModelRun")
    if not model_runs:
        raise LineageError(f"run {run_id}'s Trainer recorded no model-run artifact")
    log_dir = os.path.join(model_runs[0].uri, TENSORBOARD_DIR)
    if not os.path.isdir(log_dir):
        raise LineageError(
            f"run {run_id}'s model run {model_runs[0].uri} has no TensorBoard logs "
            f"({TENSORBOARD_DIR}/): its trainer wrote none (gbt trains no epochs)"
        )
    return run_id, log_dir


def trial_log_dir(lin, run_id: str) -> str | None:
    """The run's Tuner trials' TensorBoard folder (one `trial-<n>/` each), or None."""
    from components.tuner.component import TENSORBOARD_DIR as TRIAL_LOGS_DIR
    from pipeline.node_ids import TUNER

    tuner = lin.run_execution(run_id, TUNER)
    for results in lin.outputs(tuner.id, "TunerResults") if tuner is not None else []:
        folder = os.path.join(results.uri, TRIAL_LOGS_DIR)
        if os.path.isdir(folder):
            return folder
    return None


def logdir_flags(log_dir: str, trials: str | None) -> list[str]:
    """TensorBoard's flags: the Trainer's folder, and with a Tuner's trials both, named
    `trainer` and `tuner` (its runs then read trainer/train, tuner/trial-0/validation ...)."""
    if trials is None:
        return ["--logdir", log_dir]
    return ["--logdir_spec", f"trainer:{log_dir},tuner:{trials}"]


def _wait_until_up(process: subprocess.Popen, address: str) -> bool:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(address, timeout=2):  # noqa: S310 - our own loopback address
                return True
        except OSError:
            time.sleep(0.5)
    return False


def cmd_tensorboard(args: argparse.Namespace) -> int:
    from metadata.store import LineageError, MetadataStoreError
    from trainer.ports import free_port

    try:
        lin = open_lineage(args)
        run_id, log_dir = run_log_dir(lin, args.run_id)
        trials = trial_log_dir(lin, run_id)
    except (LineageError, MetadataStoreError) as e:
        print(f"ERROR: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    port = args.port or free_port(HOST)
    address = f"http://{HOST}:{port}/"
    print(f"run {run_id}: training curves in {log_dir}")
    if trials:
        print(f"run {run_id}: tuner trials' curves in {trials}")
    print(f"starting TensorBoard on {address} ...", flush=True)
    # compat.tensorboard: TensorBoard 2.16 with setuptools 81+ (no pkg_resources).
    command = [sys.executable, "-m", "compat.tensorboard", *logdir_flags(log_dir, trials)]
    command += ["--host", HOST, "--port", str(port)]
    # TensorBoard logs to stderr as long as it runs: into a file (a pipe nobody reads
    # would fill and stop it), shown when it fails to start.
    with tempfile.TemporaryFile() as errors:
        return _serve(command, address, errors)


def _serve(command: list[str], address: str, errors) -> int:
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)  # noqa: S603 - this interpreter running TensorBoard, no shell
    # A SIGTERM (kill, timeout) ends TensorBoard too, through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        if not _wait_until_up(process, address):
            _stop(process)
            errors.seek(0)
            error = errors.read().decode(errors="replace")
            print(f"ERROR: TensorBoard did not start:\n{error[-2000:]}", file=sys.stderr)
            return 1
        print(f"  open {address}")
        print(f"  TensorBoard pid {process.pid}; Ctrl-C stops it", flush=True)
        return process.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(process)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM (TensorBoard runs its exit handlers: seconds on a busy machine), then
    SIGKILL if it is still there after STOP_SECONDS."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_SECONDS)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tensorboard", help="TensorBoard on a run's training curves (127.0.0.1, a free port)"
    )
    p.add_argument("--run-id", default="latest", help="a run id, a prefix of one, or latest")
    p.add_argument("--port", type=int, default=0, help="default: a free port")
    p.add_argument(
        "--dataset", default="taxi", choices=dataset_names(), help="which pipeline (default taxi)"
    )
    add_store_flags(p, default_run_dir_help=" (default: the dataset's, runs/taxi)")
    p.set_defaults(func=cmd_tensorboard)
