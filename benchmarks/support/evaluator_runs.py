"""Running an Evaluator (or Transform) executor again on a pipeline run's inputs, and reading its output back.

For the tests that hold the Evaluator's fast path against TFX's executor (TFMA):
the inputs and properties of a recorded execution come from ML Metadata, each
executor writes into its own folder, and the results are read back by TFMA's
loaders. Shared by benchmarks/transform_executor.py and the tests (tests/conftest.py
puts benchmarks/support on sys.path); the tests' assertions on the results are in
tests/e2e/evaluator_parity.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def evaluator_inputs(config, node: str = "Evaluator") -> tuple[dict, dict, dict]:
    """`node`'s last execution's (the rerun's) inputs and properties, from ML Metadata."""
    from ml_metadata.proto import metadata_store_pb2
    from tfx.orchestration import metadata
    from tfx.types import artifact_utils

    connection = metadata.sqlite_metadata_connection_config(config.metadata_path)
    with metadata.Metadata(connection) as m:
        store = m.store
        executions = [
            e
            for e in store.get_executions()
            if store.get_execution_types_by_id([e.type_id])[0].name.endswith(node)
        ]
        execution = max(executions, key=lambda e: e.id)
        events = store.get_events_by_execution_ids([execution.id])
        inputs: dict = {}
        for event in events:
            if event.type != metadata_store_pb2.Event.INPUT:
                continue
            key = event.path.steps[0].key
            [artifact] = store.get_artifacts_by_id([event.artifact_id])
            [atype] = store.get_artifact_types_by_id([artifact.type_id])
            inputs.setdefault(key, []).append(artifact_utils.deserialize_artifact(atype, artifact))
        properties = {
            k: v.string_value or v.int_value for k, v in execution.custom_properties.items()
        }
    return inputs, properties, execution


def run_executor(executor_class, inputs, properties, out: Path):
    from tfx.dsl.components.base import base_beam_executor
    from tfx.types import standard_artifacts

    evaluation = standard_artifacts.ModelEvaluation()
    evaluation.uri = str(out / "evaluation")
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(out / "blessing")
    Path(blessing.uri).mkdir(parents=True)
    outputs = {"evaluation": [evaluation], "blessing": [blessing]}
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=[], tmp_dir=str(out / "tmp"), unique_id="1"
    )
    executor_class(context).Do(inputs, outputs, dict(properties))
    return evaluation.uri, blessing


def metric_values(uri: str) -> dict:
    """(slice key, metric key) -> number (or the value's text) of every written metric,
    and TFMA's error records (e.g. a slice under `min_slice_size`) by their name."""
    import tensorflow_model_analysis as tfma

    values = {}
    for per_slice in tfma.load_metrics(uri):
        for name, value in per_slice.metrics.items():
            values[(str(per_slice.slice_key), name)] = str(value)
        for key_and_value in per_slice.metric_keys_and_values:
            value = key_and_value.value
            kind = value.WhichOneof("type")
            number = value.double_value.value if kind == "double_value" else str(value)
            values[(str(per_slice.slice_key), str(key_and_value.key))] = number
    return values


def plot_values(uri: str) -> dict:
    """(slice key, plot key, field path) -> number of every written plot: each
    confusion matrix's counts at each threshold, each calibration bucket's sums."""
    import tensorflow_model_analysis as tfma
    from google.protobuf import json_format

    def flat(value, path: str, into: dict) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                flat(v, f"{path}.{k}", into)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                flat(v, f"{path}[{i}]", into)
        else:
            into[path] = value

    values: dict = {}
    for per_slice in tfma.load_plots(uri):
        for key_and_value in per_slice.plot_keys_and_values:
            found: dict = {}
            flat(json_format.MessageToDict(key_and_value.value), "", found)
            for path, number in found.items():
                values[(str(per_slice.slice_key), str(key_and_value.key), path)] = number
    return values


def file_names(uri: str) -> list[str]:
    return sorted(p.name for p in Path(uri).iterdir())


def validation_result(uri: str):
    """TFMA's validation result, its per-slice and per-spec records in a stable order
    (TFMA's combiner adds them in the order its workers finish)."""
    import tensorflow_model_analysis as tfma

    result = tfma.load_validation_result(uri)
    for repeated in (
        result.metric_validations_per_slice,
        result.validation_details.slicing_details,
    ):
        ordered = sorted(repeated, key=lambda v: v.SerializeToString(deterministic=True))
        del repeated[:]
        repeated.extend(ordered)
    return result


def run_transform(
    executor_class, inputs: dict, properties: dict, out: Path, beam_args=("--runner=FnApiRunner",)
):
    """`executor_class` on Transform's inputs, writing under `out`: (graph, examples) artifacts."""
    from tfx.dsl.components.base import base_beam_executor
    from tfx.types import standard_artifacts

    graph = standard_artifacts.TransformGraph()
    graph.uri = str(out / "transform_graph")
    examples = standard_artifacts.Examples()
    examples.uri = str(out / "transformed_examples")
    outputs = {"transform_graph": [graph], "transformed_examples": [examples]}
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=list(beam_args), tmp_dir=str(out / "tmp"), unique_id="1"
    )
    executor_class(context).Do(inputs, outputs, dict(properties))
    return graph, examples


def prepared_run(rows: int, work: Path, to_node: str) -> Path:
    """A run folder holding `rows` generated taxi rows run in-process up to `to_node`
    (its ML Metadata records the node's inputs), for a benchmark to run executors on."""
    tfxp = str(Path(sys.executable).parent / "tfxp")
    data, run = work / "data", work / "run"
    print(f"[prepare] {rows:,} taxi rows, pipeline up to {to_node} in {run}", flush=True)
    subprocess.run(
        [tfxp, "data", "generate", "taxi", "--rows", str(rows), "--no-check"]
        + ["--data-root", str(data)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        [tfxp, "run", "--dataset", "taxi", "--data-root", str(data), "--run-dir", str(run)]
        + ["--to-node", to_node, "--beam", "in-process"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return run
