"""tf.Transform preprocessing: the one definition used for training and serving."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft

from trainer.taxi import features as f


def fill_in_missing(x: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    """Densifies an optional feature into a rank-1 tensor, missing -> '' or 0.

    Optional CSV columns arrive as SparseTensors of shape [batch, 1]; the model
    wants one value per example.
    """
    if not isinstance(x, tf.sparse.SparseTensor):
        return tf.reshape(x, [-1]) if x.shape.rank and x.shape.rank > 1 else x
    default_value = "" if x.dtype == tf.string else 0
    return tf.squeeze(
        tf.sparse.to_dense(
            tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1]), default_value
        ),
        axis=1,
    )


def _as_vocab_input(x: tf.Tensor) -> tf.Tensor:
    # Census tracts are integer ids: their magnitude means nothing, so they go
    # through a vocabulary like strings do.
    return x if x.dtype == tf.string else tf.strings.as_string(x)


def preprocessing_fn(inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """Maps raw taxi features to model inputs (see trainer/taxi/features.py)."""
    outputs: dict[str, tf.Tensor] = {}
    for key in f.DENSE_FLOAT_FEATURE_KEYS:
        value = tf.cast(fill_in_missing(inputs[key]), tf.float32)
        outputs[f.transformed_name(key)] = tft.scale_to_z_score(value)

    for key in f.VOCAB_FEATURE_KEYS:
        outputs[f.transformed_name(key)] = tft.compute_and_apply_vocabulary(
            _as_vocab_input(fill_in_missing(inputs[key])),
            top_k=f.VOCAB_SIZE,
            num_oov_buckets=f.OOV_SIZE,
            vocab_filename=key,
        )

    for key in f.BUCKET_FEATURE_KEYS:
        outputs[f.transformed_name(key)] = tft.bucketize(
            tf.cast(fill_in_missing(inputs[key]), tf.float32), f.FEATURE_BUCKET_COUNT
        )

    for key, upper in f.CATEGORICAL_FEATURE_MAX.items():
        # Out-of-range ids (unseen in the curated schema) map to 0, "unknown".
        value = tf.cast(fill_in_missing(inputs[key]), tf.int64)
        outputs[f.transformed_name(key)] = tf.where(
            (value >= 0) & (value < upper), value, tf.zeros_like(value)
        )

    # The label is derived from tips and fare. Serving requests carry no tips:
    # the transform layer then prunes this output, so no label is needed there.
    fare = tf.cast(fill_in_missing(inputs[f.FARE_KEY]), tf.float32)
    tips = tf.cast(fill_in_missing(inputs[f.LABEL_KEY]), tf.float32)
    outputs[f.TRANSFORMED_LABEL_KEY] = tf.where(
        tf.math.is_nan(fare),
        tf.zeros_like(fare, dtype=tf.int64),
        tf.cast(tips > fare * f.BIG_TIP_FRACTION, tf.int64),
    )
    return outputs
