"""The Keras wide-and-deep model over transformed taxi features."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf
import tf_keras as keras

from trainer.fast_steps import FastStepModel
from trainer.taxi import features as f


def build_keras_model(
    hidden_units: Sequence[int] = (64, 32),
    learning_rate: float = 0.003,
    vocab_sizes: dict[str, int] | None = None,
) -> keras.Model:
    """Builds and compiles the model.

    Args:
      hidden_units: sizes of the deep tower's dense layers.
      learning_rate: Adam's learning rate.
      vocab_sizes: per vocabulary feature (raw name), the number of ids the
        transform produces (vocabulary size + OOV buckets). Defaults to the
        maximum the transform can emit.

    Inputs are named after the transformed features, each of shape (1,).
    """
    vocab_sizes = vocab_sizes or {}
    dense_inputs = {
        f.transformed_name(k): keras.layers.Input(name=f.transformed_name(k), shape=(1,))
        for k in f.DENSE_FLOAT_FEATURE_KEYS
    }
    one_hot: list[tf.Tensor] = []
    int_inputs: dict[str, keras.Input] = {}

    def add_categorical(key: str, num_tokens: int) -> None:
        name = f.transformed_name(key)
        inp = keras.layers.Input(name=name, shape=(1,), dtype=tf.int64)
        int_inputs[name] = inp
        one_hot.append(
            keras.layers.CategoryEncoding(num_tokens=num_tokens, output_mode="one_hot")(inp)
        )

    for key in f.VOCAB_FEATURE_KEYS:
        add_categorical(key, vocab_sizes.get(key, f.VOCAB_SIZE + f.OOV_SIZE))
    for key in f.BUCKET_FEATURE_KEYS:
        add_categorical(key, f.FEATURE_BUCKET_COUNT)
    for key, upper in f.CATEGORICAL_FEATURE_MAX.items():
        add_categorical(key, upper)

    wide = keras.layers.concatenate(one_hot, name="wide")
    deep = keras.layers.concatenate([*dense_inputs.values(), wide], name="deep_input")
    for i, units in enumerate(hidden_units):
        deep = keras.layers.Dense(units, activation="relu", name=f"deep_{i}")(deep)
    logits = keras.layers.Dense(1, name="logits")(
        keras.layers.concatenate([deep, wide], name="wide_and_deep")
    )
    probability = keras.layers.Activation("sigmoid", name="probability")(logits)

    model = FastStepModel(inputs={**dense_inputs, **int_inputs}, outputs=probability)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=learning_rate),
        loss=keras.losses.BinaryCrossentropy(),
        metrics=[keras.metrics.BinaryAccuracy(name="binary_accuracy")],
    )
    return model
