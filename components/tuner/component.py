"""TFX's Tuner with each trial's TensorBoard logs kept (docs/console.md).

TFX's executor runs the search in a temporary working directory, removed after the
run, and the trainers' `tuner_fn` sees only FnArgs. This executor names a folder in
the Tuner's own `tuner_results` artifact, `tensorboard/`, in the custom config the
`tuner_fn` reads (`TENSORBOARD_KEY`): the search (trainer/tuning.py) writes one
folder per trial there, `trial-<n>/` with `train/` and `validation/` as the Trainer's
and the trial's hyperparameters as a text summary. Then TFX's executor runs as is.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tfx.components.tuner import component as tfx_tuner
from tfx.components.tuner import executor as tfx_executor
from tfx.dsl.components.base import executor_spec
from tfx.types import artifact_utils, standard_component_specs

# The custom config's key for the trials' log folder (read by trainer/tuning.py).
TENSORBOARD_KEY = "trial_tensorboard_dir"
TENSORBOARD_DIR = "tensorboard"


class Executor(tfx_executor.Executor):
    """TFX's Tuner executor, the trials' TensorBoard folder named in the custom config."""

    def Do(
        self, input_dict: dict, output_dict: dict, exec_properties: dict[str, Any]
    ) -> None:  # TFX's name
        results = artifact_utils.get_single_uri(
            output_dict[standard_component_specs.TUNER_RESULTS_KEY]
        )
        custom = json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "{}")
        custom[TENSORBOARD_KEY] = os.path.join(results, TENSORBOARD_DIR)
        properties = {
            **exec_properties,
            standard_component_specs.CUSTOM_CONFIG_KEY: json.dumps(custom),
        }
        super().Do(input_dict, output_dict, properties)


class Tuner(tfx_tuner.Tuner):
    """TFX's Tuner (same spec, inputs and outputs) on the executor above."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
