"""BatchInference: the pipeline scores a span of rows with the model it just trained, if blessed.

TFX's BulkInferrer writes PredictionLog protos that need TensorFlow Serving's
protos to read, and scores only Examples an ExampleGen ingested. This step
reads the span's raw CSV files (a span of unlabelled rows needs no ingestion
run), and writes what a person or a spreadsheet reads: `predictions.csv`
(file, line, key columns, class probabilities and class, or the value),
the same rows as `predictions.tfrecord.gz` (tf.Examples), `skipped_rows.csv`
and `summary.json` (components/batch_inference/output.py).

Inputs: `model` (the Trainer's) and `model_blessing` (the Evaluator's). A
model that was not blessed scores nothing: the output artifact records
`scored = 0` and why, as TFX's BulkInferrer and Pusher do. The span's files
and their content hash are execution parameters, so the step is cached until
the model or the data changes.
"""

from __future__ import annotations

import json
import os
import types as pytypes
from typing import Any

from absl import logging
from tfx.dsl.components.base import executor_spec
from tfx.types import component_spec, standard_artifacts

from components.base import component
from components.batch_inference import serving
from components.batch_inference.output import PredictionsWriter
from components.batch_inference.scoring import RowSpec, score_files
from components.io.content_fingerprint import files_sha256
from components.io.log_policy import Applier, LogPolicy

MODEL_KEY = "model"
BLESSING_KEY = "model_blessing"
PREDICTIONS_KEY = "predictions"
# Where TFX's Trainer puts the serving SavedModel inside a Model artifact.
SERVING_MODEL_DIR = "Format-Serving"


class BatchInferenceSpec(component_spec.ComponentSpec):
    PARAMETERS = {
        # The span's folder and files (relative to data_root), and their content hash: the cache key.
        "data_root": component_spec.ExecutionParameter(type=str),
        "span": component_spec.ExecutionParameter(type=int),
        "files": component_spec.ExecutionParameter(type=str),  # JSON list
        "content_sha256": component_spec.ExecutionParameter(type=str),
        # How rows are read: schema column types (JSON), the label, key columns, encoding.
        "columns": component_spec.ExecutionParameter(type=str),
        "label_key": component_spec.ExecutionParameter(type=str),
        "key_columns": component_spec.ExecutionParameter(type=str),  # JSON list
        "nan_free": component_spec.ExecutionParameter(type=str),  # JSON list
        "encoding": component_spec.ExecutionParameter(type=str),
        # A tabular model's task and classes (JSON), or "" for a single-output model.
        "tabular": component_spec.ExecutionParameter(type=str),
        "batch_size": component_spec.ExecutionParameter(type=int),
        # The dataset's request_log: policy (LogPolicy JSON, "" = none): echoed key
        # columns are hashed or dropped as the request log does.
        "log_policy": component_spec.ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {
        MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model),
        BLESSING_KEY: component_spec.ChannelParameter(type=standard_artifacts.ModelBlessing),
    }
    OUTPUTS = {
        PREDICTIONS_KEY: component_spec.ChannelParameter(type=standard_artifacts.InferenceResult)
    }


def _tabular(text: str) -> Any:
    if not text:
        return None
    raw = json.loads(text)
    return pytypes.SimpleNamespace(task=raw["task"], classes=tuple(raw.get("classes") or ()))


class BatchInferenceExecutor(component.Executor):
    def run(self, execution: component.Execution) -> None:
        exec_properties = execution.properties
        out = execution.output(PREDICTIONS_KEY)
        blessing = execution.input(BLESSING_KEY)
        if not blessing.get_int_custom_property("blessed"):
            out.set_int_custom_property("scored", 0)
            out.set_string_custom_property("reason", "the model was not blessed")
            logging.info("BatchInference: the model was not blessed; nothing scored.")
            return
        model = execution.input(MODEL_KEY)
        model_dir = os.path.join(model.uri, SERVING_MODEL_DIR)
        data_root = exec_properties["data_root"]
        files = [os.path.join(data_root, f) for f in json.loads(exec_properties["files"])]
        digest, _ = files_sha256(files, data_root)
        if digest != exec_properties["content_sha256"]:
            raise RuntimeError(
                f"the files of span {exec_properties['span']} in {data_root} changed after the "
                "pipeline was built; rerun the pipeline to score what is there now"
            )
        tabular = _tabular(exec_properties["tabular"])
        spec = RowSpec(
            types=json.loads(exec_properties["columns"]),
            label_key=exec_properties["label_key"],
            key_columns=tuple(json.loads(exec_properties["key_columns"])),
            encoding=exec_properties["encoding"],
            finite=frozenset(json.loads(exec_properties["nan_free"])),
        )
        serve = serving.load_serving_signature(model_dir)
        span_dir = os.path.dirname(files[0])
        policy = Applier(LogPolicy.from_json(exec_properties.get("log_policy") or ""))
        with PredictionsWriter(
            out.uri,
            spec.key_columns,
            serving.prediction_columns(tabular),
            tabular,
            base=span_dir,
            policy=policy,
        ) as writer:
            report = score_files(
                serve,
                files,
                spec,
                writer,
                tabular=tabular,
                batch_size=exec_properties["batch_size"],
            )
            properties = {
                "span": exec_properties["span"],
                "data_root": data_root,
                "content_sha256": digest,
                "rows_scored": report.rows_scored,
                "rows_skipped": report.rows_skipped,
            }
            writer.publish({**properties, "rows_read": report.rows_read, "model_dir": model_dir})
        out.set_int_custom_property("scored", 1)
        for key, value in properties.items():
            if isinstance(value, int):
                out.set_int_custom_property(key, value)
            else:
                out.set_string_custom_property(key, value)
        logging.info(
            "BatchInference: span %s, %d rows scored, %d skipped (skipped_rows.csv) -> %s",
            exec_properties["span"],
            report.rows_scored,
            report.rows_skipped,
            out.uri,
        )


class BatchInference(component.Component):
    """Scores a span of raw CSV rows with a blessed model; predictions as CSV and TFRecords."""

    SPEC_CLASS = BatchInferenceSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(BatchInferenceExecutor)
    DEFAULTS = {
        "key_columns": (),
        "nan_free": (),
        "encoding": "utf-8",
        "tabular": None,
        "batch_size": 1024,
        "log_policy": "",
    }
    # Lists and mappings as the JSON parameters the Spec declares (sorted where
    # order carries no meaning, so the cache key does not depend on it).
    ENCODE = {
        "files": lambda files: json.dumps(sorted(files)),
        "columns": lambda columns: json.dumps(columns, sort_keys=True),
        "key_columns": lambda keys: json.dumps(list(keys)),
        "nan_free": lambda names: json.dumps(sorted(names)),
        "tabular": lambda tabular: json.dumps(tabular, sort_keys=True) if tabular else "",
    }
