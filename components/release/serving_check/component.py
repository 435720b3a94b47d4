"""The ServingCheck component: between the Evaluator and the Pusher, like TFX's InfraValidator.

Its output is an `InfraBlessing`, which TFX's Pusher (components/release/atomic_pusher.py)
takes as `infra_blessing`: a model that cannot load, needs project code, fails
on requests or disagrees with the Evaluator is not pushed. The artifact's
custom properties hold the verdict and its message, the load time, and p50/p99
latency at batch sizes 1 and 64 (ML Metadata); result.json and the fresh
process's log are in its folder.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from absl import logging
from tfx import types
from tfx.components.evaluator import constants as evaluator_constants
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, component_spec, standard_artifacts
from tfx.utils import io_utils

from components.base import component
from components.io.object_storage import scheme_of
from components.release.serving_check import warmup
from components.release.serving_check.check import check_model

MODEL_KEY = "model"
EXAMPLES_KEY = "examples"
MODEL_BLESSING_KEY = "model_blessing"
BLESSING_KEY = "blessing"
RESULT_FILE = "result.json"
# TFX's InfraValidator's marker files; the Pusher reads the `blessed` property.
BLESSED_FILE = "INFRA_BLESSED"
NOT_BLESSED_FILE = "INFRA_NOT_BLESSED"


def eval_rows(examples: types.Artifact, count: int, split: str = "eval") -> list[bytes]:
    """The first `count` serialized examples of the split (GZIP TFRecord shards)."""
    import tensorflow as tf

    pattern = os.path.join(artifact_utils.get_split_uri([examples], split), "*")
    files = sorted(tf.io.gfile.glob(pattern))
    if not files:
        raise FileNotFoundError(f"no {split} examples at {pattern}")
    records = tf.data.TFRecordDataset(files, compression_type="GZIP").take(count)
    return [r.numpy() for r in records]


def _record(blessing: types.Artifact, result: Any, skipped: str = "") -> None:
    blessing.set_int_custom_property("blessed", int(bool(result and result.passed)))
    blessing.set_string_custom_property("verdict", result.verdict if result else "skipped")
    blessing.set_string_custom_property("message", result.message if result else skipped)
    if result is None:
        return
    blessing.set_int_custom_property("rows", result.rows)
    for name, value in (
        ("load_seconds", result.load_seconds),
        ("max_abs_diff", result.max_abs_diff),
        *((f"latency_{k}_ms", v) for k, v in result.latency_ms.items()),
    ):
        if value is not None:
            blessing.set_float_custom_property(name, float(value))


class Executor(component.Executor):
    def run(self, execution: component.Execution) -> None:
        blessing = execution.output(BLESSING_KEY)
        model_blessing = execution.inputs_of(MODEL_BLESSING_KEY)
        if model_blessing and (
            model_blessing[0].get_int_custom_property(
                evaluator_constants.ARTIFACT_PROPERTY_BLESSED_KEY
            )
            != 1
        ):
            # Nothing will be pushed: save the work.
            _record(blessing, None, "not checked: the Evaluator did not bless the model")
            io_utils.write_string_file(os.path.join(blessing.uri, NOT_BLESSED_FILE), "")
            return
        model = execution.input(MODEL_KEY)
        model_dir = os.path.join(model.uri, "Format-Serving")
        if not fileio.isdir(model_dir):
            model_dir = model.uri
        rows = eval_rows(execution.input(EXAMPLES_KEY), int(execution.properties["rows"]))
        with tempfile.TemporaryDirectory(prefix="serving-check-") as local:
            if scheme_of(model_dir):
                # The fresh process has TensorFlow and nothing else, so no filesystem
                # plugin for buckets (tensorflow-io): it gets a local copy, as a model
                # server's loader would fetch one.
                copy = os.path.join(local, "model")
                io_utils.copy_dir(model_dir, copy)
                model_dir = copy
            local_blessing = not scheme_of(blessing.uri)
            result = check_model(
                model_dir,
                rows,
                signature=execution.properties["signature"],
                label_key=execution.properties["label_key"],
                work_dir=os.path.join(blessing.uri if local_blessing else local, "work"),
            )
        _record(blessing, result)
        if result.passed:
            _write_warmup(blessing, rows, execution.properties)
        io_utils.write_string_file(
            os.path.join(blessing.uri, RESULT_FILE), json.dumps(result.to_dict(), indent=1)
        )
        marker = BLESSED_FILE if result.passed else NOT_BLESSED_FILE
        io_utils.write_string_file(os.path.join(blessing.uri, marker), "")
        if result.passed:
            logging.info("Serving check %s", result.message)
        else:
            logging.error("Serving check: the model will not be pushed: %s", result.message)


def _write_warmup(blessing: types.Artifact, rows: list[bytes], exec_properties: dict) -> None:
    """TF Serving's warmup requests from the checked rows (components/release/serving_check/warmup.py)."""
    label_key = exec_properties["label_key"]
    examples = [warmup.without_label(r, label_key) for r in rows[: warmup.MAX_BATCH]]
    path = os.path.join(blessing.uri, warmup.FILE_NAME)
    count = warmup.write_warmup_requests(path, examples, exec_properties["signature"])
    logging.info("Serving check: %d warmup requests written to %s", count, path)


class ServingCheckSpec(component_spec.ComponentSpec):
    PARAMETERS = {
        "signature": component_spec.ExecutionParameter(type=str),
        "label_key": component_spec.ExecutionParameter(type=str),
        "rows": component_spec.ExecutionParameter(type=int),
    }
    INPUTS = {
        MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model),
        EXAMPLES_KEY: component_spec.ChannelParameter(type=standard_artifacts.Examples),
        MODEL_BLESSING_KEY: component_spec.ChannelParameter(
            type=standard_artifacts.ModelBlessing, optional=True
        ),
    }
    OUTPUTS = {BLESSING_KEY: component_spec.ChannelParameter(type=standard_artifacts.InfraBlessing)}


class ServingCheck(component.Component):
    """Loads and queries the candidate in a fresh process; blesses it for the Pusher or not."""

    SPEC_CLASS = ServingCheckSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
