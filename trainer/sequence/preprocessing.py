"""tf.Transform over raw SequenceExamples: ragged feature lists in, padded steps out.

tfx_bsl hands each feature list over as a RaggedTensor [batch, steps, values]
("##SEQUENCE##.<column>"; a step holds one value, or none for a blank cell) and
each context feature as a dense or sparse [batch, 1] tensor. Out come:

  <feature>_xf         [batch, max_length] per-event column: numbers z-scored over
                       every present step of every sequence (a blank step is 0, the
                       mean); categories as vocabulary ids + 1 (0 pads)
  sequence_length_xf   [batch] steps kept (at most max_length)
  <context>_xf         [batch] z-scored number or vocabulary id
  <label>_xf           [batch] class index in `classes`, or the float for regression

A sequence longer than max_length keeps its last steps (`truncate: keep_first`: its
first), so a served request longer than the training data's cut is cut the same way.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tensorflow_transform as tft

from trainer.base import label_index
from trainer.sequence.features import (
    LENGTH_XF,
    OOV_BUCKETS,
    VOCABULARY,
    SequenceSpec,
    raw_sequence_name,
    sequence_spec,
    transformed_name,
)


def cut_steps(
    x: tf.RaggedTensor, max_length: int, keep_last: bool = True
) -> tuple[tf.RaggedTensor, tf.Tensor]:
    """(the steps kept, flattened over the batch: [steps, values]; their row lengths [batch])."""
    lengths = x.row_lengths()
    positions = tf.ragged.range(lengths)
    at = positions.flat_values
    row = positions.value_rowids()
    keep = at >= tf.gather(lengths - max_length, row) if keep_last else at < max_length
    return tf.ragged.boolean_mask(x.values, keep), tf.minimum(lengths, max_length)


def first_values(steps: tf.RaggedTensor, default: Any) -> tuple[tf.Tensor, tf.Tensor]:
    """(each step's value, or `default` where it has none; whether it has one)."""
    values = steps.to_tensor(default_value=default, shape=[None, 1])[:, 0]
    present = steps.row_lengths() > 0
    if values.dtype.is_floating:
        present = tf.logical_and(present, tf.logical_not(tf.math.is_nan(values)))
    return values, present


def zscore(values: tf.Tensor, present: tf.Tensor) -> tf.Tensor:
    """Z-scores over the present values of the whole dataset; a missing value is 0 (the mean)."""
    values = tf.cast(values, tf.float32)
    observed = tf.boolean_mask(values, present)
    mean = tft.mean(observed)
    std = tf.sqrt(tft.var(observed))
    scaled = (values - mean) / tf.maximum(std, 1e-6)
    return tf.where(present, scaled, tf.zeros_like(scaled))


def as_text(values: tf.Tensor) -> tf.Tensor:
    return values if values.dtype == tf.string else tf.strings.as_string(values)


def vocabulary_ids(values: tf.Tensor, name: str) -> tf.Tensor:
    """Vocabulary index + 1 (0 is padding); unseen values land in the out-of-vocabulary bucket."""
    ids = tft.compute_and_apply_vocabulary(
        as_text(values), num_oov_buckets=OOV_BUCKETS, vocab_filename=name
    )
    return ids + 1


def padded(values: tf.Tensor, lengths: tf.Tensor, max_length: int, pad: Any) -> tf.Tensor:
    return tf.RaggedTensor.from_row_lengths(values, lengths).to_tensor(
        default_value=pad, shape=[None, max_length]
    )


def _column(x, default: Any) -> tuple[tf.Tensor, tf.Tensor]:
    """A context feature ([batch, 1] dense, sparse or ragged) -> ([batch] values, present)."""
    if isinstance(x, tf.SparseTensor):
        shaped = tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1])
        values = tf.sparse.to_dense(shaped, default)[:, 0]
        ones = tf.SparseTensor(x.indices, tf.ones_like(x.values, tf.bool), shaped.dense_shape)
        present = tf.sparse.to_dense(ones, False)[:, 0]
    elif isinstance(x, tf.RaggedTensor):
        values, present = (
            x.to_tensor(default_value=default, shape=[None, 1])[:, 0],
            x.row_lengths() > 0,
        )
    else:
        values = tf.reshape(x, [-1])
        present = tf.ones_like(values, tf.bool)
    if values.dtype.is_floating:
        present = tf.logical_and(present, tf.logical_not(tf.math.is_nan(values)))
    return values, present


def _default(dtype: tf.DType) -> Any:
    return "" if dtype == tf.string else tf.constant(0, dtype)


def transform_steps(spec: SequenceSpec, inputs: dict[str, Any], outputs: dict[str, tf.Tensor]):
    lengths = None
    for name, treatment in spec.features.items():
        raw = inputs[raw_sequence_name(name)]
        steps, lengths = cut_steps(raw, spec.max_length, spec.truncate == "keep_last")
        values, present = first_values(steps, _default(steps.dtype))
        if treatment == VOCABULARY:
            ids = vocabulary_ids(values, name)
            outputs[transformed_name(name)] = padded(ids, lengths, spec.max_length, 0)
        else:
            scaled = zscore(values, present)
            outputs[transformed_name(name)] = padded(scaled, lengths, spec.max_length, 0.0)
    outputs[LENGTH_XF] = tf.cast(lengths, tf.int64)


def transform_context(spec: SequenceSpec, inputs: dict[str, Any], outputs: dict[str, tf.Tensor]):
    for name, treatment in spec.context.items():
        values, present = _column(inputs[name], _default(inputs[name].dtype))
        if treatment == VOCABULARY:
            outputs[transformed_name(name)] = vocabulary_ids(values, name)
        else:
            outputs[transformed_name(name)] = zscore(values, present)


def transform_label(spec: SequenceSpec, raw) -> tf.Tensor:
    values, _ = _column(raw, _default(raw.dtype))
    if spec.task == "regression":
        return tf.cast(values, tf.float32)
    return label_index(values, spec.classes)


def preprocessing_fn(inputs: dict[str, Any], custom_config: dict[str, Any]) -> dict[str, Any]:
    """Raw SequenceExample tensors -> padded model inputs and the transformed label."""
    spec = sequence_spec(custom_config)
    outputs: dict[str, tf.Tensor] = {}
    transform_steps(spec, inputs, outputs)
    transform_context(spec, inputs, outputs)
    # Serving requests carry no label: the transform layer then prunes this output.
    if spec.label in inputs:
        outputs[spec.label_xf] = transform_label(spec, inputs[spec.label])
    return outputs
