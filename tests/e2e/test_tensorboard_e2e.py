"""`tfxp tensorboard` over the shared taxi runs: TensorBoard on the run's training curves,
on loopback, serving the Trainer's tags; stopped with its command."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_tfxp_tensorboard_serves_the_runs_training_curves(taxi_runs):
    run_id = taxi_runs.run_ids[-1]
    command = [sys.executable, "-m", "tfxp.cli", "tensorboard"]
    command += ["--run-dir", taxi_runs.config.run_dir, "--run-id", run_id]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        lines = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            assert line or process.poll() is None, f"tfxp tensorboard ended: {lines}"
            lines.append(line)
            if line.strip().startswith("open http"):
                break
        address = re.search(r"http://127\.0\.0\.1:\d+/", lines[-1]).group(0)
        assert f"run {run_id}: training curves in" in lines[0]
        with urllib.request.urlopen(address + "data/plugin/scalars/tags", timeout=30) as r:  # noqa: S310 - loopback
            tags = json.load(r)
        assert {"epoch_loss", "epoch_learning_rate"} <= set(tags["train"])
        assert "epoch_loss" in tags["validation"]
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    with pytest.raises(OSError):  # TensorBoard stopped with it
        urllib.request.urlopen(address, timeout=5)  # noqa: S310 - loopback
