"""Running an Evaluator executor again on a pipeline run's inputs, and reading its output back.

For the tests that hold the Evaluator's fast path against TFX's executor (TFMA):
the inputs and properties of a recorded execution come from ML Metadata, each
executor writes into its own folder, and the results are read back by TFMA's
loaders. (Importable: tests/e2e is on sys.path.)
"""

from __future__ import annotations

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


def fast_and_tfma(inputs, properties, out: Path, caplog) -> tuple[tuple, tuple]:
    """The sliced Evaluator's executor (which must take the fast path) and its TFMA-only
    twin on the same inputs: ((uri, blessing), (uri, blessing))."""
    import logging

    from components.evaluation.slicing import evaluator as sliced

    with caplog.at_level(logging.INFO):
        ours = run_executor(sliced.Executor, inputs, properties, out / "o")
        assert "Evaluator: fast path" in caplog.text
        theirs = run_executor(sliced.TfmaExecutor, inputs, properties, out / "t")
        assert (
            "Evaluator: TFMA path (fast path does not cover: the fast path is turned off"
            in caplog.text
        )
    return ours, theirs


def assert_same_evaluation(ours: tuple, theirs: tuple) -> dict:
    """Every metric of every slice to 1e-6 (TFMA's error records verbatim), the same
    validation result, blessing, blessing message and files. Returns our metrics."""
    import pytest

    from components.evaluation.slicing import evaluator as sliced

    (ours_uri, ours_blessing), (tfma_uri, tfma_blessing) = ours, theirs
    values, expected = metric_values(ours_uri), metric_values(tfma_uri)
    assert values.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, float):
            assert values[key] == pytest.approx(value, abs=1e-6, nan_ok=True), key
        else:
            assert values[key] == value, key
    assert str(validation_result(ours_uri)) == str(validation_result(tfma_uri))
    for name in ("blessed", sliced.MESSAGE_PROPERTY):
        assert ours_blessing.get_custom_property(name) == tfma_blessing.get_custom_property(name)
    assert file_names(ours_blessing.uri) == file_names(tfma_blessing.uri)
    assert file_names(ours_uri) == file_names(tfma_uri)
    return values
