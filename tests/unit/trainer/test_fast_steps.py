"""trainer.fast_steps: every trainer's model trains without AutoGraph converting Keras.

AutoGraph converting tf_keras' step functions cost the digits Trainer 21.5 of its
43.6 s (the image CNN was a plain keras.Model); these tests fail if FastStepModel
stops skipping it or a trainer's model goes back to a plain keras.Model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.autograph.impl import api
from tensorflow.python.autograph.pyct import transpiler

from trainer.fast_steps import FastStepModel


@contextlib.contextmanager
def conversions() -> Iterator[list[str]]:
    """Names of the functions AutoGraph converts inside the block (with an empty
    conversion cache: what an earlier test converted is converted again)."""
    converted: list[str] = []
    real = transpiler.GenericTranspiler.transform_function

    def recording(self, fn, user_context):
        converted.append(f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}")
        return real(self, fn, user_context)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(transpiler.GenericTranspiler, "transform_function", recording)
        mp.setattr(api, "_TRANSPILER", api.PyToTF())
        yield converted


def _keras_conversions(model, features, labels) -> list[str]:
    data = tf.data.Dataset.from_tensor_slices((features, labels)).batch(4)
    with conversions() as converted:
        model.fit(data, epochs=1, steps_per_epoch=1, validation_data=data, verbose=0)
        model.predict(data, verbose=0)
    return [name for name in converted if name.startswith("tf_keras.")]


def test_the_probe_sees_autograph_conversions():
    """Without this, the tests below would pass with a probe that never fires."""
    with conversions() as converted:

        def add_one(x):
            return x + 1

        tf.function(add_one)(tf.constant(1))
    assert any(name.endswith("add_one") for name in converted), converted


# What AutoGraph converted when a model's steps were not excluded: the steps
# themselves and the Keras machinery they call (over a hundred functions), and
# with the steps excluded, still Keras' one-step functions around them
# (train_function, step_function, reduce_per_replica and what it calls: ~2 CPU-s
# a taxi Trainer run). Only Keras' small tf.function around a metric's result is
# converted now; it is not counted.
def _steps_converted(names: list[str]) -> list[str]:
    return [n for n in names if not n.startswith("tf_keras.src.metrics.")]


def test_fast_step_model_trains_without_converting_keras():
    import tf_keras as keras

    inputs = keras.Input((3,), name="x")
    model = FastStepModel(inputs={"x": inputs}, outputs=keras.layers.Dense(1)(inputs))
    model.compile("sgd", "mse", metrics=["mae"])
    features = {"x": np.zeros((8, 3), np.float32)}
    assert _steps_converted(_keras_conversions(model, features, np.zeros(8))) == []


def test_every_trainer_builds_a_fast_step_model():
    from trainer.image.model import build_cnn
    from trainer.tabular.features import tabular_spec
    from trainer.tabular.model import build_model
    from trainer.taxi.model import build_keras_model

    spec = tabular_spec(
        {
            "tabular": {
                "label": "y",
                "task": "binary",
                "classes": ["a", "b"],
                "features": {"size": {"treatment": "zscore"}},
            }
        }
    )
    assert isinstance(build_keras_model(hidden_units=(4,)), FastStepModel)
    assert isinstance(build_model(spec, vocab_sizes={}, hidden_units=(4,)), FastStepModel)
    assert isinstance(build_cnn((8, 8, 1), 3, filters=(4,), dense_units=8), FastStepModel)
