"""`tfxp tensorboard` over the shared taxi runs: TensorBoard on the run's training curves,
on loopback, serving the Trainer's tags; stopped with its command."""

from __future__ import annotations

import pytest
from tensorboard_cli import tfxp_tensorboard  # tests/support/

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_tfxp_tensorboard_serves_the_runs_training_curves(taxi_runs):
    run_id = taxi_runs.run_ids[-1]
    with tfxp_tensorboard(taxi_runs.config.run_dir, run_id) as served:
        assert f"run {run_id}: training curves in" in served.lines[0]
        tags = served.json("data/plugin/scalars/tags")
        assert {"epoch_loss", "epoch_learning_rate"} <= set(tags["train"])
        assert "epoch_loss" in tags["validation"]
