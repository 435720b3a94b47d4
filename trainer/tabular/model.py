"""The Keras model over transformed tabular features: one architecture for every table.

Numeric features (z-scores and is-missing indicators) enter as they are;
vocabulary and bucket ids are one-hot encoded. A small dense tower ends in a
head for the task: a sigmoid (binary), a softmax over the classes
(multiclass), or a linear unit rescaled to the label's mean and spread
(regression, trained on plain MSE in the label's own units, so TFMA's RMSE
is in those units too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import tensorflow as tf
import tf_keras as keras

from trainer.fast_steps import FastStepModel
from trainer.tabular.features import TabularSpec, missing_name, transformed_name


def build_model(
    spec: TabularSpec,
    *,
    vocab_sizes: Mapping[str, int],
    missing_indicators: Sequence[str] = (),
    label_mean: float = 0.0,
    label_std: float = 1.0,
    hidden_units: Sequence[int] = (64, 32),
    learning_rate: float = 0.003,
) -> keras.Model:
    """Builds and compiles the model.

    Args:
      spec: the dataset's label, task, classes and feature treatments.
      vocab_sizes: per vocabulary feature, the ids the transform emits
        (vocabulary size + OOV buckets).
      missing_indicators: features with a `<name>_missing` input.
      label_mean, label_std: regression only, the output's initial scale.
    """
    inputs: dict[str, keras.Input] = {}
    parts: list[tf.Tensor] = []
    for feature in spec.features:
        name = transformed_name(feature.name)
        if feature.treatment == "zscore":
            inputs[name] = keras.layers.Input(name=name, shape=(1,))
            parts.append(inputs[name])
        else:
            tokens = (
                feature.buckets + 1
                if feature.treatment == "bucketize"
                else vocab_sizes[feature.name]
            )
            inputs[name] = keras.layers.Input(name=name, shape=(1,), dtype=tf.int64)
            parts.append(
                keras.layers.CategoryEncoding(num_tokens=tokens, output_mode="one_hot")(
                    inputs[name]
                )
            )
        if feature.name in missing_indicators:
            key = missing_name(feature.name)
            inputs[key] = keras.layers.Input(name=key, shape=(1,))
            parts.append(inputs[key])

    x = keras.layers.concatenate(parts, name="features") if len(parts) > 1 else parts[0]
    for i, units in enumerate(hidden_units):
        x = keras.layers.Dense(units, activation="relu", name=f"hidden_{i}")(x)

    if spec.task == "binary":
        output = keras.layers.Dense(1, activation="sigmoid", name="probability")(x)
        loss = keras.losses.BinaryCrossentropy()
        metrics = [keras.metrics.BinaryAccuracy(name="binary_accuracy"), keras.metrics.AUC()]
    elif spec.task == "multiclass":
        output = keras.layers.Dense(spec.num_classes, activation="softmax", name="probabilities")(x)
        loss = keras.losses.SparseCategoricalCrossentropy()
        metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
    else:
        scaled = keras.layers.Dense(1, name="scaled_prediction")(x)
        output = keras.layers.Rescaling(
            scale=max(label_std, 1e-6), offset=label_mean, name="prediction"
        )(scaled)
        loss = keras.losses.MeanSquaredError()
        metrics = [keras.metrics.RootMeanSquaredError(name="rmse")]

    model = FastStepModel(inputs=inputs, outputs=output)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=learning_rate), loss=loss, metrics=metrics
    )
    return model
