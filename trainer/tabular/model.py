"""The Keras model over transformed tabular features: one architecture for every table.

Numeric features (z-scores and is-missing indicators) enter as they are;
vocabulary and bucket ids are one-hot encoded; a date's parts enter as a
vector; a text's word ids are embedded and averaged over its words. A small dense tower ends in a
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
from trainer.tabular.features import Feature, TabularSpec, missing_name, transformed_name
from trainer.tabular.treatments import parts_of

# Width of a text feature's word embedding.
TEXT_EMBEDDING_DIM = 16


class WordMean(keras.layers.Layer):
    """Word ids ([batch, max_tokens], -1 past the last word) -> the mean of their
    embeddings; a value without words (a blank cell) gives zeros, not 0/0 (Keras'
    masked GlobalAveragePooling1D returns NaN for a row whose every step is masked)."""

    def __init__(self, words: int, dim: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.words, self.dim = words, dim
        self.embedding = keras.layers.Embedding(words, dim)

    def call(self, ids: tf.Tensor) -> tf.Tensor:
        present = tf.cast(ids >= 0, tf.float32)[..., None]
        vectors = self.embedding(tf.maximum(ids, 0)) * present
        return tf.reduce_sum(vectors, axis=1) / tf.maximum(tf.reduce_sum(present, axis=1), 1.0)

    def get_config(self) -> dict:
        return {**super().get_config(), "words": self.words, "dim": self.dim}


def _feature_input(
    feature: Feature, vocab_sizes: Mapping[str, int]
) -> tuple[keras.Input, tf.Tensor]:
    """(the model input of a transformed feature, what it contributes to the tower)."""
    name = transformed_name(feature.name)
    if feature.treatment == "zscore":
        inp = keras.layers.Input(name=name, shape=(1,))
        return inp, inp
    if feature.treatment in ("date", "timestamp"):
        inp = keras.layers.Input(name=name, shape=(len(parts_of(feature.treatment)),))
        return inp, inp
    inp = keras.layers.Input(
        name=name, shape=(feature.max_tokens if feature.treatment == "text" else 1,), dtype=tf.int64
    )
    if feature.treatment == "text":
        words = vocab_sizes[feature.name]
        return inp, WordMean(words, TEXT_EMBEDDING_DIM, name=f"{feature.name}_words")(inp)
    tokens = feature.buckets + 1 if feature.treatment == "bucketize" else vocab_sizes[feature.name]
    return inp, keras.layers.CategoryEncoding(num_tokens=tokens, output_mode="one_hot")(inp)


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
        inputs[transformed_name(feature.name)], part = _feature_input(feature, vocab_sizes)
        parts.append(part)
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
