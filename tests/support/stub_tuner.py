"""A tuner_fn for the real worker processes of tests/unit/trainer/test_parallel_trials.py: no data, no
model. A trial's score is its learning rate; each worker notes the cores and TensorFlow
threads it runs with in its working dir."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace


class _Search:
    def __init__(self, working_dir: str):
        self._dir = Path(working_dir)

    def score(self, hp, trial_id=None) -> float:
        import tensorflow as tf

        self._dir.mkdir(parents=True, exist_ok=True)
        (self._dir / "worker.json").write_text(
            json.dumps(
                {
                    "cores": sorted(os.sched_getaffinity(0)),
                    "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
                    "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
                }
            )
        )
        return float(hp.get("learning_rate"))


def tuner_fn(fn_args):
    return SimpleNamespace(tuner=_Search(fn_args.working_dir))
