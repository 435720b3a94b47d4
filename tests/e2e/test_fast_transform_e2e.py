"""Transform's fast path against TFX's own Transform executor, on the taxi data.

The session's taxi run up to Transform (15,000 rows, transform_output.py) took the
fast path; its Transform execution is then repeated by TFX's stock executor and
by the fast path on the same inputs, and every output compared
(transform_parity.py). The digits dataset's comparison is in test_image_e2e.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from evaluator_runs import evaluator_inputs
from transform_output import taxi_transform  # noqa: F401 (the session fixture)
from transform_parity import compare_executors

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_pipeline_ran_transform_on_the_fast_path(taxi_transform):  # noqa: F811
    logs = Path(taxi_transform.config.run_dir) / "logs"
    text = "".join(p.read_text() for p in logs.glob("*.log"))
    assert text.count("Transform: fast path") == 1
    assert "Transform: TFX path" not in text


def test_fast_path_equals_tfx_transform(taxi_transform, tmp_path, caplog):  # noqa: F811
    count = compare_executors(taxi_transform.config, tmp_path, caplog)
    assert count > 10_000  # both splits of the 15,000 rows
    # The ingest's examples: the analysis read them by their layout, and every taxi
    # output is one number per example (digits' are not: test_image_e2e.py).
    assert "the analysis read the examples by their layout" in caplog.text
    assert "transformed examples encoded column-wise" in caplog.text


def test_a_failing_split_publishes_nothing(taxi_transform, tmp_path):  # noqa: F811
    """A split that cannot be read ends the fast path before any split is published,
    and leaves no staging folder."""
    import tensorflow as tf
    import tensorflow_transform as tft
    from tfx.types import standard_artifacts

    from components.fast.transform import executor as fast
    from components.fast.transform.materialize import materialize

    config = taxi_transform.config
    inputs, properties, _ = evaluator_inputs(config, node="Transform")
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "transformed_examples")
    jobs = fast._jobs(inputs, {"transformed_examples": [examples]}, properties)
    broken = tmp_path / "broken.gz"
    broken.write_bytes(b"not a TFRecord file")
    jobs[-1] = type(jobs[-1])(jobs[-1].name, [str(broken)], jobs[-1].tfxio, jobs[-1].output_dir)
    graph = sorted(Path(config.pipeline_root).glob("Transform/transform_graph/*"))[-1]
    output = tft.TFTransformOutput(str(graph))
    with pytest.raises(tf.errors.OpError):
        materialize(
            jobs, output.transform_savedmodel_dir, output.transformed_metadata.schema, examples.uri
        )
    assert not Path(examples.uri).exists() or not any(Path(examples.uri).iterdir())


def test_a_late_refusal_runs_tfx_from_the_start(taxi_transform, tmp_path, monkeypatch, caplog):  # noqa: F811
    """When the writing refuses after TFX's analysis wrote the graph, the outputs are
    emptied and TFX's executor runs whole (it renames its graph onto empty folders only)."""
    import logging

    from transform_parity import assert_same_examples, run_transform

    from components.fast.transform import executor as fast
    from components.fast.transform.materialize import Uncovered

    def refuse(*_args):
        raise Uncovered("a refusal after the analysis")

    monkeypatch.setattr(fast, "materialize", refuse)
    inputs, properties, _ = evaluator_inputs(taxi_transform.config, node="Transform")
    with caplog.at_level(logging.INFO):
        graph, examples = run_transform(fast.Executor, inputs, properties, tmp_path / "ours")
    assert "Transform: TFX path (fast path does not cover: a refusal after the analysis)" in (
        caplog.text
    )
    pipeline_examples = sorted(
        Path(taxi_transform.config.pipeline_root).glob("Transform/transformed_examples/*")
    )[-1]
    assert assert_same_examples(examples.uri, str(pipeline_examples)) > 10_000
    assert (Path(graph.uri) / "transform_fn" / "saved_model.pb").exists()
