"""Tiny SavedModels for tests/unit/components/release/serving_check/test_serving_check.py: one a server can run, and broken ones.

Each takes serialized tf.Examples with a float feature `x` (and `label`) through
`serving_default`, as the project's models do.
"""

from __future__ import annotations

import tensorflow as tf

SPEC = [tf.TensorSpec([None], tf.string, name="examples")]


def _parse(serialized: tf.Tensor, key: str) -> tf.Tensor:
    spec = {key: tf.io.FixedLenFeature([1], tf.float32, default_value=0.0)}
    return tf.io.parse_example(serialized, spec)[key]


def python_side_effect(x):
    # Lives in this test helper module: a fresh process without the project's
    # code on its path has no such function registered.
    return x * 2.0


def save(path: str, kind: str) -> str:
    """kind: "good", "python" (its graph calls Python), or "label" (reads the label);
    each answers a number `y` and a text `class`."""
    module = tf.Module()

    @tf.function(input_signature=SPEC, autograph=False)
    def serve(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        x = _parse(serialized, "x")
        if kind == "python":
            y = tf.py_function(python_side_effect, [x], tf.float32)
            y.set_shape(x.shape)
        elif kind == "label":
            y = x * 2.0 + _parse(serialized, "label")
        else:
            y = x * 2.0
        # A text output too, as the tabular trainer's class names.
        return {"y": y, "class": tf.where(x > 1.0, tf.constant(b"big"), tf.constant(b"small"))}

    module.serve = serve
    tf.saved_model.save(module, path, signatures={"serving_default": serve})
    return path


def rows(count: int = 20) -> list[bytes]:
    out = []
    for i in range(count):
        example = tf.train.Example()
        example.features.feature["x"].float_list.value.append(i / 7)
        example.features.feature["label"].float_list.value.append(float(i % 2))
        out.append(example.SerializeToString())
    return out
