"""tfxp.local.workers and `tfxp train`: the loopback cluster's TF_CONFIG and the command's errors."""

from __future__ import annotations

import json

from tfxp.cli import main
from tfxp.local.workers import tf_config
from trainer.distribution import TF_CONFIG, cluster_from_env


def test_loopback_tf_config_is_what_the_trainer_reads():
    ports = [2001, 2002, 2003]
    clusters = [cluster_from_env({TF_CONFIG: json.dumps(tf_config(ports, i))}) for i in range(3)]
    assert [(c.workers, c.index, c.is_chief) for c in clusters] == [
        (3, 0, True),
        (3, 1, False),
        (3, 2, False),
    ]
    assert tf_config(ports, 1)["cluster"]["worker"][2] == "localhost:2003"


def test_train_without_a_transform_output_says_run_first(tmp_path, capsys):
    assert main(["train", "--run-dir", str(tmp_path / "run"), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "no Transform output" in err and "tfxp run" in err
    assert not (tmp_path / "o").exists()  # nothing started, nothing written
