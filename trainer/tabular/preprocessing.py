"""tf.Transform preprocessing of any table, from the dataset file's feature treatments.

Numeric features are z-scored (or bucketized) over their *present* values; a
blank cell becomes the mean (0 after z-scoring) and sets an is-missing
indicator, so the model can tell "average" from "unknown". Strings and
categorical integers go through a vocabulary with out-of-vocabulary buckets;
a blank is one more token there. Dates, timestamps and free text are
expanded by trainer/tabular/treatments.py. The label becomes a class index (in the
dataset file's `classes` order) or stays a float for regression. Serving
requests carry no label: the transform layer then prunes the label output.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tensorflow_transform as tft

from trainer.base import label_index
from trainer.tabular import treatments
from trainer.tabular.features import (
    Feature,
    TabularSpec,
    missing_name,
    tabular_spec,
    transformed_name,
)


def _as_column(x: tf.Tensor | tf.SparseTensor) -> tf.Tensor | tf.SparseTensor:
    """[batch, 1] dense -> [batch]; sparse (a column with blank cells) -> [batch, 1] sparse."""
    if isinstance(x, tf.SparseTensor):
        return tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1])
    return tf.reshape(x, [-1])


def _dense(x: tf.Tensor | tf.SparseTensor, default: Any) -> tf.Tensor:
    if isinstance(x, tf.SparseTensor):
        return tf.squeeze(tf.sparse.to_dense(x, default), axis=1)
    return x


def _present(x: tf.SparseTensor) -> tf.Tensor:
    ones = tf.SparseTensor(x.indices, tf.ones_like(x.values, tf.float32), x.dense_shape)
    return tf.squeeze(tf.sparse.to_dense(ones, 0.0), axis=1)


def _map_values(x: tf.Tensor | tf.SparseTensor, fn) -> tf.Tensor | tf.SparseTensor:
    if isinstance(x, tf.SparseTensor):
        return tf.SparseTensor(x.indices, fn(x.values), x.dense_shape)
    return fn(x)


def _numeric(feature: Feature, x, outputs: dict[str, tf.Tensor]) -> None:
    x = _map_values(x, lambda v: tf.cast(v, tf.float32))
    name = transformed_name(feature.name)
    if feature.treatment == "bucketize":
        # Bucket `buckets` (one past the last) holds the blanks.
        buckets = tft.bucketize(x, feature.buckets)
        outputs[name] = _dense(buckets, tf.constant(feature.buckets, tf.int64))
    else:
        outputs[name] = _dense(tft.scale_to_z_score(x), 0.0)
    if isinstance(x, tf.SparseTensor):
        outputs[missing_name(feature.name)] = 1.0 - _present(x)


def _vocabulary(feature: Feature, x, outputs: dict[str, tf.Tensor]) -> None:
    strings = _map_values(x, lambda v: v if v.dtype == tf.string else tf.strings.as_string(v))
    outputs[transformed_name(feature.name)] = tft.compute_and_apply_vocabulary(
        _dense(strings, ""),
        top_k=feature.top_k,
        num_oov_buckets=feature.oov_buckets,
        vocab_filename=feature.name,
    )


def transform_label(spec: TabularSpec, raw: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    label = _as_column(raw)
    if spec.task == "regression":
        return _dense(_map_values(label, lambda v: tf.cast(v, tf.float32)), 0.0)
    default = "" if label.dtype == tf.string else tf.constant(0, label.dtype)
    return label_index(_dense(label, default), spec.classes)


def preprocessing_fn(
    inputs: dict[str, tf.Tensor], custom_config: dict[str, Any] | None = None
) -> dict[str, tf.Tensor]:
    """Raw columns -> model inputs `<name>_xf` (and `<name>_missing`), label `<label>_xf`."""
    spec = tabular_spec(custom_config)
    outputs: dict[str, tf.Tensor] = {}
    for feature in spec.features:
        x = _as_column(inputs[feature.name])
        if feature.treatment == "vocabulary":
            _vocabulary(feature, x, outputs)
        elif feature.treatment in ("date", "timestamp"):
            default = "" if x.dtype == tf.string else tf.constant(0, x.dtype)
            parts, missing = treatments.transform_date(
                x, feature.treatment, feature.format, default
            )
            outputs[transformed_name(feature.name)] = parts
            outputs[missing_name(feature.name)] = missing
        elif feature.treatment == "text":
            outputs[transformed_name(feature.name)] = treatments.transform_text(
                x, feature.name, feature.top_k, feature.oov_buckets, feature.max_tokens
            )
        else:
            _numeric(feature, x, outputs)
    outputs[spec.label_xf] = transform_label(spec, inputs[spec.label])
    return outputs
