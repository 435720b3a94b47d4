"""The generic tabular trainer's pieces: options, label index, model heads, serving outputs,
and the preprocessing_fn on a tiny table (missing values included)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from trainer.base import label_index, serving_outputs
from trainer.tabular.features import TabularSpec, tabular_spec
from trainer.tabular.model import build_model

FEATURES = {
    "size": {"treatment": "zscore"},
    "age": {"treatment": "bucketize", "buckets": 3},
    "colour": {"treatment": "vocabulary"},
}


def spec(task: str, classes=("a", "b", "c")) -> TabularSpec:
    classes = () if task == "regression" else classes[:2] if task == "binary" else classes
    return tabular_spec(
        {"tabular": {"label": "y", "task": task, "classes": list(classes), "features": FEATURES}}
    )


def test_options_come_from_custom_config():
    s = spec("multiclass")
    assert s.label_xf == "y_xf" and s.num_classes == 3
    assert [f.name for f in s.features] == ["age", "colour", "size"]
    with pytest.raises(ValueError, match="custom_config"):
        tabular_spec({})
    with pytest.raises(ValueError, match="at least 2 classes"):
        TabularSpec.from_dict({"label": "y", "task": "binary", "classes": ["a"]})


def test_label_index_compares_text_as_text_and_numbers_as_numbers():
    assert label_index(tf.constant(["b", "a", "c"]), ("a", "b", "c")).numpy().tolist() == [1, 0, 2]
    ints = label_index(tf.constant([2, 0], tf.int64), ("0", "1", "2"))
    assert ints.numpy().tolist() == [2, 0]
    floats = label_index(tf.constant([1.0, 0.0]), ("0", "1"))
    assert floats.numpy().tolist() == [1, 0]


@pytest.mark.parametrize("task, width", [("binary", 1), ("multiclass", 3), ("regression", 1)])
def test_model_heads(task, width):
    model = build_model(
        spec(task),
        vocab_sizes={"colour": 5},
        missing_indicators=["size"],
        label_mean=100.0,
        label_std=10.0,
        hidden_units=(8,),
    )
    batch = {
        "size_xf": tf.constant([[0.1], [-1.0]]),
        "size_missing": tf.constant([[0.0], [1.0]]),
        "age_xf": tf.constant([[0], [3]], tf.int64),  # bucket 3: the blanks
        "colour_xf": tf.constant([[1], [4]], tf.int64),
    }
    out = model(batch).numpy()
    assert out.shape == (2, width)
    if task == "multiclass":
        np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)
    if task == "regression":  # starts near the label's scale, not near 0
        assert np.all(np.abs(out - 100.0) < 60.0)
    outputs = serving_outputs(task, spec(task).classes, tf.constant(out))
    if task == "regression":
        assert set(outputs) == {"predictions"}
    else:
        assert set(outputs) == {"logistic" if task == "binary" else "probabilities", "class"}
        assert all(c in (b"a", b"b", b"c") for c in outputs["class"].numpy())


@pytest.mark.slow
def test_preprocessing_fn_fills_missing_values_and_indexes_the_label(tmp_path):
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from trainer.tabular.preprocessing import preprocessing_fn

    raw_spec = {
        "size": tf.io.VarLenFeature(tf.float32),
        "age": tf.io.FixedLenFeature([1], tf.int64),
        "colour": tf.io.VarLenFeature(tf.string),
        "y": tf.io.FixedLenFeature([1], tf.string),
    }
    rows = [
        {"size": [1.0], "age": [20], "colour": [b"red"], "y": [b"a"]},
        {"size": [], "age": [30], "colour": [], "y": [b"c"]},
        {"size": [3.0], "age": [40], "colour": [b"blue"], "y": [b"b"]},
    ]
    config = {
        "tabular": {
            "label": "y",
            "task": "multiclass",
            "classes": ["a", "b", "c"],
            "features": FEATURES,
        }
    }
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(raw_spec))
    with tft_beam.Context(temp_dir=str(tmp_path), force_tf_compat_v1=True):
        (out, _), _ = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: preprocessing_fn(inputs, config)
        )
    assert [r["y_xf"] for r in out] == [0, 2, 1]
    assert [r["size_missing"] for r in out] == [0.0, 1.0, 0.0]
    # z-scored over the present values (1 and 3): -1, the mean (0) for the blank, 1.
    np.testing.assert_allclose([r["size_xf"] for r in out], [-1.0, 0.0, 1.0], atol=1e-5)
    assert len({r["colour_xf"] for r in out}) == 3  # red, blue and the blank
