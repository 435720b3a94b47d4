"""scikit-learn's fitted HistGradientBoosting trees as `EnsembleArrays` (trainer/tabular/trees.py).

scikit-learn has no public export of these trees: the nodes are in the
estimator's predictors (one `TreePredictor` per iteration and class, its
`nodes` a structured array) and the intercept in its baseline prediction, both
private and read through compat/sklearn.py, which refuses another scikit-learn
version than the one they were read from (before anything is exported).
"""

from __future__ import annotations

import numpy as np

from compat import sklearn as sklearn_internals
from trainer.tabular.trees import EnsembleArrays


def ensemble_arrays(estimator, outputs: int) -> EnsembleArrays:
    """The fitted estimator's trees; raw score column k is class k (or the regression value).

    outputs: the columns the model emits (classes, or 1). A class missing from
    the training rows (when 3 or more are present) gets no trees and a raw score of -1e9.
    """
    predictors, baseline = sklearn_internals.fitted_trees(estimator)
    baseline = np.asarray(baseline, dtype=np.float64).reshape(-1)
    # Which output column each tree of an iteration feeds: regression and binary
    # have one (the value, or the logit of class 1), multiclass one per class.
    if outputs == 1:
        slots = np.zeros(1, dtype=np.int64)
    else:
        slots = np.asarray(estimator.classes_, dtype=np.int64)
        if len(slots) != estimator.n_trees_per_iteration_:
            raise ValueError(
                f"only classes {list(slots)} of {outputs} occur in the training rows; "
                "a multiclass model needs at least 3 of them there"
            )
    nodes = [p.nodes for iteration in predictors for p in iteration]
    if any(n["is_categorical"].any() for n in nodes):
        raise ValueError("categorical splits are not exported; fit with numeric features only")
    width = max((len(n) for n in nodes), default=1)
    trees = len(nodes)

    def padded(field: str, dtype) -> np.ndarray:
        out = np.zeros((trees, width), dtype=dtype)
        for t, n in enumerate(nodes):
            out[t, : len(n)] = n[field]
        return out

    leaf = padded("is_leaf", np.uint8)
    # Padding nodes are never reached; marking them leaves keeps every walk inside its tree.
    for t, n in enumerate(nodes):
        leaf[t, len(n) :] = 1
    column_baseline = np.full(outputs, -1e9 if outputs > 1 else 0.0)
    column_baseline[slots] = baseline
    return EnsembleArrays(
        feature=padded("feature_idx", np.int64),
        threshold=padded("num_threshold", np.float64),
        missing_left=padded("missing_go_to_left", np.uint8),
        left=padded("left", np.int64),
        right=padded("right", np.int64),
        leaf=leaf,
        value=padded("value", np.float64),
        column=np.tile(slots, len(predictors)),
        baseline=column_baseline,
        depth=int(max((n["depth"].max() for n in nodes), default=0)),
    )
