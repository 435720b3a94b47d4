"""Transform's fast path against TFX's stock executor on a run's own Transform inputs.

A plain module (tests/e2e is on sys.path); the executors run through
benchmarks/support/evaluator_runs.py's `run_transform`, which the benchmarks use too. `compare_executors` reruns the last
Transform execution of a run (its inputs and exec properties from ML Metadata)
with TFX's executor and with `components.fast.transform`, into two folders, and
asserts the outputs agree:

- every transformed example, in order, feature by feature: ints and bytes
  exactly, floats to 1e-6 (relative and absolute). The analysis is TFX's own in
  both, but Beam sums an analyzer's batches in an order that depends on its
  batch sizes, so a mean or variance can differ in its last bit between any two
  TFX runs;
- the transform graph's files: the same file names, and every file but the
  saved model (vocabularies, asset map, both schemas) byte for byte; the graph's constants (analyzer outputs) equal, floats to 1e-6 relative,
  except the two runs' own output paths;
- split names, and the file names of every split folder.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from evaluator_runs import evaluator_inputs, run_transform  # benchmarks/support, shared

SAVED_MODEL = "transform_fn/saved_model.pb"


def transformed_columns(examples_uri: str) -> dict[tuple[str, str], list[tuple]]:
    """(split folder, feature) -> each example's values, in file and record order."""
    import tensorflow as tf

    columns: dict[tuple[str, str], list[tuple]] = {}
    for folder in sorted(Path(examples_uri).glob("Split-*")):
        files = sorted(str(p) for p in folder.iterdir())
        for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
            example = tf.train.Example.FromString(record.numpy())
            for name, feature in example.features.feature.items():
                values = tuple(getattr(feature, feature.WhichOneof("kind")).value)
                columns.setdefault((folder.name, name), []).append(values)
    return columns


def graph_constants(graph_uri: str) -> dict[str, np.ndarray]:
    """Every Const node of the transform graph (analyzer outputs among them), by name."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(graph_uri) / "transform_fn" / "saved_model.pb").read_bytes())
    return {
        node.name: tf.make_ndarray(node.attr["value"].tensor)
        for graph in saved.meta_graphs
        for node in graph.graph_def.node
        if node.op == "Const"
    }


def assert_same_examples(ours: str, theirs: str) -> int:
    """Asserts the transformed examples agree (see the module doc); returns their count."""
    ours_columns, their_columns = transformed_columns(ours), transformed_columns(theirs)
    assert ours_columns.keys() == their_columns.keys() and their_columns
    for key, their_values in their_columns.items():
        our_values = ours_columns[key]
        assert len(our_values) == len(their_values), key
        if their_values and their_values[0] and isinstance(their_values[0][0], float):
            assert [len(v) for v in our_values] == [len(v) for v in their_values], key
            np.testing.assert_allclose(
                np.concatenate([np.asarray(v, np.float64) for v in our_values]),
                np.concatenate([np.asarray(v, np.float64) for v in their_values]),
                rtol=1e-6,
                atol=1e-6,
                err_msg=str(key),
            )
        else:
            assert our_values == their_values, key
    per_split = {split: len(values) for (split, _), values in their_columns.items()}
    return sum(per_split.values())


def _files(root: str) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*") if p.is_file())


def assert_same_graph(ours: str, theirs: str) -> None:
    """Asserts the transform graphs' files and constants agree (see the module doc)."""
    assert _files(ours) == _files(theirs)
    for name in _files(theirs):
        if name != SAVED_MODEL:  # its constants are compared below
            assert (Path(ours) / name).read_bytes() == (Path(theirs) / name).read_bytes(), name
    ours_constants, their_constants = graph_constants(ours), graph_constants(theirs)
    assert ours_constants.keys() == their_constants.keys()
    for name, theirs_value in their_constants.items():
        value = ours_constants[name]
        if theirs_value.dtype.kind in "fc":
            np.testing.assert_allclose(value, theirs_value, rtol=1e-6, err_msg=name)
        elif theirs_value.dtype == object and str(theirs) in str(theirs_value):
            # A vocabulary's path in the run's own temp folder: the same file name.
            assert str(value).replace(str(ours), "") == str(theirs_value).replace(
                str(theirs), ""
            ), name
        else:
            np.testing.assert_array_equal(value, theirs_value, err_msg=name)


def compare_executors(config, tmp: Path, caplog) -> int:
    """Reruns the last Transform execution with both executors; returns the example count."""
    from tfx.components.transform import executor as stock

    from components.fast.transform import executor as fast

    # A node's last execution's inputs and properties, from ML Metadata.
    inputs, properties, _ = evaluator_inputs(config, node="Transform")
    with caplog.at_level(logging.INFO):
        ours_graph, ours_examples = run_transform(fast.Executor, inputs, properties, tmp / "ours")
    assert "Transform: fast path" in caplog.text
    their_graph, their_examples = run_transform(stock.Executor, inputs, properties, tmp / "tfx")
    assert_same_graph(ours_graph.uri, their_graph.uri)
    count = assert_same_examples(ours_examples.uri, their_examples.uri)
    assert ours_examples.split_names == their_examples.split_names
    for folder in Path(their_examples.uri).glob("Split-*"):
        ours_folder = Path(ours_examples.uri) / folder.name
        assert sorted(p.name for p in ours_folder.iterdir()) == sorted(
            p.name for p in folder.iterdir()
        )
    assert sorted(p.name for p in Path(ours_examples.uri).iterdir()) == sorted(
        p.name for p in Path(their_examples.uri).iterdir()
    ), "nothing but the split folders (no staging left)"
    return count
