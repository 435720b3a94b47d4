"""The sequence model: per-step inputs (embeddings of categories, z-scored numbers) ->
a GRU or a 1-D convolution over the masked steps -> with the context features, a
small dense head. The mask comes from `sequence_length_xf`, so padding (to the
batch's longest sequence in training, to max_length at serving) never counts."""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from trainer.sequence.features import LENGTH_XF, OOV_BUCKETS, VOCABULARY, SequenceSpec
from trainer.sequence.features import transformed_name as xf


def _step_inputs(spec: SequenceSpec, vocab_sizes: dict[str, int], embedding_dim: int):
    inputs, steps = {}, []
    for name, treatment in spec.features.items():
        if treatment == VOCABULARY:
            x = keras.Input(shape=(None,), name=xf(name), dtype=tf.int64)
            # ids: 0 pads, 1..size in the vocabulary or its out-of-vocabulary bucket
            size = vocab_sizes[name] + OOV_BUCKETS + 1
            steps.append(keras.layers.Embedding(size, embedding_dim, name=f"{name}_embedding")(x))
        else:
            x = keras.Input(shape=(None,), name=xf(name), dtype=tf.float32)
            steps.append(keras.layers.Reshape((-1, 1), name=f"{name}_step")(x))
        inputs[xf(name)] = x
    return inputs, steps


def _context_inputs(spec: SequenceSpec, vocab_sizes: dict[str, int], embedding_dim: int):
    inputs, parts = {}, []
    for name, treatment in spec.context.items():
        if treatment == VOCABULARY:
            x = keras.Input(shape=(), name=xf(name), dtype=tf.int64)
            size = vocab_sizes[name] + OOV_BUCKETS + 1
            embedded = keras.layers.Embedding(size, embedding_dim, name=f"{name}_embedding")(x)
            parts.append(embedded)
        else:
            x = keras.Input(shape=(), name=xf(name), dtype=tf.float32)
            parts.append(keras.layers.Reshape((1,), name=f"{name}_column")(x))
        inputs[xf(name)] = x
    return inputs, parts


class MaskedPooling(keras.layers.Layer):
    """Mean and max over the steps a sequence has (padding left out), and its last step:
    with causal convolutions that step sees the sequence's final events, in order."""

    def call(self, x, mask):
        weights = tf.cast(tf.expand_dims(mask, -1), x.dtype)
        count = tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)
        mean = tf.reduce_sum(x * weights, axis=1) / count
        lowest = tf.reduce_min(x) - 1.0
        peak = tf.reduce_max(x * weights + lowest * (1.0 - weights), axis=1)
        last_index = tf.maximum(tf.reduce_sum(tf.cast(mask, tf.int32), axis=1) - 1, 0)
        last = tf.gather(x, last_index, axis=1, batch_dims=1)
        return tf.concat([mean, peak, last], axis=-1)


class LengthMask(keras.layers.Layer):
    """[batch] lengths -> [batch, steps] mask, as long as the steps tensor given."""

    def call(self, steps, lengths):
        return tf.sequence_mask(lengths, tf.shape(steps)[1])


def encode_steps(kind: str, steps: tf.Tensor, mask: tf.Tensor, units: int) -> tf.Tensor:
    """The sequence summary: the GRU's last state over the unmasked steps, or the masked
    mean, max and last step of three causal dilated convolutions (receptive field 15).

    The GRU is `RNN(GRUCell)`: the fused GRU layer adds a cuDNN branch to the graph that
    a CPU never runs but still pays to build."""
    if kind == "gru":
        return keras.layers.RNN(keras.layers.GRUCell(units), name="gru")(steps, mask=mask)
    h = keras.layers.Conv1D(units, 3, padding="causal", activation="relu", name="conv1")(steps)
    for i, rate in enumerate((2, 4)):
        h = keras.layers.Conv1D(
            units, 3, padding="causal", dilation_rate=rate, activation="relu", name=f"conv{i + 2}"
        )(h)
    return MaskedPooling(name="pool")(h, mask)


def head(spec: SequenceSpec, x: tf.Tensor, label_mean: float, label_std: float) -> tf.Tensor:
    if spec.task == "binary":
        return keras.layers.Dense(1, activation="sigmoid", name="output")(x)
    if spec.task == "multiclass":
        return keras.layers.Dense(len(spec.classes), activation="softmax", name="output")(x)
    scaled = keras.layers.Dense(1, name="scaled_output")(x)
    return keras.layers.Rescaling(label_std, offset=label_mean, name="output")(scaled)


def build_model(
    spec: SequenceSpec,
    vocab_sizes: dict[str, int],
    *,
    learning_rate: float = 0.003,
    embedding_dim: int = 8,
    dropout: float = 0.0,
    label_mean: float = 0.0,
    label_std: float = 1.0,
) -> keras.Model:
    """The compiled model on Transform's outputs (trainer/sequence/preprocessing.py)."""
    step_inputs, steps = _step_inputs(spec, vocab_sizes, embedding_dim)
    length = keras.Input(shape=(), name=LENGTH_XF, dtype=tf.int64)
    x = keras.layers.Concatenate(name="steps")(steps) if len(steps) > 1 else steps[0]
    mask = LengthMask(name="mask")(x, length)
    summary = encode_steps(spec.model, x, mask, spec.units)
    context_inputs, context = _context_inputs(spec, vocab_sizes, embedding_dim)
    joined = keras.layers.Concatenate(name="joined")([summary, *context]) if context else summary
    hidden = keras.layers.Dense(spec.units, activation="relu", name="hidden")(joined)
    if dropout:
        hidden = keras.layers.Dropout(dropout, name="dropout")(hidden)
    output = head(spec, hidden, label_mean, label_std)
    model = keras.Model({**step_inputs, LENGTH_XF: length, **context_inputs}, output)
    optimizer = keras.optimizers.Adam(learning_rate)
    if spec.task == "binary":
        loss, metrics = "binary_crossentropy", [keras.metrics.BinaryAccuracy(), keras.metrics.AUC()]
    elif spec.task == "multiclass":
        loss, metrics = (
            "sparse_categorical_crossentropy",
            [keras.metrics.SparseCategoricalAccuracy()],
        )
    else:
        loss, metrics = "mse", [keras.metrics.RootMeanSquaredError()]
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics)
    return model
