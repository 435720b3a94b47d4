"""A trained tree ensemble as plain TensorFlow ops, so it saves into the same SavedModel.

The gradient-boosted trees (`model: gbt`, trainer/tabular/gbt.py) are fitted
by scikit-learn, then copied into constant tensors here and evaluated with
gathers and comparisons only: the SavedModel holds no custom op, so whatever
loads it with stock TensorFlow (the Evaluator, the serving check, `tfxp
predict`, batch inference, `tfxp serve`, TensorFlow Serving) runs it as it
runs the Keras MLP. TensorFlow Decision Forests' SavedModels, by contrast, need
its inference op library imported in every process that loads them.

Every tree is a row of node arrays (padded to the largest tree); all trees
walk down together, one level per step, a fixed `depth` steps (a leaf keeps
its node). Comparisons run in float64, as scikit-learn's do, so a value on a
threshold goes the same way here and there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf


@dataclass(frozen=True)
class EnsembleArrays:
    """Trees as padded node arrays [trees, nodes]; how raw scores become outputs.

    feature: the input column each split node reads (0 at leaves).
    threshold: go left when the value is <= threshold.
    missing_left: where a NaN goes.
    left, right: child node indices within the same tree.
    leaf: 1 at leaves.
    value: a leaf's contribution to its tree's output column.
    column: the output column (class) each tree adds to.
    baseline: the raw score before any tree, per output column.
    """

    feature: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaf: np.ndarray
    value: np.ndarray
    column: np.ndarray
    baseline: np.ndarray
    depth: int

    def __post_init__(self) -> None:
        shape = self.feature.shape
        for name in ("threshold", "missing_left", "left", "right", "leaf", "value"):
            if getattr(self, name).shape != shape:
                raise ValueError(f"{name} has shape {getattr(self, name).shape}, not {shape}")
        if self.column.shape != (shape[0],):
            raise ValueError(f"column must have one entry per tree ({shape[0]})")
        if shape[0] and not 0 <= self.column.max() < len(self.baseline):
            raise ValueError("a tree adds to an output column the baseline does not have")

    @property
    def outputs(self) -> int:
        return len(self.baseline)


def raw_scores(arrays: EnsembleArrays, x: np.ndarray) -> np.ndarray:
    """The ensemble's raw scores [rows, outputs] in NumPy (the reference the TF graph matches)."""
    scores = np.tile(arrays.baseline.astype(np.float64), (len(x), 1))
    for t in range(arrays.feature.shape[0]):
        node = np.zeros(len(x), dtype=np.int64)
        for _ in range(arrays.depth):
            value = x[np.arange(len(x)), arrays.feature[t, node]]
            go_left = np.where(
                np.isnan(value), arrays.missing_left[t, node], value <= arrays.threshold[t, node]
            )
            step = np.where(go_left, arrays.left[t, node], arrays.right[t, node])
            node = np.where(arrays.leaf[t, node], node, step)
        scores[:, arrays.column[t]] += arrays.value[t, node]
    return scores


class TreeEnsemble(tf.Module):
    """`__call__(x [batch, features] float) -> raw scores [batch, outputs]` in TF ops."""

    def __init__(self, arrays: EnsembleArrays, name: str = "tree_ensemble") -> None:
        super().__init__(name=name)
        trees, nodes = arrays.feature.shape
        self._depth = int(arrays.depth)
        self._nodes = nodes
        # Flattened [trees * nodes]: a (tree, node) pair is one index, tree * nodes + node.
        self._feature = tf.constant(arrays.feature.reshape(-1), tf.int32)
        self._threshold = tf.constant(arrays.threshold.reshape(-1), tf.float64)
        self._missing_left = tf.constant(arrays.missing_left.reshape(-1).astype(bool))
        self._left = tf.constant(arrays.left.reshape(-1), tf.int32)
        self._right = tf.constant(arrays.right.reshape(-1), tf.int32)
        self._leaf = tf.constant(arrays.leaf.reshape(-1).astype(bool))
        self._value = tf.constant(arrays.value.reshape(-1), tf.float64)
        self._offsets = tf.constant(np.arange(trees, dtype=np.int32) * nodes)
        # Trees -> output columns as a matrix: leaf values [batch, trees] @ [trees, outputs].
        self._columns = tf.constant(
            np.eye(arrays.outputs, dtype=np.float64)[arrays.column].reshape(trees, arrays.outputs)
        )
        self._baseline = tf.constant(arrays.baseline, tf.float64)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        x = tf.cast(x, tf.float64)
        batch = tf.shape(x)[0]
        index = tf.tile(self._offsets[tf.newaxis, :], [batch, 1])  # [batch, trees]
        for _ in range(self._depth):
            feature = tf.gather(self._feature, index)
            value = tf.gather(x, feature, batch_dims=1)
            go_left = tf.where(
                tf.math.is_nan(value),
                tf.gather(self._missing_left, index),
                value <= tf.gather(self._threshold, index),
            )
            child = tf.where(go_left, tf.gather(self._left, index), tf.gather(self._right, index))
            index = tf.where(tf.gather(self._leaf, index), index, self._offsets + child)
        leaves = tf.gather(self._value, index)
        return tf.matmul(leaves, self._columns) + self._baseline
